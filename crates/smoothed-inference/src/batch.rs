//! Message passing over many examples in parallel.

use std::cell::RefCell;

use rayon::prelude::*;

use crate::{InferenceError, InferenceProblem, Messages, RunOptions, RunReport, Workspace};

thread_local! {
    /// The workspace of each worker thread, kept across calls so that repeated
    /// batches (every phase of Algorithm 1) do not reallocate.
    static WORKSPACE: RefCell<Workspace> = RefCell::new(Workspace::default());
}

/// Calls `f` with this thread's reusable [`Workspace`] (the one [`run_batch`]
/// uses), so code that runs one example per task on a rayon pool does not
/// allocate and zero a workspace per example. Re-entrant calls get a fresh
/// workspace.
///
/// ```
/// use smoothed_inference::{with_thread_workspace, InferenceProblem, Messages, RunOptions};
/// let g = factor_graph::grid(3, 3, 2).unwrap();
/// let theta = vec![0.25; g.total_configs()];
/// let p = InferenceProblem::uniform(&g, &theta, 0.1).unwrap();
/// let mut m = Messages::zeros(&g);
/// let report = with_thread_workspace(|ws| p.run(&mut m, &RunOptions::default(), ws)).unwrap();
/// assert!(report.dual_value.is_finite());
/// ```
pub fn with_thread_workspace<R>(f: impl FnOnce(&mut Workspace) -> R) -> R {
    WORKSPACE.with(|cell| match cell.try_borrow_mut() {
        Ok(mut ws) => f(&mut ws),
        Err(_) => f(&mut Workspace::default()),
    })
}

/// [`InferenceProblem::run`] on every example (`problems[k]` with
/// `messages[k]`), in parallel over examples on the current rayon pool, with
/// one [`Workspace`] per worker thread (kept by the thread for later batches).
/// Everything is validated before any message
/// changes, so on error no example has been touched. Each example's result is
/// exactly what a sequential `run` gives (examples are independent and each is
/// processed by one thread).
///
/// ```
/// use smoothed_inference::{run_batch, InferenceProblem, Messages, RunOptions};
/// let g = factor_graph::grid(4, 4, 2).unwrap();
/// let thetas: Vec<Vec<f64>> = (0..3).map(|k| (0..g.total_configs()).map(|i| ((i * 7 + k) % 11) as f64 / 10.0).collect()).collect();
/// let problems: Vec<_> = thetas.iter().map(|t| InferenceProblem::uniform(&g, t, 0.1).unwrap()).collect();
/// let mut messages = vec![Messages::zeros(&g); 3];
/// let reports = run_batch(&problems, &mut messages, &RunOptions::default()).unwrap();
/// assert_eq!(reports.len(), 3);
/// ```
pub fn run_batch(
    problems: &[InferenceProblem<'_>],
    messages: &mut [Messages],
    opts: &RunOptions,
) -> Result<Vec<RunReport>, InferenceError> {
    if problems.len() != messages.len() {
        return Err(InferenceError::BatchSize { problems: problems.len(), messages: messages.len() });
    }
    for (p, m) in problems.iter().zip(messages.iter()) {
        m.check(p.graph())?;
        if let Some(order) = &opts.order {
            p.graph().validate_order(order)?;
        }
    }
    problems
        .par_iter()
        .zip(messages.par_iter_mut())
        .with_max_len(1)
        .map(|(p, m)| with_thread_workspace(|ws| p.run(m, opts, ws)))
        .collect()
}
