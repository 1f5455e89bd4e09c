//! What the command line and the experiments show a person: progress on
//! standard error and PNG figures. The library (`structlearn`) prints and
//! draws nothing; its observers ([`structlearn::Observer`]) are how these
//! see a run.
//!
//! * [`ProgressObserver`]: a bar per run on a terminal, one plain line per
//!   learning iteration elsewhere (objective, errors, seconds, ETA), a line
//!   per step with [`Verbosity::Verbose`]; [`ItemProgress`] for lists of
//!   cells or images.
//! * [`plots`]: learning curves, line charts and image grids as PNG, with an
//!   embedded font (no system fonts needed).

pub mod plots;
mod progress;

pub use progress::{ItemProgress, ProgressMode, ProgressObserver, Verbosity, human_duration};
