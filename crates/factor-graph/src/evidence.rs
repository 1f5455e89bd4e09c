//! UAI evidence files (`.evid`): observed variables and their values, and
//! clamping a converted model to them.
//!
//! Two layouts are accepted, as the UAI competitions used both:
//!
//! ```text
//! 2  0 1  3 0          since 2014: count of observed variables, then `variable value` pairs
//! 1
//! 2  0 1  3 0          2008–2012: count of samples (must be 1), then one sample as above
//! ```
//!
//! The file alone does not say which it is when its first number is 1; the
//! number of tokens does: it is read as the sample layout when its first
//! number is 1 and it has exactly `2 + 2k` numbers, `k` its second, and as
//! the one-line layout otherwise (`1 + 2k` numbers, `k` its first), so a
//! sample count other than 1 is an error of the one-line layout.
//!
//! [`UaiEvidence::clamp`] conditions a converted model on the evidence by
//! setting `θ = −∞` on every other label of each observed variable's singleton
//! region: every labelling that disagrees with the evidence is forbidden,
//! every other keeps its score, so the best labelling and its score are those
//! of the model with the observed variables removed by hand (their values
//! substituted into the factors), and the observed variables keep their values
//! in every labelling reported.
//!
//! ```
//! use factor_graph::{UaiEvidence, UaiModel};
//! let model = UaiModel::parse("MARKOV\n2\n2 3\n1\n2 0 1\n6\n1 2 3 4 5 6\n").unwrap();
//! let evidence = UaiEvidence::parse("1 1 2", &model.cardinalities).unwrap();
//! assert_eq!(evidence.observed, vec![(1, 2)]);
//! let mut m = model.to_region_graph().unwrap();
//! evidence.clamp(&mut m);
//! assert_eq!(m.theta[m.graph.config_range(1)], [f64::NEG_INFINITY, f64::NEG_INFINITY, 0.0]);
//! ```

use std::path::Path;

use crate::UaiRegionModel;

/// Errors reading a UAI evidence file: each names the line (1-based) and the
/// item; [`EvidenceError::InFile`] adds the file.
///
/// ```
/// let err = factor_graph::UaiEvidence::parse("1\n0 5\n", &[2, 2]).unwrap_err();
/// assert_eq!(err.to_string(), "evidence line 2: variable 0 observed with value 5, but it has only 2 values (0..=1)");
/// ```
#[derive(Debug, thiserror::Error)]
pub enum EvidenceError {
    /// The text does not follow the format (a non-number, a count that is not
    /// 1 in the sample layout, the file ending early).
    #[error("evidence line {line}: expected {expected}, found {found}")]
    Parse {
        /// 1-based line number.
        line: usize,
        /// What the parser expected.
        expected: String,
        /// What it found (`end of file` at the end).
        found: String,
    },
    /// Text after the last declared observation.
    #[error("evidence line {line}: expected end of file after {observed} observations, found `{found}`")]
    Trailing {
        /// 1-based line number.
        line: usize,
        /// Observations declared (and read).
        observed: usize,
        /// The first extra token.
        found: String,
    },
    /// A variable index the model does not have: evidence for another model.
    #[error(
        "evidence line {line}: variable {variable} does not exist: the model has {num_variables} variables \
         (0..={}); is this evidence for another model?",
        num_variables.saturating_sub(1)
    )]
    VariableOutOfRange {
        /// 1-based line number.
        line: usize,
        /// The variable named.
        variable: usize,
        /// Variables of the model.
        num_variables: usize,
    },
    /// A value at or above the variable's cardinality.
    #[error(
        "evidence line {line}: variable {variable} observed with value {value}, but it has only {cardinality} values (0..={})",
        cardinality.saturating_sub(1)
    )]
    ValueOutOfRange {
        /// 1-based line number.
        line: usize,
        /// The variable.
        variable: usize,
        /// The value given.
        value: usize,
        /// Its cardinality.
        cardinality: usize,
    },
    /// The same variable observed twice.
    #[error("evidence line {line}: variable {variable} is observed twice (first on line {first_line})")]
    ObservedTwice {
        /// 1-based line of the second observation.
        line: usize,
        /// The variable.
        variable: usize,
        /// 1-based line of the first observation.
        first_line: usize,
    },
    /// An error in a file: the file's path, then the error.
    #[error("{path}: {source}")]
    InFile {
        /// Path of the evidence file.
        path: String,
        /// What is wrong with it.
        #[source]
        source: Box<EvidenceError>,
    },
    /// Reading the file failed.
    #[error("evidence file {path}: {source}")]
    Io {
        /// Path involved.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

/// Observed variables of a UAI model (module docs).
///
/// ```
/// let e = factor_graph::UaiEvidence::parse("1\n2 0 1 2 0\n", &[2, 2, 2]).unwrap(); // the sample layout
/// assert_eq!(e.observed, vec![(0, 1), (2, 0)]);
/// assert_eq!(e.value_of(2), Some(0));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct UaiEvidence {
    /// `(variable, value)` in file order; each variable at most once, each
    /// value below its cardinality.
    pub observed: Vec<(usize, usize)>,
}

impl UaiEvidence {
    /// Parses evidence for a model with these cardinalities (module docs for
    /// the two layouts); errors name the line and the item.
    pub fn parse(text: &str, cardinalities: &[usize]) -> Result<Self, EvidenceError> {
        let tokens = crate::uai::tokens(text);
        let last_line = tokens.last().map_or(1, |t| t.0);
        let mut pos = 0usize;
        let mut next = |expected: &str| -> Result<(usize, usize), EvidenceError> {
            let Some(&(line, tok)) = tokens.get(pos) else {
                return Err(EvidenceError::Parse {
                    line: last_line,
                    expected: expected.to_string(),
                    found: "end of file".into(),
                });
            };
            pos += 1;
            tok.parse::<usize>().map(|v| (line, v)).map_err(|_| EvidenceError::Parse {
                line,
                expected: expected.to_string(),
                found: format!("`{tok}`"),
            })
        };
        let (_, first) = next("the number of observed variables")?;
        // The sample layout: `1` sample, then its count, then exactly that
        // many pairs (module docs).
        let sample_count = tokens.get(1).and_then(|t| t.1.parse::<usize>().ok());
        let count = match sample_count {
            Some(k) if first == 1 && k.checked_mul(2).and_then(|p| p.checked_add(2)) == Some(tokens.len()) => {
                next("the number of observed variables of the sample")?.1
            }
            _ => first,
        };
        let mut observed = Vec::with_capacity(count.min(tokens.len()));
        let mut seen_on = vec![0usize; cardinalities.len()];
        for k in 0..count {
            let (line, variable) = next(&format!("the variable of observation {k} (of {count})"))?;
            if variable >= cardinalities.len() {
                return Err(EvidenceError::VariableOutOfRange { line, variable, num_variables: cardinalities.len() });
            }
            if seen_on[variable] != 0 {
                return Err(EvidenceError::ObservedTwice { line, variable, first_line: seen_on[variable] });
            }
            seen_on[variable] = line;
            let (line, value) = next(&format!("the value of variable {variable} (observation {k})"))?;
            if value >= cardinalities[variable] {
                return Err(EvidenceError::ValueOutOfRange {
                    line,
                    variable,
                    value,
                    cardinality: cardinalities[variable],
                });
            }
            observed.push((variable, value));
        }
        if let Some(&(line, tok)) = tokens.get(pos) {
            return Err(EvidenceError::Trailing { line, observed: count, found: tok.to_string() });
        }
        Ok(Self { observed })
    }

    /// Reads and parses an evidence file; errors name the file.
    ///
    /// ```
    /// let path = std::env::temp_dir().join(format!("evid-doc-{}.evid", std::process::id()));
    /// std::fs::write(&path, "1 3 0\n").unwrap();
    /// let err = factor_graph::UaiEvidence::read(&path, &[2, 2]).unwrap_err().to_string();
    /// assert!(err.starts_with(&path.display().to_string()) && err.contains("variable 3 does not exist"));
    /// std::fs::remove_file(&path).unwrap();
    /// ```
    pub fn read(path: &Path, cardinalities: &[usize]) -> Result<Self, EvidenceError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| EvidenceError::Io { path: path.display().to_string(), source })?;
        Self::parse(&text, cardinalities)
            .map_err(|e| EvidenceError::InFile { path: path.display().to_string(), source: Box::new(e) })
    }

    /// The observed value of `variable`, if observed.
    pub fn value_of(&self, variable: usize) -> Option<usize> {
        self.observed.iter().find(|&&(v, _)| v == variable).map(|&(_, x)| x)
    }

    /// Clamps a converted model to the evidence: `θ = −∞` on every label but
    /// the observed one in each observed variable's singleton region (module
    /// docs). The evidence must be for this model (parsed with its
    /// cardinalities); observations of variables it does not have are skipped.
    pub fn clamp(&self, model: &mut UaiRegionModel) {
        for &(v, x) in &self.observed {
            let Some(r) = (v < model.graph.num_variables()).then(|| model.graph.singleton(v)).flatten() else {
                continue;
            };
            let range = model.graph.config_range(r);
            for (y, t) in model.theta[range].iter_mut().enumerate() {
                if y != x {
                    *t = f64::NEG_INFINITY;
                }
            }
        }
    }
}
