//! The multi-layer perceptron function class (ch. §1.9.5; NIPS §8; docs/MATH.md §5):
//!
//! ```text
//! g(φ, y) = (W tanh(V φ))_y
//! ```
//!
//! with one hidden layer of `H` tanh units (`H = 100` in the papers). As in the
//! papers there is no bias beyond the constant column the caller puts in `φ`;
//! [`MlpOracle::biases`] optionally adds a hidden bias `c` and an output bias
//! `a`, giving `(W tanh(V φ + c) + a)_y`.
//!
//! # Fitting
//!
//! Minibatch stochastic gradient descent with momentum on the biased logistic
//! loss `L` of [`crate::problem`]. For a minibatch `B` the gradient is that of
//! the weighted **mean** row loss
//!
//! ```text
//! L_B = 1/(|B| w̄) Σ_{k∈B} w_k ℓ_k,      w̄ = Σ_k w_k / n   (w̄ = 1 unweighted),
//! ```
//!
//! an unbiased estimate of the gradient of `L / Σ_k w_k`. The mean (not the sum)
//! is the reading under which the papers' step sizes (0.25 unary, 0.05 pairwise)
//! are sensible: with the sum, a minibatch of 100 rows would multiply them by 100
//! and SGD diverges on the denoising problems. The update is the papers'
//! ("the new step is a combination of .1 times the new gradient plus .9 times the
//! old step", NIPS footnote 2):
//!
//! ```text
//! s ← μ s + (1 − μ) ∇L_B,      θ ← θ − η s,      μ = 0.9.
//! ```
//!
//! One fit runs [`MlpOracle::epochs`] passes over a fresh random permutation of
//! the rows. A warm start continues from the previous weights (the momentum `s`
//! restarts at zero); a cold start draws `V` (and `c`) from
//! `N(0, init_scale² / d)` and sets `W = 0` (and `a = 0`), so a cold start begins
//! at the zero function. All randomness comes from [`FitContext::seed`]
//! (ChaCha8): the same seed gives a bit-identical model whatever the number of
//! threads.
//!
//! After every epoch the full loss `L` is evaluated and the best parameters seen
//! are kept (for a warm start, the start included), so the returned model's loss
//! never exceeds the warm-start model's, as [`Oracle::fit`] requires; if no epoch
//! improved on the warm start, the warm start is returned unchanged. A cold
//! start's loss is not evaluated: it is returned only if every epoch diverges.
//!
//! # Defaults inside Algorithm 1
//!
//! [`MlpOracle::unary`] and [`MlpOracle::pairwise`] use the chapter's minibatch
//! of 100 rows and **one epoch per oracle call**. On denoising-like problems
//! (`benches/oracles.rs`, group `mlp`) a cold fit with one epoch removes ≥ 99.6%
//! of the loss that ten epochs remove (unary, 160,000 × 2, step 0.25, mean loss
//! per row: zero function 9.995, 1 epoch 1.711, 2: 1.706, 5: 1.706, 10: 1.702;
//! pairwise, 320,000 × 2 × 4 classes, step 0.05: zero 1.825, 1 epoch 0.633,
//! 2: 0.632, 5: 0.630, 10: 0.629), at one tenth of the time, and the oracle is
//! called again, warm-started, in every learning iteration. With minibatches of
//! 1000 (NIPS) one epoch is far from enough at step 0.05 (0.873 after one epoch,
//! 0.632 after ten). On a problem that does not change between calls, SGD at
//! these step sizes reaches a noise floor where a one-epoch warm call often
//! finds nothing better and returns its warm start; more epochs per call go
//! further. [`MlpOracle::step_halvings`] lets such a call try again from its
//! warm start at half the step (and half again, up to that many times): a
//! smaller step has a lower noise floor, so the call finds progress the fixed
//! step cannot (default 0, the papers' fixed step).
//!
//! # Performance
//!
//! A minibatch is split into row chunks of equal size (whole blocks) that
//! depends only on the shapes and the minibatch size, at most about `2²¹`
//! floating-point operations each (so a chunk's arrays stay in the L2 cache,
//! and a small minibatch is not split: waking a second thread costs more than
//! it gains); their gradients are computed in parallel (rayon) and summed in
//! chunk order, so the reduction is deterministic. Within a chunk the rows' values are held
//! value-major (`Rows`: one contiguous slice per input, hidden unit or class),
//! and each pass runs over all the chunk's rows:
//!
//! * the forward pass computes groups of 16 rows as vector lanes, with hidden
//!   units (and classes) in tiles of `TILE` (4), so each weight loaded serves
//!   16 rows and the sums stay in registers; a hidden unit's `tanh` is taken
//!   while its sums are still in registers (its division then overlaps the
//!   next tile's products); the last rows (fewer than 16) go by blocks of
//!   `BLOCK` (4) rows, their `tanh` in a pass of its own;
//! * the row losses run four rows at a time, one lane each
//!   (`problem::row_losses`, bit for bit [`crate::row_loss`]);
//! * the backward pass forms `∂ℓ/∂t` two hidden units and 16 rows at a time,
//!   and each weight's gradient as a sum over the chunk's rows held in
//!   registers (`outer_sums`), eight or more weights at a time.
//!
//! On CPUs with AVX-512 the forward products, `tanh` and the outer-product
//! sums run on eight-lane registers (`avx512`: two tiles or eight rows per
//! register), the rest as on AVX2; they compute every value by the same
//! operations in the same order, so they give the same bits (tests
//! `mlp_gradient_is_the_plain_arithmetic_bit_for_bit`,
//! `mlp_wide_kernels_are_the_portable_ones_bit_for_bit`).
//!
//! Every gradient entry receives its rows' terms one row at a time in row
//! order, the bias entries per block of 4 rows first; how the passes are
//! blocked does not change a bit (test
//! `mlp_gradient_is_the_plain_arithmetic_bit_for_bit`). The kernels work on a
//! *packed* copy of the parameters (tiles contiguous, hidden units padded with
//! zeros to whole tiles), converted from and to the model's layout once per
//! call; there is no allocation per minibatch. The next minibatch's rows (a
//! random sample of the data) are prefetched while one is computed: one line
//! of each row at the start (the CPU looks up their pages at once), the rest
//! spread over the forward pass.
//! Full-loss evaluation and [`Model::score`] run in parallel over rows. `tanh`
//! is a vectorisable polynomial version (absolute error < 4·10⁻¹⁶).
//!
//! Every product is added to its sum by one multiply-add, fused where the CPU
//! has FMA ([`fused_arithmetic`]: x86-64 with AVX2 + FMA, where the kernels are
//! compiled for those features and chosen at run time, and AArch64) and
//! separate elsewhere. So a fit is bit-for-bit reproducible on every CPU of the
//! same kind; a CPU without FMA gives a model that differs in the last bits.
//!
//! # Over ranks
//!
//! On a [`crate::Problem::distributed`] problem (rows spread over ranks) the
//! permutation of an epoch is drawn over the whole problem's rows
//! ([`crate::Problem::global_rows`]), so the minibatches are one process's;
//! each rank computes the gradient of the minibatch rows it holds, one
//! [`crate::Problem::sum`] per minibatch adds the ranks' gradients, and every
//! rank takes the same step (`Sgd::epoch`). Each epoch's loss is
//! summed in one process's chunks ([`crate::Problem::chunk_partials`]). The
//! model agrees with one process's to rounding (the gradient is added per
//! rank, then in rank order), not bit for bit; one process's path is the one
//! described above.
//!
//! # Source layout
//!
//! One file per job: this one holds the constants and the re-exports;
//! `oracle.rs` the hyper-parameters ([`MlpOracle`]), their validation and
//! the fit; `model.rs` the fitted [`MlpModel`], its scoring and loading;
//! `layout.rs` the parameter layouts (model and packed) and the full loss;
//! `passes.rs` the forward and backward passes over a chunk of rows;
//! `kernels.rs` their portable building blocks (tile sums, outer-product
//! sums, `tanh`); `dispatch.rs` the kernel builds and the choice among them
//! for this CPU; `avx512.rs` the AVX-512 kernels; `sgd.rs` minibatch SGD
//! with momentum; `tests.rs` the tests.

#[cfg(target_arch = "x86_64")]
mod avx512;
mod dispatch;
mod kernels;
mod layout;
mod model;
mod oracle;
mod passes;
mod sgd;
#[cfg(test)]
mod tests;

pub use dispatch::fused_arithmetic;
pub use model::{MlpModel, load};
pub use oracle::MlpOracle;

#[cfg(doc)]
use crate::{FitContext, Model, Oracle};

/// Registry name of [`MlpModel`].
pub const KIND: &str = "mlp";

/// Step size the papers use for factors over single variables (NIPS §8, ch. §1.9.5).
pub const UNARY_STEP_SIZE: f64 = 0.25;

/// Step size the papers use for factors over pairs of variables (NIPS §8, ch. §1.9.5).
pub const PAIRWISE_STEP_SIZE: f64 = 0.05;

/// The most epochs one fit may run (a fit is not interrupted by Ctrl-C).
pub const MAX_EPOCHS: usize = 1_000_000;

/// Most halvings of [`MlpOracle::step_halvings`]: a step below 2⁻⁶⁰ of the
/// configured one no longer moves the parameters.
pub const MAX_STEP_HALVINGS: usize = 60;

/// Rows per chunk of the full-loss evaluation and of scoring. Equal to the chunk
/// of [`crate::logistic_loss`], so the loss computed inside a fit is bit-identical
/// to [`crate::model_loss`] of the returned model.
const EVAL_CHUNK: usize = 4096;

/// Most floating-point work per minibatch chunk (about `2²¹` operations: 160
/// rows of the 42-input, 8-class unary network, so its 100-row minibatches are
/// one chunk; 96 rows of the 3-input, 64-class pairwise one, two chunks). A
/// minibatch takes ≈ 150 µs, and waking a second thread for it and summing the
/// chunks' gradients cost more than the second thread gained: an epoch of
/// 400000 rows of the unary network took 0.61 s on one thread and 0.61–0.68 s
/// on two with `2¹⁹` (3 chunks), 0.58–0.60 s and 0.50–0.51 s with this (the
/// loss pass still runs in parallel); the pairwise one 1.30 s and 1.16–1.22 s
/// with `2¹⁹` (5 chunks), 1.26–1.31 s and 0.89–0.93 s with this.
const CHUNK_WORK: usize = 1 << 21;

/// Fewest rows in a minibatch chunk.
const MIN_CHUNK_ROWS: usize = 8;

/// Rows per block: minibatch chunks hold whole blocks (padded with zero rows),
/// and the bias gradients sum their rows' terms per block first.
const BLOCK: usize = 4;

/// Rows of `V` (or `W`) whose gradient sums the backward pass holds in
/// registers at once.
const OUTER: usize = 8;

/// Rows per step of the full-loss evaluation and of scoring.
const EVAL_ROWS: usize = 16;

/// Hidden units of `V`, and classes of `W`, per register tile.
const TILE: usize = 4;
