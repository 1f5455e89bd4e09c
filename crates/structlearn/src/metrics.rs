//! Evaluation metrics of a labelling against the truth, pooled over all
//! variables of all examples: error rate, per-class accuracy, the confusion
//! matrix and intersection-over-union (the segmentation measures of
//! scikit-learn's `confusion_matrix` / `jaccard_score`).
//!
//! With `C[t][p]` = the number of variables of true class `t` predicted as `p`:
//!
//! * error rate `= 1 − Σ_c C[c][c] / Σ_{t,p} C[t][p]` (the paper's "univariate error");
//! * accuracy of class `c` (its recall) `= C[c][c] / Σ_p C[c][p]`, undefined when
//!   no variable has true class `c`;
//! * IoU of class `c` `= C[c][c] / (Σ_p C[c][p] + Σ_t C[t][c] − C[c][c])`,
//!   undefined when class `c` is neither true nor predicted anywhere;
//! * mean IoU and mean class accuracy average the defined values.
//!
//! ```
//! use structlearn::metrics::ConfusionMatrix;
//! let mut m = ConfusionMatrix::new(2);
//! m.add_labels(&[0, 0, 1, 1], &[0, 1, 1, 1]).unwrap();
//! assert_eq!(m.count(0, 1), 1);
//! assert_eq!(m.error_rate(), 0.25);
//! assert_eq!(m.class_accuracy(), vec![Some(0.5), Some(1.0)]);
//! assert_eq!(m.iou(), vec![Some(0.5), Some(2.0 / 3.0)]);
//! assert_eq!(m.mean_iou(), Some((0.5 + 2.0 / 3.0) / 2.0));
//! ```

use serde::{Deserialize, Serialize};

use crate::{Dataset, LearnError, Prediction};

/// Counts of (true class, predicted class) pairs over variables.
///
/// ```
/// let mut m = structlearn::ConfusionMatrix::new(3);
/// m.add(2, 2).unwrap();
/// m.add(2, 0).unwrap();
/// assert_eq!((m.support(2), m.predicted(0), m.total()), (2, 1, 2));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfusionMatrix {
    classes: usize,
    /// Row-major `classes × classes`: `counts[t · classes + p]`.
    counts: Vec<u64>,
}

impl ConfusionMatrix {
    /// An empty matrix over classes `0..classes`.
    pub fn new(classes: usize) -> Self {
        Self { classes, counts: vec![0; classes * classes] }
    }

    /// Counts the labelling `predicted` of the data set's examples against
    /// their labels (every example needs labels; one prediction per example),
    /// skipping variables whose label is unknown ([`Dataset::ignored`]).
    /// The classes are `0..` the largest variable cardinality.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use structlearn::metrics::ConfusionMatrix;
    /// use structlearn::{Dataset, Example, FactorTypeInfo, FeatureBlock};
    /// let graph = std::sync::Arc::new(factor_graph::grid(1, 2, 2)?);
    /// let features = vec![FeatureBlock { dim: 1, values: vec![0.0; 2] }, FeatureBlock { dim: 1, values: vec![0.0] }];
    /// let example = Example::new("a", graph, Some(vec![0, 1]), features);
    /// let data = Dataset::new(vec![FactorTypeInfo::new("unary", 1), FactorTypeInfo::new("pairwise", 1)], vec![example])?;
    /// let m = ConfusionMatrix::from_labelings(&data, &[vec![1, 1]])?;
    /// assert_eq!((m.count(0, 1), m.count(1, 1)), (1, 1));
    /// # Ok(()) }
    /// ```
    pub fn from_labelings(data: &Dataset, predicted: &[Vec<usize>]) -> Result<Self, LearnError> {
        if predicted.len() != data.len() {
            return Err(LearnError::Config(format!(
                "{} predicted labellings for {} examples",
                predicted.len(),
                data.len()
            )));
        }
        let classes =
            data.examples().iter().flat_map(|ex| ex.graph().cardinalities().iter().copied()).max().unwrap_or(0);
        let mut m = Self::new(classes);
        for (k, p) in predicted.iter().enumerate() {
            let ex = &data.examples()[k];
            let err = |e: LearnError| LearnError::Config(format!("example {k} (`{}`): {e}", ex.name()));
            let truth = data.labels(k)?;
            if data.ignored(k).is_none() {
                m.add_labels(truth, p).map_err(err)?;
            } else {
                if truth.len() != p.len() {
                    return Err(err(LearnError::Config(format!(
                        "{} true labels but {} predicted ones",
                        truth.len(),
                        p.len()
                    ))));
                }
                for i in (0..truth.len()).filter(|&i| data.is_labelled(k, i)) {
                    m.add(truth[i], p[i]).map_err(err)?;
                }
            }
        }
        Ok(m)
    }

    /// [`ConfusionMatrix::from_labelings`] of predictions.
    pub fn from_predictions(data: &Dataset, predictions: &[Prediction]) -> Result<Self, LearnError> {
        let labels: Vec<Vec<usize>> = predictions.iter().map(|p| p.labels.clone()).collect();
        Self::from_labelings(data, &labels)
    }

    /// Adds one variable.
    pub fn add(&mut self, truth: usize, predicted: usize) -> Result<(), LearnError> {
        if truth >= self.classes || predicted >= self.classes {
            return Err(LearnError::Config(format!(
                "label pair ({truth}, {predicted}) is outside the {} classes",
                self.classes
            )));
        }
        self.counts[truth * self.classes + predicted] += 1;
        Ok(())
    }

    /// Adds one example's variables (equal lengths).
    pub fn add_labels(&mut self, truth: &[usize], predicted: &[usize]) -> Result<(), LearnError> {
        if truth.len() != predicted.len() {
            return Err(LearnError::Config(format!(
                "{} true labels but {} predicted ones",
                truth.len(),
                predicted.len()
            )));
        }
        // Checked first, so a bad pair leaves the matrix unchanged.
        if let Some((t, p)) = truth.iter().zip(predicted).find(|(t, p)| **t >= self.classes || **p >= self.classes) {
            return self.add(*t, *p);
        }
        truth.iter().zip(predicted).try_for_each(|(&t, &p)| self.add(t, p))
    }

    /// Number of classes.
    pub fn classes(&self) -> usize {
        self.classes
    }

    /// Variables of true class `truth` predicted as `predicted`.
    pub fn count(&self, truth: usize, predicted: usize) -> u64 {
        self.counts[truth * self.classes + predicted]
    }

    /// The matrix as rows (true class) of columns (predicted class).
    pub fn rows(&self) -> Vec<Vec<u64>> {
        self.counts.chunks(self.classes.max(1)).map(<[u64]>::to_vec).collect()
    }

    /// Variables counted.
    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// Variables of true class `c`.
    pub fn support(&self, c: usize) -> u64 {
        (0..self.classes).map(|p| self.count(c, p)).sum()
    }

    /// Variables predicted as class `c`.
    pub fn predicted(&self, c: usize) -> u64 {
        (0..self.classes).map(|t| self.count(t, c)).sum()
    }

    fn correct(&self) -> u64 {
        (0..self.classes).map(|c| self.count(c, c)).sum()
    }

    /// Fraction of misclassified variables (0 when nothing was counted).
    pub fn error_rate(&self) -> f64 {
        let total = self.total();
        if total == 0 { 0.0 } else { (total - self.correct()) as f64 / total as f64 }
    }

    /// Per class, the fraction of its variables predicted correctly (recall);
    /// `None` for a class no variable has.
    pub fn class_accuracy(&self) -> Vec<Option<f64>> {
        (0..self.classes)
            .map(|c| {
                let support = self.support(c);
                (support > 0).then(|| self.count(c, c) as f64 / support as f64)
            })
            .collect()
    }

    /// Per class, intersection over union of the true and predicted sets;
    /// `None` for a class neither true nor predicted anywhere.
    pub fn iou(&self) -> Vec<Option<f64>> {
        (0..self.classes)
            .map(|c| {
                let union = self.support(c) + self.predicted(c) - self.count(c, c);
                (union > 0).then(|| self.count(c, c) as f64 / union as f64)
            })
            .collect()
    }

    /// Mean of the defined per-class IoUs (`None` if none is defined).
    pub fn mean_iou(&self) -> Option<f64> {
        mean_defined(&self.iou())
    }

    /// Mean of the defined per-class accuracies (`None` if none is defined).
    pub fn mean_class_accuracy(&self) -> Option<f64> {
        mean_defined(&self.class_accuracy())
    }

    /// Every measure as one serialisable report.
    pub fn report(&self) -> MetricsReport {
        let accuracy = self.class_accuracy();
        let iou = self.iou();
        MetricsReport {
            variables: self.total(),
            error: self.error_rate(),
            accuracy: 1.0 - self.error_rate(),
            mean_class_accuracy: self.mean_class_accuracy(),
            mean_iou: self.mean_iou(),
            per_class: (0..self.classes)
                .map(|c| ClassMetrics {
                    class: c,
                    support: self.support(c),
                    predicted: self.predicted(c),
                    accuracy: accuracy[c],
                    iou: iou[c],
                })
                .collect(),
            confusion: self.rows(),
        }
    }
}

fn mean_defined(values: &[Option<f64>]) -> Option<f64> {
    let defined: Vec<f64> = values.iter().flatten().copied().collect();
    (!defined.is_empty()).then(|| defined.iter().sum::<f64>() / defined.len() as f64)
}

/// The measures of one class in a [`MetricsReport`].
///
/// ```
/// let mut m = structlearn::ConfusionMatrix::new(2);
/// m.add_labels(&[1, 1], &[1, 0]).unwrap();
/// let c = &m.report().per_class[1];
/// assert_eq!((c.support, c.predicted, c.accuracy, c.iou), (2, 1, Some(0.5), Some(0.5)));
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClassMetrics {
    /// The class (label index).
    pub class: usize,
    /// Variables of this true class.
    pub support: u64,
    /// Variables predicted as this class.
    pub predicted: u64,
    /// Fraction of the class's variables predicted correctly (`None`: no support).
    pub accuracy: Option<f64>,
    /// Intersection over union (`None`: neither true nor predicted).
    pub iou: Option<f64>,
}

/// Every measure of a [`ConfusionMatrix`] (serialised by `structlearn eval --json`).
///
/// ```
/// let mut m = structlearn::ConfusionMatrix::new(2);
/// m.add_labels(&[0, 1, 1], &[0, 1, 0]).unwrap();
/// let report = m.report();
/// assert_eq!(report.per_class[1].support, 2);
/// assert_eq!(serde_json::to_value(&report).unwrap()["confusion"], serde_json::json!([[1, 0], [1, 1]]));
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetricsReport {
    /// Variables counted.
    pub variables: u64,
    /// Fraction misclassified.
    pub error: f64,
    /// `1 − error`.
    pub accuracy: f64,
    /// Mean over classes with support of their accuracy.
    pub mean_class_accuracy: Option<f64>,
    /// Mean over defined classes of their IoU.
    pub mean_iou: Option<f64>,
    /// Per class.
    pub per_class: Vec<ClassMetrics>,
    /// `confusion[true][predicted]`.
    pub confusion: Vec<Vec<u64>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Three classes, ten variables, counted by hand:
    ///
    /// ```text
    ///            predicted 0  1  2
    /// true 0               3  1  0     support 4
    /// true 1               1  2  1     support 4
    /// true 2               0  0  2     support 2
    /// predicted            4  3  3
    /// ```
    fn three_class() -> ConfusionMatrix {
        let truth = [0, 0, 0, 0, 1, 1, 1, 1, 2, 2];
        let predicted = [0, 0, 0, 1, 0, 1, 1, 2, 2, 2];
        let mut m = ConfusionMatrix::new(3);
        m.add_labels(&truth, &predicted).unwrap();
        m
    }

    #[test]
    fn hand_computed_three_class_case() {
        let m = three_class();
        assert_eq!(m.rows(), vec![vec![3, 1, 0], vec![1, 2, 1], vec![0, 0, 2]]);
        assert_eq!(m.total(), 10);
        assert!((m.error_rate() - 0.3).abs() < 1e-15);
        assert_eq!(m.class_accuracy(), vec![Some(0.75), Some(0.5), Some(1.0)]);
        // IoU: 3/(4+4−3) = 0.6, 2/(4+3−2) = 0.4, 2/(2+3−2) = 2/3.
        let iou = m.iou();
        let want = [0.6, 0.4, 2.0 / 3.0];
        for (got, want) in iou.iter().zip(want) {
            assert!((got.unwrap() - want).abs() < 1e-15, "{got:?} vs {want}");
        }
        assert!((m.mean_iou().unwrap() - (0.6 + 0.4 + 2.0 / 3.0) / 3.0).abs() < 1e-15);
        assert!((m.mean_class_accuracy().unwrap() - 0.75).abs() < 1e-15);
        let r = m.report();
        assert_eq!(r.per_class[1].support, 4);
        assert_eq!(r.per_class[2].predicted, 3);
        assert!((r.accuracy - 0.7).abs() < 1e-15);
    }

    #[test]
    fn classes_without_support_or_predictions_are_undefined_not_zero() {
        // Class 2 never occurs; class 1 is predicted but never true.
        let mut m = ConfusionMatrix::new(3);
        m.add_labels(&[0, 0], &[0, 1]).unwrap();
        assert_eq!(m.class_accuracy(), vec![Some(0.5), None, None]);
        assert_eq!(m.iou(), vec![Some(0.5), Some(0.0), None]);
        assert_eq!(m.mean_iou(), Some(0.25));
        assert_eq!(m.mean_class_accuracy(), Some(0.5));
        assert_eq!(ConfusionMatrix::new(2).mean_iou(), None);
        assert_eq!(ConfusionMatrix::new(2).error_rate(), 0.0);
    }

    #[test]
    fn bad_labels_are_errors() {
        let mut m = ConfusionMatrix::new(2);
        assert!(m.add(2, 0).is_err());
        assert!(m.add(0, 5).is_err());
        assert!(m.add_labels(&[0, 1], &[0]).is_err());
        assert!(m.add_labels(&[0, 1, 0], &[0, 1, 2]).is_err());
        assert_eq!(m.total(), 0);
    }

    #[test]
    fn from_labelings_counts_every_example_and_checks_the_count() {
        use crate::{Example, FactorTypeInfo, FeatureBlock};
        let graph = std::sync::Arc::new(factor_graph::grid(2, 2, 2).unwrap());
        let example = |labels: Vec<usize>| {
            Example::new(
                "x",
                graph.clone(),
                Some(labels),
                vec![FeatureBlock { dim: 1, values: vec![0.0; 4] }, FeatureBlock { dim: 1, values: vec![0.0; 4] }],
            )
        };
        let types = vec![FactorTypeInfo::new("unary", 1), FactorTypeInfo::new("pairwise", 1)];
        let data = Dataset::new(types, vec![example(vec![0, 0, 1, 1]), example(vec![1, 1, 1, 1])]).unwrap();
        let m = ConfusionMatrix::from_labelings(&data, &[vec![0, 1, 1, 1], vec![1, 1, 0, 1]]).unwrap();
        assert_eq!(m.rows(), vec![vec![1, 1], vec![1, 5]]);
        assert!((m.error_rate() - 0.25).abs() < 1e-15);
        assert!(ConfusionMatrix::from_labelings(&data, &[vec![0, 1, 1, 1]]).is_err());
        assert!(ConfusionMatrix::from_labelings(&data, &[vec![0, 1, 1], vec![1, 1, 0, 1]]).is_err());
    }
}
