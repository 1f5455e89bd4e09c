//! The dual variables: one message per parent → child edge and child configuration.

use factor_graph::RegionGraph;
use serde::{Deserialize, Serialize};

use crate::InferenceError;

/// Messages `λ_α(y_β)` of every parent → child edge `α → β`, flat: edge `e`
/// owns `graph.message_range(e)`, indexed by the child's configuration
/// (docs/MATH.md §3; the Lagrange multipliers of ch. Thm 1.2, Eq. 1.13).
///
/// A message vector belongs to one example; it is the only state that message
/// passing keeps between calls (the learner keeps it across learning
/// iterations). It serialises as a plain array of numbers.
///
/// ```
/// use smoothed_inference::Messages;
/// let g = factor_graph::grid(2, 2, 3).unwrap();
/// let m = Messages::zeros(&g);
/// assert_eq!(m.as_slice().len(), g.total_message_len());
/// assert!(Messages::from_vec(&g, vec![0.0; 3]).is_err());
/// ```
///
/// ```
/// use smoothed_inference::Messages;
/// let g = factor_graph::grid(1, 2, 2).unwrap();
/// let m = Messages::zeros(&g);
/// assert_eq!(m.len(), g.total_message_len()); // one entry per edge and child configuration
/// assert!(Messages::from_vec(&g, vec![0.0; 3]).is_err()); // wrong length
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Messages {
    lambda: Vec<f64>,
}

impl Messages {
    /// All-zero messages for `graph` (the starting point of Algorithm 1: `θ̃ = θ`).
    pub fn zeros(graph: &RegionGraph) -> Self {
        Self { lambda: vec![0.0; graph.total_message_len()] }
    }

    /// Wraps a flat vector laid out by `graph.message_range(e)`; it must have
    /// `graph.total_message_len()` finite entries.
    pub fn from_vec(graph: &RegionGraph, lambda: Vec<f64>) -> Result<Self, InferenceError> {
        let messages = Self { lambda };
        messages.check(graph)?;
        Ok(messages)
    }

    /// Checks that these messages fit `graph` (length) and are all finite.
    pub fn check(&self, graph: &RegionGraph) -> Result<(), InferenceError> {
        let expected = graph.total_message_len();
        if self.lambda.len() != expected {
            return Err(InferenceError::MessageShape { expected, got: self.lambda.len() });
        }
        match self.lambda.iter().position(|v| !v.is_finite()) {
            Some(index) => Err(InferenceError::InvalidMessage { index, value: self.lambda[index] }),
            None => Ok(()),
        }
    }

    /// The flat messages.
    pub fn as_slice(&self) -> &[f64] {
        &self.lambda
    }

    /// The flat messages, writable. Entries must stay finite.
    pub fn as_mut_slice(&mut self) -> &mut [f64] {
        &mut self.lambda
    }

    /// Number of entries, `graph.total_message_len()` of the graph they were made for.
    pub fn len(&self) -> usize {
        self.lambda.len()
    }

    /// Whether there are no entries (a graph without edges).
    pub fn is_empty(&self) -> bool {
        self.lambda.is_empty()
    }

    /// Sets every message back to zero.
    pub fn reset(&mut self) {
        self.lambda.fill(0.0);
    }

    /// The flat vector.
    pub fn into_vec(self) -> Vec<f64> {
        self.lambda
    }
}
