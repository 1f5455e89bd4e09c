//! Early stopping on the validation set (scikit-learn's `n_iter_no_change`,
//! LightGBM's `early_stopping_round`): training stops once the validation
//! error has not improved for `patience` learning iterations, and the model of
//! the best iteration is returned.
//!
//! An iteration *improves* when its validation error is below the best so far
//! by more than `min_delta`. Ties keep the earlier (smaller) model.

use serde::{Deserialize, Serialize};

use crate::Record;

/// When to stop on the validation error ([`crate::TrainConfig::early_stopping`]).
///
/// ```
/// use structlearn::{EarlyStopping, TrainConfig};
/// let config = TrainConfig {
///     learning_iterations: 100,
///     early_stopping: Some(EarlyStopping { patience: 5, min_delta: 0.0 }),
///     ..TrainConfig::default()
/// };
/// # drop(config);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EarlyStopping {
    /// Learning iterations without improvement before stopping (≥ 1).
    pub patience: usize,
    /// Least decrease of the validation error that counts as an improvement (≥ 0).
    #[serde(default)]
    pub min_delta: f64,
}

/// The best validation error seen, and whether to stop.
///
/// ```
/// use structlearn::early_stopping::{BestValidation, Verdict};
/// let mut best = BestValidation::new(structlearn::EarlyStopping { patience: 1, min_delta: 0.0 });
/// assert_eq!(best.update(1, Some(0.2)), Verdict::Improved);
/// assert_eq!(best.update(2, Some(0.3)), Verdict::Stop);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct BestValidation {
    rule: EarlyStopping,
    /// `(iteration, validation error)` of the best iteration so far.
    best: Option<(usize, f64)>,
    /// The last iteration seen.
    last: usize,
}

/// What one learning iteration's validation error means.
///
/// ```
/// use structlearn::early_stopping::{BestValidation, Verdict};
/// let mut b = BestValidation::new(structlearn::EarlyStopping { patience: 2, min_delta: 0.0 });
/// assert_eq!(b.update(1, Some(0.3)), Verdict::Improved);
/// assert_eq!(b.update(2, Some(0.3)), Verdict::Wait);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// A new best: keep this iteration's model.
    Improved,
    /// No improvement, patience left.
    Wait,
    /// No improvement for `patience` iterations: stop.
    Stop,
}

impl BestValidation {
    /// Nothing seen yet.
    pub fn new(rule: EarlyStopping) -> Self {
        Self { rule, best: None, last: 0 }
    }

    /// The state after the iterations recorded in `history` (the records of a
    /// resumed run): each iteration's last record with a validation error counts.
    ///
    /// ```
    /// use structlearn::early_stopping::{BestValidation, EarlyStopping};
    /// use structlearn::Record;
    /// let record = |iteration, e| Record {
    ///     iteration, step: 0, phase: "fit".into(), factor_type: None, objective: 0.0,
    ///     oracle_loss: None, rejected: None, max_violation: None, train_error: None,
    ///     validation_error: Some(e), step_seconds: 0.0, elapsed_seconds: 0.0,
    /// };
    /// let b = BestValidation::from_history(
    ///     EarlyStopping { patience: 2, min_delta: 0.0 },
    ///     &[record(1, 0.3), record(2, 0.2), record(3, 0.25)],
    /// );
    /// assert_eq!(b.best(), Some((2, 0.2)));
    /// assert_eq!(b.since_best(), 1);
    /// ```
    pub fn from_history(rule: EarlyStopping, history: &[Record]) -> Self {
        let mut state = Self::new(rule);
        let mut i = 0;
        while i < history.len() {
            let iteration = history[i].iteration;
            let mut error = None;
            while i < history.len() && history[i].iteration == iteration {
                error = history[i].validation_error.or(error);
                i += 1;
            }
            state.update(iteration, error);
        }
        state
    }

    /// Records learning iteration `iteration` with its validation error
    /// (`None`: not evaluated, which never improves).
    pub fn update(&mut self, iteration: usize, validation_error: Option<f64>) -> Verdict {
        self.last = iteration;
        if let Some(e) = validation_error
            && e.is_finite()
            && self.best.is_none_or(|(_, best)| e < best - self.rule.min_delta)
        {
            self.best = Some((iteration, e));
            return Verdict::Improved;
        }
        if self.since_best() >= self.rule.patience { Verdict::Stop } else { Verdict::Wait }
    }

    /// `(iteration, validation error)` of the best iteration so far.
    pub fn best(&self) -> Option<(usize, f64)> {
        self.best
    }

    /// Iterations since the best one (all seen iterations if none was best).
    pub fn since_best(&self) -> usize {
        self.last - self.best.map_or(0, |(i, _)| i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stops_after_patience_iterations_without_improvement() {
        let mut b = BestValidation::new(EarlyStopping { patience: 2, min_delta: 0.0 });
        assert_eq!(b.update(1, Some(0.5)), Verdict::Improved);
        assert_eq!(b.update(2, Some(0.4)), Verdict::Improved);
        assert_eq!(b.update(3, Some(0.4)), Verdict::Wait); // a tie is no improvement
        assert_eq!(b.update(4, Some(0.45)), Verdict::Stop);
        assert_eq!(b.best(), Some((2, 0.4)));
    }

    #[test]
    fn min_delta_and_missing_or_nan_errors_do_not_improve() {
        let mut b = BestValidation::new(EarlyStopping { patience: 3, min_delta: 0.01 });
        assert_eq!(b.update(1, None), Verdict::Wait);
        assert_eq!(b.update(2, Some(0.5)), Verdict::Improved);
        assert_eq!(b.update(3, Some(0.495)), Verdict::Wait);
        assert_eq!(b.update(4, Some(f64::NAN)), Verdict::Wait);
        assert_eq!(b.update(5, Some(0.48)), Verdict::Improved);
        assert_eq!(b.since_best(), 0);
    }
}
