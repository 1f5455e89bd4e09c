//! One rank's block of a data set file, read as a stream: the examples of
//! other ranks are decoded one at a time and dropped, so a rank holds its
//! block and never the whole file (data-parallel training,
//! [`crate::Learner::distribute`]).

use std::fmt;
use std::io::{BufReader, Read};
use std::path::Path;

use factor_graph::RegionGraphSpec;
use serde::de::{DeserializeSeed, Deserializer, Error as _, SeqAccess, Visitor};

use crate::data::{DATASET_MAGIC, DATASET_MAGIC_V1, is_json};
use crate::files::HashingReader;
use crate::{Dataset, DatasetFile, ExampleRecord, FactorTypeInfo, LearnError};

/// Largest string (a name) a streamed data set may hold.
const SCRATCH_BYTES: usize = 1 << 20;

impl Dataset {
    /// [`Dataset::load`] keeping only rank `rank`'s block of the examples
    /// when they are spread over `ranks` ranks — the same data set as
    /// `Dataset::load(path)?.into_block(rank, ranks)` ([`Dataset::into_block`]).
    /// A binary file (the current format) is read as a stream: the other
    /// ranks' examples are decoded one at a time and dropped, so memory holds
    /// this rank's block only; its checksum is checked at the end. JSON files
    /// and the first binary format are read whole first.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use structlearn::{Dataset, Example, FactorTypeInfo, FeatureBlock};
    /// # let graph = Arc::new(factor_graph::grid(1, 2, 2).unwrap());
    /// # let ex = |name: &str| Example::new(name, graph.clone(), Some(vec![0, 1]),
    /// #     vec![FeatureBlock { dim: 1, values: vec![0.0; 2] }, FeatureBlock { dim: 1, values: vec![1.0] }]);
    /// let types = vec![FactorTypeInfo::new("unary", 1), FactorTypeInfo::new("pairwise", 1)];
    /// let data = Dataset::new(types, vec![ex("a"), ex("b"), ex("c")]).unwrap();
    /// let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("data.sld");
    /// data.save(&path).unwrap();
    /// let block = Dataset::load_block(&path, 1, 2).unwrap();
    /// assert_eq!(block.examples()[0].name(), "c");
    /// ```
    pub fn load_block(path: &Path, rank: usize, ranks: usize) -> Result<Dataset, LearnError> {
        if ranks <= 1 || rank >= ranks {
            return Dataset::load(path).and_then(|d| d.into_block(rank, ranks.max(1)));
        }
        let file = std::fs::File::open(path).map_err(|e| LearnError::io(path, e))?;
        let size = file.metadata().map_err(|e| LearnError::io(path, e))?.len();
        let mut reader = BufReader::with_capacity(1 << 16, file);
        let mut magic = [0u8; 8];
        let whole = is_json(path)
            || reader.read_exact(&mut magic).is_err()
            || magic == *DATASET_MAGIC_V1
            || magic != *DATASET_MAGIC;
        if whole {
            // Not the current binary format: read whole (the loader names the problem).
            return Dataset::load(path)?.into_block(rank, ranks);
        }
        let mut hashing = HashingReader::new(reader);
        let mut scratch = vec![0u8; SCRATCH_BYTES];
        let mut de = postcard::Deserializer::from_flavor(postcard::de_flavors::io::io::IOReader::new(
            &mut hashing,
            &mut scratch,
        ));
        let decoded = BlockSeed { rank, ranks }.deserialize(&mut de);
        let (file, total) = match decoded {
            Ok(v) => v,
            Err(e) => return Err(undecodable(path, &e.to_string())),
        };
        // The checksum covers the body to its end: bytes after the decoded
        // value too (`Dataset::load` accepts those as well), then 8 bytes.
        let mut rest = Vec::new();
        hashing.inner.read_to_end(&mut rest).map_err(|e| LearnError::io(path, e))?;
        let intact = rest.len() >= 8 && {
            let (tail, stored) = rest.split_at(rest.len() - 8);
            let stored = u64::from_le_bytes(stored.try_into().unwrap_or_default());
            crate::files::fnv1a_continue(hashing.hash, tail) == stored
        };
        if !intact {
            return Err(LearnError::bad_file(path, "corrupt or truncated (checksum mismatch)"));
        }
        if total < ranks {
            return Err(LearnError::Ranks(format!(
                "{total} examples cannot be spread over {ranks} ranks (every rank needs one)"
            )));
        }
        file.into_dataset_from(usize::try_from(size).unwrap_or(usize::MAX), path)
    }
}

/// The error of a body that does not decode: a corrupt or truncated file
/// (its checksum, checked after the body, could not be reached).
fn undecodable(path: &Path, reason: &str) -> LearnError {
    LearnError::bad_file(path, format!("corrupt or truncated (the data set body does not decode: {reason})"))
}

/// Decodes a [`DatasetFile`] keeping rank `rank`'s block of the examples;
/// also returns how many examples the file holds.
struct BlockSeed {
    rank: usize,
    ranks: usize,
}

impl<'de> DeserializeSeed<'de> for BlockSeed {
    type Value = (DatasetFile, usize);
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        const FIELDS: &[&str] = &["format", "version", "factor_types", "graphs", "examples"];
        d.deserialize_struct("DatasetFile", FIELDS, self)
    }
}

impl<'de> Visitor<'de> for BlockSeed {
    type Value = (DatasetFile, usize);
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a structlearn data set")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let missing = |what| A::Error::custom(format!("no {what}"));
        let format: String = seq.next_element()?.ok_or_else(|| missing("format"))?;
        let version: u32 = seq.next_element()?.ok_or_else(|| missing("version"))?;
        let factor_types: Vec<FactorTypeInfo> = seq.next_element()?.ok_or_else(|| missing("factor types"))?;
        let graphs: Vec<RegionGraphSpec> = seq.next_element()?.ok_or_else(|| missing("graphs"))?;
        let (examples, total) = seq
            .next_element_seed(ExamplesSeed { rank: self.rank, ranks: self.ranks })?
            .ok_or_else(|| missing("examples"))?;
        Ok((DatasetFile { format, version, factor_types, graphs, examples }, total))
    }
}

/// The examples of one rank's block, and how many there are in all.
struct ExamplesSeed {
    rank: usize,
    ranks: usize,
}

impl<'de> DeserializeSeed<'de> for ExamplesSeed {
    type Value = (Vec<ExampleRecord>, usize);
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for ExamplesSeed {
    type Value = (Vec<ExampleRecord>, usize);
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the examples")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let total = seq.size_hint().ok_or_else(|| A::Error::custom("the number of examples is not recorded"))?;
        // Too few examples is reported after the checksum (a corrupt count is a corrupt file).
        let block = if total >= self.ranks { oracles::collective::block(total, self.rank, self.ranks) } else { 0..0 };
        let mut kept = Vec::new();
        for k in 0..total {
            // Every example is decoded (the checksum covers them all); the block's are kept.
            let example: ExampleRecord =
                seq.next_element()?.ok_or_else(|| A::Error::custom(format!("example {k} of {total} is missing")))?;
            if block.contains(&k) {
                kept.push(example);
            }
        }
        Ok((kept, total))
    }
}
