//! Where a warm-started evaluation keeps each example's messages between
//! evaluations ([`EvaluationMessages`]): in memory, or in an unnamed
//! temporary file read and written one example at a time, so that an
//! evaluation holds only the messages of the examples being predicted. The
//! validation set's kept scores ([`super::kept_scores`]) are kept the same way.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::sync::{Mutex, MutexGuard};

use serde::ser::{Error as _, SerializeSeq};
use serde::{Deserialize, Serialize, Serializer};
use smoothed_inference::Messages;

use crate::{Dataset, LearnError};

/// Where warm-started evaluation keeps each example's messages between
/// evaluations ([`crate::TrainConfig::evaluation_messages`]). Both give the
/// same numbers bit for bit; they differ in memory.
///
/// ```
/// use structlearn::{EvaluationMessages, TrainConfig};
/// assert_eq!(TrainConfig::default().evaluation_messages, EvaluationMessages::TempFile);
/// assert_eq!(serde_json::to_value(EvaluationMessages::Memory).unwrap(), "memory");
/// assert_eq!("temp-file".parse::<EvaluationMessages>().unwrap(), EvaluationMessages::TempFile);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EvaluationMessages {
    /// One message array per example in memory: as many bytes as the
    /// learner's own messages for the training set (251 bytes per pixel on an
    /// 8-label 4-connected grid), held for the whole run.
    Memory,
    /// An unnamed temporary file in the system's temporary directory
    /// (`$TMPDIR`, else `/tmp`), removed by the operating system when the run
    /// ends, even if it is killed; each example's messages (and kept scores)
    /// are read before its prediction and written back after it. Where that directory is a RAM
    /// file system (`tmpfs`) the memory is only moved; set `TMPDIR` to a disk
    /// directory there.
    TempFile,
}

impl EvaluationMessages {
    /// The names, as in configuration files and on the command line.
    pub const NAMES: [(&'static str, Self); 2] = [("memory", Self::Memory), ("temp-file", Self::TempFile)];
}

impl std::str::FromStr for EvaluationMessages {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Self::NAMES.iter().find(|(name, _)| *name == s).map(|&(_, v)| v).ok_or_else(|| {
            let names: Vec<_> = Self::NAMES.iter().map(|(n, _)| *n).collect();
            format!("unknown evaluation message store `{s}` (expected one of: {})", names.join(", "))
        })
    }
}

impl std::fmt::Display for EvaluationMessages {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = Self::NAMES.iter().find(|(_, v)| v == self).map_or("?", |(n, _)| n);
        f.write_str(name)
    }
}

/// One data set's evaluation messages, kept as [`EvaluationMessages`] says.
#[derive(Debug)]
pub(super) enum MessageStore {
    /// In memory.
    Memory(Vec<Messages>),
    /// In a temporary file.
    File(ExampleFile),
}

impl MessageStore {
    /// All-zero messages for every example of `data`, kept as `how` says.
    pub(super) fn zeros(data: &Dataset, how: EvaluationMessages) -> Result<Self, LearnError> {
        Ok(match how {
            EvaluationMessages::Memory => Self::Memory(crate::model::zero_messages(data)),
            EvaluationMessages::TempFile => Self::File(ExampleFile::zeros(data).map_err(temp_file_error)?),
        })
    }

    /// Messages restored from a checkpoint (`saved[k]` of example `k`, already
    /// checked against its graph), kept as `how` says.
    pub(super) fn from_saved(
        data: &Dataset,
        saved: Vec<Messages>,
        how: EvaluationMessages,
    ) -> Result<Self, LearnError> {
        Ok(match how {
            EvaluationMessages::Memory => Self::Memory(saved),
            EvaluationMessages::TempFile => {
                let file = ExampleFile::zeros(data).map_err(temp_file_error)?;
                for (k, m) in saved.iter().enumerate() {
                    file.keep(k, m)?;
                }
                Self::File(file)
            }
        })
    }
}

/// A data set's evaluation messages in a checkpoint's form: a sequence of one
/// number sequence per example, serialized like `Vec<&[f64]>` (`None`, not
/// evaluated yet: no examples), read from the file one example at a time.
pub(super) struct CheckpointMessages<'a>(pub(super) Option<&'a MessageStore>);

impl Serialize for CheckpointMessages<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            None => serializer.collect_seq(std::iter::empty::<&[f64]>()),
            Some(MessageStore::Memory(all)) => serializer.collect_seq(all.iter().map(Messages::as_slice)),
            Some(MessageStore::File(file)) => {
                let mut seq = serializer.serialize_seq(Some(file.len()))?;
                let mut buffer = Vec::new();
                for k in 0..file.len() {
                    file.load(k, &mut buffer).map_err(|e| S::Error::custom(example_error(k, e)))?;
                    seq.serialize_element(&buffer[..])?;
                }
                seq.end()
            }
        }
    }
}

/// Refuses, before any work, a run whose evaluation may keep its messages
/// (warm-started) or a boosted type's validation scores (whether or not
/// warm-started) in a temporary file (`how`) where none can be made, instead
/// of failing at the first evaluation.
pub(super) fn check_temp_dir(how: EvaluationMessages, evaluates: bool) -> Result<(), LearnError> {
    if how == EvaluationMessages::TempFile && evaluates {
        tempfile::tempfile().map_err(temp_file_error)?;
    }
    Ok(())
}

pub(super) fn temp_file_error(e: io::Error) -> LearnError {
    LearnError::Io {
        path: format!(
            "{} (the evaluation's temporary file of messages or scores; set TMPDIR to another directory, \
             or `evaluation_messages` to `memory`)",
            std::env::temp_dir().display()
        ),
        source: e,
    }
}

/// Bytes an [`ExampleFile`] reads or writes per call.
const CHUNK: usize = 64 * 1024;

/// Every example's numbers (its messages, or its kept scores,
/// [`super::kept_scores`]) in an unnamed temporary file, example `k`'s
/// numbers `start[k]..start[k + 1]` from byte `8 · start[k]`, little-endian.
/// Threads predicting other examples take turns at the file (a seek and one
/// read or write of an example's bytes: little beside its message passing).
#[derive(Debug)]
pub(super) struct ExampleFile {
    file: Mutex<File>,
    /// `start[k]..start[k + 1]`: example `k`'s numbers.
    start: Vec<u64>,
}

impl ExampleFile {
    /// A file of all-zero messages for `data`.
    pub(super) fn zeros(data: &Dataset) -> io::Result<Self> {
        Self::zeros_of(data.examples().iter().map(|e| e.graph().total_message_len()))
    }

    /// A file of `lengths[k]` zeros for each example `k` (a sparse file of
    /// zero bytes: the bytes of `+0.0`).
    pub(super) fn zeros_of(lengths: impl IntoIterator<Item = usize>) -> io::Result<Self> {
        let mut start = vec![0u64];
        for n in lengths {
            start.push(start[start.len() - 1] + n as u64);
        }
        let file = tempfile::tempfile()?;
        file.set_len(8 * start[start.len() - 1])?;
        Ok(Self { file: Mutex::new(file), start })
    }

    /// Number of examples.
    pub(super) fn len(&self) -> usize {
        self.start.len() - 1
    }

    /// The file, positioned at example `k`'s first byte; its number count.
    fn at(&self, k: usize) -> io::Result<(MutexGuard<'_, File>, usize)> {
        // A thread that panicked holding the lock left no partial state the next seek depends on.
        let mut file = self.file.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        file.seek(SeekFrom::Start(8 * self.start[k]))?;
        Ok((file, (self.start[k + 1] - self.start[k]) as usize))
    }

    /// Example `k`'s numbers into `out` (replacing its contents), read
    /// [`CHUNK`] bytes at a time (no array of the example's bytes).
    pub(super) fn load(&self, k: usize, out: &mut Vec<f64>) -> io::Result<()> {
        let (mut file, n) = self.at(k)?;
        out.clear();
        out.reserve(n);
        let mut bytes = [0u8; CHUNK];
        while out.len() < n {
            let chunk = &mut bytes[..8 * (n - out.len()).min(CHUNK / 8)];
            file.read_exact(chunk)?;
            out.extend(chunk.chunks_exact(8).map(|b| f64::from_le_bytes(b.try_into().expect("8 bytes"))));
        }
        Ok(())
    }

    /// Writes example `k`'s numbers, [`CHUNK`] bytes at a time.
    pub(super) fn store(&self, k: usize, values: &[f64]) -> io::Result<()> {
        let (mut file, n) = self.at(k)?;
        if values.len() != n {
            return Err(io::Error::other(format!("example {k} has {n} numbers, got {}", values.len())));
        }
        let mut bytes = [0u8; CHUNK];
        for part in values.chunks(CHUNK / 8) {
            for (b, v) in bytes.chunks_exact_mut(8).zip(part) {
                b.copy_from_slice(&v.to_le_bytes());
            }
            file.write_all(&bytes[..8 * part.len()])?;
        }
        Ok(())
    }

    /// Example `k`'s messages for its graph, for a prediction.
    pub(super) fn messages(&self, data: &Dataset, k: usize) -> Result<Messages, LearnError> {
        let mut values = Vec::new();
        self.load(k, &mut values).map_err(|e| example_error(k, e))?;
        Messages::from_vec(data.examples()[k].graph(), values)
            .map_err(|source| LearnError::Inference { example: k, source })
    }

    /// Writes example `k`'s messages after its prediction.
    pub(super) fn keep(&self, k: usize, m: &Messages) -> Result<(), LearnError> {
        self.store(k, m.as_slice()).map_err(|e| example_error(k, e))
    }
}

pub(super) fn example_error(k: usize, e: io::Error) -> LearnError {
    temp_file_error(io::Error::new(e.kind(), format!("example {k}: {e}")))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::{Example, FactorTypeInfo, FeatureBlock};

    fn data(sizes: &[(usize, usize)]) -> Dataset {
        let examples = sizes
            .iter()
            .enumerate()
            .map(|(i, &(h, w))| {
                let g = Arc::new(factor_graph::grid(h, w, 3).unwrap());
                let pairs = g.regions_of_type(1).len();
                Example::new(
                    format!("e{i}"),
                    g,
                    Some(vec![0; h * w]),
                    vec![
                        FeatureBlock { dim: 1, values: vec![0.5; h * w] },
                        FeatureBlock { dim: 1, values: vec![1.0; pairs] },
                    ],
                )
            })
            .collect();
        Dataset::new(vec![FactorTypeInfo::new("unary", 1), FactorTypeInfo::new("pairwise", 1)], examples).unwrap()
    }

    #[test]
    fn the_file_keeps_each_examples_messages_and_starts_at_zero() {
        let d = data(&[(2, 3), (1, 1), (4, 2)]);
        let file = ExampleFile::zeros(&d).unwrap();
        assert_eq!(file.len(), 3);
        let mut buffer = vec![7.0];
        for (k, e) in d.examples().iter().enumerate() {
            file.load(k, &mut buffer).unwrap();
            assert_eq!(buffer.len(), e.graph().total_message_len());
            assert!(buffer.iter().all(|v| v.to_bits() == 0), "zeros are +0.0");
        }
        // Distinct values per example, including a negative zero and a subnormal.
        let values: Vec<Vec<f64>> = d
            .examples()
            .iter()
            .enumerate()
            .map(|(k, e)| {
                (0..e.graph().total_message_len()).map(|i| (k * 1000 + i) as f64 * -0.37 + f64::MIN_POSITIVE).collect()
            })
            .collect();
        for k in [2, 0, 1] {
            file.store(k, &values[k]).unwrap();
        }
        for (k, v) in values.iter().enumerate() {
            file.load(k, &mut buffer).unwrap();
            assert_eq!(
                buffer.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                v.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
            );
        }
        assert!(file.store(0, &values[1]).is_err(), "a wrong length is refused");
    }

    /// Examples of any length, from none to several chunks and a part, each
    /// read back bit for bit beside its neighbours.
    #[test]
    fn numbers_longer_than_a_chunk_are_kept_whole() {
        let per_chunk = super::CHUNK / 8;
        let lengths = [0, 1, per_chunk - 1, per_chunk, per_chunk + 1, 3 * per_chunk + 5, 2];
        let file = ExampleFile::zeros_of(lengths).unwrap();
        let values: Vec<Vec<f64>> = lengths
            .iter()
            .enumerate()
            .map(|(k, &n)| {
                (0..n).map(|i| f64::from_bits((k as u64) << 52 ^ i as u64 ^ 0x8000_0000_0000_0000)).collect()
            })
            .collect();
        for k in (0..lengths.len()).rev() {
            file.store(k, &values[k]).unwrap();
        }
        let mut buffer = vec![1.0; 3];
        for (k, v) in values.iter().enumerate() {
            file.load(k, &mut buffer).unwrap();
            let bits = |x: &[f64]| x.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&buffer), bits(v), "example {k}");
        }
    }

    #[test]
    fn a_checkpoint_holds_the_same_bytes_from_memory_and_from_the_file() {
        let d = data(&[(2, 2), (3, 1)]);
        let messages: Vec<Messages> = d
            .examples()
            .iter()
            .map(|e| {
                let n = e.graph().total_message_len();
                Messages::from_vec(e.graph(), (0..n).map(|i| i as f64 / 3.0).collect()).unwrap()
            })
            .collect();
        let memory = MessageStore::from_saved(&d, messages.clone(), EvaluationMessages::Memory).unwrap();
        let file = MessageStore::from_saved(&d, messages.clone(), EvaluationMessages::TempFile).unwrap();
        let reference: Vec<&[f64]> = messages.iter().map(Messages::as_slice).collect();
        let expected = postcard::to_allocvec(&reference).unwrap();
        assert_eq!(postcard::to_allocvec(&CheckpointMessages(Some(&memory))).unwrap(), expected);
        assert_eq!(postcard::to_allocvec(&CheckpointMessages(Some(&file))).unwrap(), expected);
        let empty: Vec<&[f64]> = Vec::new();
        assert_eq!(postcard::to_allocvec(&CheckpointMessages(None)).unwrap(), postcard::to_allocvec(&empty).unwrap());
    }
}
