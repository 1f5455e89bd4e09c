//! Progress reporting for long runs: an [`indicatif`] bar over all steps of all
//! learning iterations. Lives in the CLI crate so that the `structlearn`
//! library does not depend on terminal crates.

use structlearn::{LearnError, Observer, TrainEvent};

/// A terminal progress bar over all steps of all learning iterations
/// (indicatif; hidden when stderr is not a terminal).
pub struct ProgressObserver {
    bar: indicatif::ProgressBar,
}

impl ProgressObserver {
    /// A bar with a prefix label (e.g. the experiment cell).
    pub fn new(label: &str) -> Self {
        let bar = indicatif::ProgressBar::new(0);
        let style =
            indicatif::ProgressStyle::with_template("{prefix} [{elapsed_precise}] {wide_bar} {pos}/{len} steps {msg}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar());
        bar.set_style(style);
        bar.set_prefix(label.to_string());
        Self { bar }
    }

    /// Wraps an existing bar (e.g. one line of a `MultiProgress`).
    pub fn with_bar(bar: indicatif::ProgressBar) -> Self {
        Self { bar }
    }
}

impl Observer for ProgressObserver {
    fn observe(&mut self, event: &TrainEvent<'_>) -> Result<(), LearnError> {
        match event {
            TrainEvent::Started { total_iterations, steps_per_iteration, completed } => {
                self.bar.set_length((total_iterations * steps_per_iteration) as u64);
                self.bar.set_position((completed * steps_per_iteration) as u64);
            }
            TrainEvent::Step(r) => {
                self.bar.inc(1);
                let mut msg = format!("it {} R={:.4e}", r.iteration, r.objective);
                if let Some(e) = r.train_error {
                    msg += &format!(" train={e:.4}");
                }
                if let Some(e) = r.validation_error {
                    msg += &format!(" valid={e:.4}");
                }
                self.bar.set_message(msg);
            }
            TrainEvent::Finished => self.bar.finish(),
            _ => {}
        }
        Ok(())
    }
}
