//! Structure-aware fuzzing of every file loader of the project, on stable Rust
//! (`cargo xtask fuzz`; docs/ROBUSTNESS.md).
//!
//! * [`mod@targets`]: one [`Target`] per loader — UAI text, model files of every
//!   built-in oracle class, binary and JSON data sets, checkpoints, training
//!   configurations, PNG and JPEG images — with valid seed files built in code
//!   ([`seeds`]) and mutations that know the format ([`mutate`]): postcard bodies
//!   are mutated through their typed structure and re-framed with a valid
//!   checksum, UAI text token by token, JSON as a tree, PNG chunk by chunk with
//!   CRCs recomputed.
//! * Every input runs with panics caught and memory counted by [`LimitAlloc`]
//!   (installed as the global allocator by the fuzzing binary), which refuses an
//!   allocation that would take the input's live memory past the limit.
//! * [`driver`]: the in-process loop, and a supervisor running it in a child
//!   process so an abort or hang costs one input; crashers are saved with the
//!   reason, and a summary is written.
//!
//! An input loaded without error is checked further: re-saving it must load
//! back to the same bytes, and a model's first score must succeed.

mod alloc;
pub mod driver;
pub mod mutate;
pub mod seeds;
pub mod targets;

pub use alloc::{LimitAlloc, Usage, arm, armed, disarm, live, usage};
pub use driver::{Options, Stats, Verdict, execute, report, run_range, supervise, worker};
pub use targets::{CheckpointMirror, Outcome, Target, targets};
