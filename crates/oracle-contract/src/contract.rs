//! The oracle contract: what any function class must provide to become a
//! structured energy (docs/MATH.md §4–5).
//!
//! * An [`Oracle`] holds validated hyper-parameters and *fits* a [`Problem`],
//!   warm-started from the previous [`Model`] of its own kind (or from nothing).
//!   The returned model's objective `J = L + Ω` (loss plus the oracle's
//!   penalty, [`Oracle::penalty`]) on the same problem must not be higher than
//!   the warm-start model's; [`fit_monotone`] enforces this for any oracle.
//! * A [`Model`] scores new inputs into a caller-owned buffer, is `Send + Sync`,
//!   and serialises itself to bytes; a loader ([`ModelLoader`]) reads it back,
//!   and a registry of loaders by kind name (`oracles::ModelRegistry`) lets
//!   function classes defined in other crates load from model files without
//!   editing this crate.
//! * Two optional speed-ups, both bit-for-bit equal to the plain path: an
//!   oracle may return the losses it computed anyway
//!   ([`Oracle::fit_with_losses`]), and one whose fit tracks the training
//!   scores may continue from scores the caller kept
//!   ([`Oracle::maintains_scores`], [`Oracle::fit_scored`],
//!   [`fit_monotone_scored`]), so a call's cost does not grow with the model.

use std::any::Any;
use std::cmp::Ordering;
use std::fmt::Debug;

use crate::{Features, OracleError, Problem};

/// A fitted function `g(φ, ·): R^d → R^C` of one function class.
///
/// ```
/// use oracles::{Features, Model};
/// let model = oracles::linear::LinearModel::new(2, 2, vec![1.0, -1.0, 0.0, 0.5]).unwrap();
/// let x = [0.5, 2.0, 1.0, 0.0];
/// let mut scores = [0.0; 4]; // rows × classes, caller-owned
/// model.score(Features::new(&x, 2, 2).unwrap(), &mut scores).unwrap();
/// assert_eq!(model.classes(), 2);
/// ```
pub trait Model: Send + Sync + Debug + 'static {
    /// The function class's registry name, e.g. `"linear"`.
    fn kind(&self) -> &str;

    /// Number of input features `d`.
    fn dim(&self) -> usize;

    /// Number of classes `C` (outputs per row).
    fn classes(&self) -> usize;

    /// Writes `g(φ_k, y)` for every row `k` of `features` into `out`
    /// (row-major `rows × classes`). Errors if `features.dim() != self.dim()`
    /// or `out` has the wrong length.
    ///
    /// A row's scores must depend on that row alone, to the bit, wherever it
    /// sits in the call: the trainer scores its rows in groups of examples
    /// and relies on getting the numbers a single call would give.
    fn score(&self, features: Features<'_>, out: &mut [f64]) -> Result<(), OracleError>;

    /// Continues scores made by an earlier model: `out` holds what
    /// `previous.score(features, …)` wrote, bit for bit. If this model is
    /// `previous` plus terms of its own that [`Model::score`] adds after
    /// `previous`'s (a boosted ensemble grown from `previous`:
    /// `g = g_prev + Σ_{new trees} f_t`, added in order), adds them, leaves in
    /// `out` exactly what `self.score(features, out)` writes and returns
    /// `true`; otherwise returns `false` and leaves `out` untouched (the
    /// default: the caller scores afresh). Errors as [`Model::score`] does.
    /// A caller that scores the same rows after every fit (a trainer's
    /// validation set) then pays for the new terms only. A class that
    /// implements it returns `true` with `previous` the model itself (nothing
    /// added), on no rows too: that is how a caller asks whether keeping a
    /// class's scores can pay.
    ///
    /// ```
    /// use oracles::{Features, Model};
    /// let model = oracles::linear::LinearModel::new(1, 2, vec![1.0, -1.0]).unwrap();
    /// let no_rows = Features::new(&[], 0, 1).unwrap();
    /// // A linear model is not a sum grown from another: score it afresh.
    /// assert!(!model.score_continuing(&model, no_rows, &mut []).unwrap());
    /// let boosted = oracles::boosting::BoostingModel::empty(1, 2);
    /// assert!(boosted.score_continuing(&boosted, no_rows, &mut []).unwrap());
    /// ```
    fn score_continuing(
        &self,
        previous: &dyn Model,
        features: Features<'_>,
        out: &mut [f64],
    ) -> Result<bool, OracleError> {
        let _ = (previous, features, out);
        Ok(false)
    }

    /// The model's parameters as bytes (postcard), read back by the loader
    /// registered for [`Model::kind`].
    fn to_bytes(&self) -> Result<Vec<u8>, OracleError>;

    /// A boxed copy.
    fn clone_model(&self) -> Box<dyn Model>;

    /// For downcasting a warm-start model to the concrete type.
    fn as_any(&self) -> &dyn Any;

    /// The parameters as human-readable JSON, for exports of small models
    /// (`None` if the class does not support it).
    fn to_json(&self) -> Option<serde_json::Value> {
        None
    }
}

impl Clone for Box<dyn Model> {
    fn clone(&self) -> Self {
        self.clone_model()
    }
}

/// Writes the [`Model`] methods that are the same for every model type whose
/// serde form is its file format, inside an `impl Model for …` block:
/// [`Model::kind`] returns `$kind`, [`Model::to_bytes`] is [`encode`]`($kind,
/// self)` (postcard), [`Model::clone_model`] boxes a clone and [`Model::as_any`]
/// returns `self`. With `, to_json` it also writes [`Model::to_json`] as the
/// type's serde JSON form. The type must be `Serialize + Clone`.
///
/// ```
/// use oracles::{Features, Model, OracleError};
///
/// #[derive(Debug, Clone, serde::Serialize)]
/// struct Flat {
///     classes: usize,
/// }
///
/// impl Model for Flat {
///     oracles::impl_model_plumbing!("flat", to_json);
///     fn dim(&self) -> usize {
///         0
///     }
///     fn classes(&self) -> usize {
///         self.classes
///     }
///     fn score(&self, _: Features<'_>, out: &mut [f64]) -> Result<(), OracleError> {
///         out.fill(0.0);
///         Ok(())
///     }
/// }
///
/// let m = Flat { classes: 3 };
/// assert_eq!(m.kind(), "flat");
/// assert_eq!(m.to_bytes().unwrap(), oracles::encode("flat", &m).unwrap());
/// assert_eq!(m.to_json().unwrap()["classes"], 3);
/// assert_eq!(m.clone_model().classes(), 3);
/// ```
#[macro_export]
macro_rules! impl_model_plumbing {
    ($kind:expr) => {
        fn kind(&self) -> &str {
            $kind
        }
        fn to_bytes(&self) -> ::std::result::Result<::std::vec::Vec<u8>, $crate::OracleError> {
            $crate::encode($kind, self)
        }
        fn clone_model(&self) -> ::std::boxed::Box<dyn $crate::Model> {
            ::std::boxed::Box::new(::std::clone::Clone::clone(self))
        }
        fn as_any(&self) -> &dyn ::std::any::Any {
            self
        }
    };
    ($kind:expr, to_json) => {
        $crate::impl_model_plumbing!($kind);
        fn to_json(&self) -> ::std::option::Option<$crate::contract::__serde_json::Value> {
            $crate::contract::__serde_json::to_value(self).ok()
        }
    };
}

/// For [`impl_model_plumbing!`] in crates that do not depend on `serde_json`.
#[doc(hidden)]
pub use serde_json as __serde_json;

/// Randomness and bookkeeping handed to one oracle call.
///
/// ```
/// use oracles::{FitContext, Oracle};
/// // The same seed gives the same model (here: a boosted ensemble's subsamples).
/// let ctx = FitContext { seed: 42 };
/// # drop(ctx);
/// ```
#[derive(Debug, Clone, Copy)]
pub struct FitContext {
    /// Seed for every random choice of this call (subsamples, initialisation,
    /// minibatch order). The same seed must give the same model.
    pub seed: u64,
}

/// A function class with its hyper-parameters: fits biased logistic regression
/// problems, warm-started.
///
/// ```
/// use oracles::{Features, FitContext, Oracle, Problem};
/// let x = [0.0, 1.0, 2.0, 3.0];
/// let features = Features::new(&x, 4, 1).unwrap();
/// let labels = [0, 0, 1, 1];
/// let bias = [0.0; 8]; // rows × classes; Algorithm 1 passes its message biases here
/// let problem = Problem::new(features, &labels, &bias, 2, None).unwrap();
/// let oracle = oracles::linear::LinearOracle::default();
/// let model = oracle.fit(&problem, None, FitContext { seed: 0 }).unwrap();
/// let loss = oracles::model_loss(model.as_ref(), &problem).unwrap();
/// assert!(loss < 4.0 * 2f64.ln()); // better than g = 0
/// ```
pub trait Oracle: Send + Sync + Debug {
    /// The registry name of the models this oracle produces.
    fn kind(&self) -> &str;

    /// Checks the hyper-parameters; called before any fit.
    fn validate(&self) -> Result<(), OracleError>;

    /// Fits `problem`, starting from `warm` (a model previously returned by this
    /// oracle kind) if given. Must return a model whose objective `L + Ω` is not
    /// higher than `warm`'s on `problem`.
    fn fit(
        &self,
        problem: &Problem<'_>,
        warm: Option<&dyn Model>,
        ctx: FitContext,
    ) -> Result<Box<dyn Model>, OracleError>;

    /// The penalty `Ω(g) ≥ 0` this oracle adds to the loss: its fits minimise
    /// `J(g) = L(g) + Ω(g)`, and a warm-started fit must not increase `J`
    /// ([`fit_monotone`] enforces it). For the ridge classes (`linear`,
    /// `indexed-linear` and their gradient steps) `Ω = (λ/2)‖W‖²`; the default
    /// is 0 (the fit minimises `L` itself). Errors if `model` is not of this
    /// oracle's kind.
    ///
    /// ```
    /// use oracles::Oracle;
    /// let oracle = oracles::linear::LinearOracle { l2: 2.0, ..Default::default() };
    /// let m = oracles::linear::LinearModel::new(1, 2, vec![1.0, -3.0]).unwrap();
    /// assert_eq!(oracle.penalty(&m).unwrap(), 10.0); // (2/2)·(1 + 9)
    /// assert_eq!(oracles::constant::ConstantOracle::default().penalty(&m).unwrap(), 0.0);
    /// ```
    fn penalty(&self, model: &dyn Model) -> Result<f64, OracleError> {
        let _ = model;
        Ok(0.0)
    }

    /// [`Oracle::fit`], also returning the losses it computed anyway (see
    /// [`FitLosses`]), so that [`fit_monotone`] need not score the whole
    /// problem twice more. The default returns none.
    fn fit_with_losses(
        &self,
        problem: &Problem<'_>,
        warm: Option<&dyn Model>,
        ctx: FitContext,
    ) -> Result<(Box<dyn Model>, FitLosses), OracleError> {
        Ok((self.fit(problem, warm, ctx)?, FitLosses::default()))
    }

    /// Whether [`Oracle::fit_scored`] uses the scores it is given (instead of
    /// scoring the warm start itself) and keeps them current cheaply. A learner
    /// keeps a score buffer between fits only for oracles that say so; the
    /// default is `false`.
    fn maintains_scores(&self) -> bool {
        false
    }

    /// Whether a fit reads the bias of every row (an epoch over all rows,
    /// say) rather than of a subsample: a learner may then compute all the
    /// biases once, up front, when they fit in memory, instead of row by row
    /// as the fit asks for them ([`Problem::with_bias_rows`]). A hint for
    /// speed only; the default is `false`.
    fn reads_every_bias(&self) -> bool {
        false
    }

    /// Whether a fit on a [`Problem::distributed`] problem is the fit of the
    /// whole problem: every sum over rows it uses (loss, gradient, counts,
    /// the total weight) is completed over the ranks with [`Problem::sum`]
    /// (or [`crate::logistic_loss`], which does), its random choices do not
    /// depend on the rank, and so every rank returns the same model. A
    /// learner spreading examples over several ranks refuses oracles that do
    /// not say so. The default is `false`; every built-in class says so.
    ///
    /// ```
    /// use oracles::Oracle;
    /// assert!(oracles::linear::LinearOracle::default().distributed());
    /// assert!(oracles::boosting::BoostingOracle::default().distributed());
    /// assert!(oracles::mlp::MlpOracle::default().distributed());
    /// ```
    fn distributed(&self) -> bool {
        false
    }

    /// Whether scoring rows with this class's models costs little next to
    /// message passing over them (a linear model: one dot product per
    /// class), so that a learner may score an example's regions whenever it
    /// needs their potentials instead of storing `θ` for every region and
    /// configuration — at Stanford Background's shape the largest array of
    /// training (64 configurations per pair). A hint for memory; the scores
    /// are the same either way ([`Model::score`] scores each row on its own).
    /// The default is `false`.
    fn cheap_to_score(&self) -> bool {
        false
    }

    /// The same function class as an oracle that takes **one** gradient step
    /// per call with the exact line minimiser instead of a full fit
    /// (Hazan & Urtasun's learner, `oracles::step`; docs/MATH.md §6.4), for
    /// classes whose scores are linear in their parameters. `None` (the
    /// default): the class has no such step.
    ///
    /// ```
    /// use oracles::Oracle;
    /// assert_eq!(oracles::linear::LinearOracle::default().gradient_step().unwrap().kind(), "linear");
    /// assert!(oracles::boosting::BoostingOracle::default().gradient_step().is_none());
    /// ```
    fn gradient_step(&self) -> Option<Box<dyn Oracle>> {
        None
    }

    /// For a class whose function is known without data (`zero`, `fixed`:
    /// nothing to learn), that function for `dim` features and `classes`
    /// classes. Learners that do not call oracles (the perceptrons) use it for
    /// the factor types they do not learn. `None` (the default): the class
    /// learns from data.
    ///
    /// ```
    /// use oracles::Oracle;
    /// let zero = oracles::zero::ZeroOracle.fixed_model(3, 2).unwrap().unwrap();
    /// assert_eq!((zero.dim(), zero.classes()), (3, 2));
    /// assert!(oracles::linear::LinearOracle::default().fixed_model(3, 2).is_none());
    /// ```
    fn fixed_model(&self, dim: usize, classes: usize) -> Option<Result<Box<dyn Model>, OracleError>> {
        let _ = (dim, classes);
        None
    }

    /// Whether the class is `g(φ, y) = (W φ)_y` with models of the `linear`
    /// kind (`oracles::linear::LinearModel`, `W` of `classes × dim`, no other
    /// parameters), so that a learner may update `W` itself (the
    /// perceptrons). The default is `false`.
    fn is_linear(&self) -> bool {
        false
    }

    /// [`Oracle::fit_with_losses`] given `scores`, the warm start's scores on
    /// the problem's rows (`rows × classes`, bit for bit what [`Model::score`]
    /// writes; zeros without a warm start). On success `scores` holds the
    /// returned model's scores, bit for bit what its [`Model::score`] writes.
    /// The default fits and then scores the new model; an oracle whose fit
    /// already tracks the training scores (boosting adds one tree at a time)
    /// overrides it and says so in [`Oracle::maintains_scores`]. On error
    /// `scores` is unspecified.
    ///
    /// ```
    /// use oracles::{Features, FitContext, Model, Oracle, Problem};
    /// let x = [0.0, 1.0, 2.0, 3.0];
    /// let p = Problem::new(Features::new(&x, 4, 1).unwrap(), &[0, 0, 1, 1], &[0.0; 8], 2, None).unwrap();
    /// let oracle = oracles::boosting::BoostingOracle { rounds: 2, ..Default::default() };
    /// let mut scores = vec![0.0; 8]; // no warm start: zeros
    /// let (model, _) = oracle.fit_scored(&p, None, FitContext { seed: 0 }, &mut scores).unwrap();
    /// let mut direct = vec![0.0; 8];
    /// model.score(p.features(), &mut direct).unwrap();
    /// assert_eq!(scores, direct);
    /// ```
    fn fit_scored(
        &self,
        problem: &Problem<'_>,
        warm: Option<&dyn Model>,
        ctx: FitContext,
        scores: &mut [f64],
    ) -> Result<(Box<dyn Model>, FitLosses), OracleError> {
        let (model, losses) = self.fit_with_losses(problem, warm, ctx)?;
        model.score(problem.features(), scores)?;
        Ok((model, losses))
    }
}

/// Losses an oracle knows after a fit. Each, when given, must equal bit for bit
/// what [`model_loss`] returns for that model on the problem.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct FitLosses {
    /// Loss `L` of the returned model.
    pub loss: Option<f64>,
    /// Loss `L` of the warm-start model.
    pub warm_loss: Option<f64>,
}

/// Checks that a model fits a problem's shape.
///
/// ```
/// let m = oracles::linear::LinearModel::zeros(3, 2);
/// assert!(oracles::check_model_shape(&m, 3, 2).is_ok());
/// assert!(oracles::check_model_shape(&m, 4, 2).is_err());
/// ```
pub fn check_model_shape(model: &dyn Model, dim: usize, classes: usize) -> Result<(), OracleError> {
    if model.dim() != dim || model.classes() != classes {
        return Err(OracleError::ModelMismatch {
            model_dim: model.dim(),
            model_classes: model.classes(),
            dim,
            classes,
        });
    }
    Ok(())
}

/// Checks the `out` buffer for scoring `features` with `classes` outputs.
///
/// ```
/// let x = [0.0; 6];
/// let f = oracles::Features::new(&x, 3, 2).unwrap();
/// assert!(oracles::check_score_buffer(f, 2, &[0.0; 6]).is_ok());
/// assert!(oracles::check_score_buffer(f, 2, &[0.0; 5]).is_err());
/// ```
pub fn check_score_buffer(features: Features<'_>, classes: usize, out: &[f64]) -> Result<(), OracleError> {
    let Some(expected) = features.rows().checked_mul(classes) else {
        return Err(OracleError::TooManyClasses { classes, rows: features.rows() });
    };
    if out.len() != expected {
        return Err(OracleError::OutputShape { got: out.len(), expected });
    }
    Ok(())
}

/// Downcasts a warm-start model to the oracle's concrete model type, with a
/// typed error naming both kinds when it is of another class.
///
/// ```
/// use oracles::linear::LinearModel;
/// let m = LinearModel::zeros(2, 2);
/// let warm = oracles::downcast_warm::<LinearModel>(Some(&m), "linear").unwrap();
/// assert!(warm.is_some());
/// assert!(oracles::downcast_warm::<LinearModel>(None, "linear").unwrap().is_none());
/// ```
pub fn downcast_warm<'m, M: Model>(warm: Option<&'m dyn Model>, expected: &str) -> Result<Option<&'m M>, OracleError> {
    match warm {
        None => Ok(None),
        Some(m) => m
            .as_any()
            .downcast_ref::<M>()
            .map(Some)
            .ok_or_else(|| OracleError::WrongModelKind { expected: expected.to_string(), found: m.kind().to_string() }),
    }
}

/// Downcasts `model` to the concrete type of kind `expected` (for
/// [`Oracle::penalty`]), with the same typed error as [`downcast_warm`].
///
/// ```
/// use oracles::linear::LinearModel;
/// let m = LinearModel::zeros(2, 2);
/// assert!(oracles::downcast_model::<LinearModel>(&m, "linear").is_ok());
/// assert!(oracles::downcast_model::<oracles::zero::ZeroModel>(&m, "zero").is_err());
/// ```
pub fn downcast_model<'m, M: Model>(model: &'m dyn Model, expected: &str) -> Result<&'m M, OracleError> {
    downcast_warm::<M>(Some(model), expected)?
        .ok_or_else(|| OracleError::WrongModelKind { expected: expected.to_string(), found: model.kind().to_string() })
}

/// Loss `L` of `model` on `problem` (scores the rows, then [`crate::logistic_loss`]).
///
/// ```
/// use oracles::{Features, Problem, model_loss};
/// let x = [1.0, 1.0];
/// let p = Problem::new(Features::new(&x, 2, 1).unwrap(), &[0, 1], &[0.0; 4], 2, None).unwrap();
/// let zero = oracles::linear::LinearModel::zeros(1, 2);
/// assert!((model_loss(&zero, &p).unwrap() - 2.0 * 2f64.ln()).abs() < 1e-12);
/// ```
pub fn model_loss(model: &dyn Model, problem: &Problem<'_>) -> Result<f64, OracleError> {
    check_model_shape(model, problem.dim(), problem.classes())?;
    // The rows are scored a chunk at a time, never all at once: for a pairwise
    // type that array would be 64 numbers per pair, the size of `θ`.
    crate::problem::chunked_loss(problem, |rows, out| {
        model.score(problem.features().slice_rows(rows.start, rows.end), out)
    })
}

/// Outcome of [`fit_monotone`].
///
/// ```
/// use oracles::{Features, FitContext, Problem, fit_monotone};
/// let x = [0.0, 1.0, 2.0, 3.0];
/// let p = Problem::new(Features::new(&x, 4, 1).unwrap(), &[0, 0, 1, 1], &[0.0; 8], 2, None).unwrap();
/// let oracle = oracles::linear::LinearOracle::default();
/// let first = fit_monotone(&oracle, &p, None, FitContext { seed: 0 }).unwrap();
/// // A warm-started re-fit never returns a worse objective than its start.
/// let second = fit_monotone(&oracle, &p, Some(first.model.as_ref()), FitContext { seed: 1 }).unwrap();
/// assert!(second.objective() <= first.objective());
/// assert_eq!(second.previous_loss, Some(first.loss));
/// assert_eq!(first.penalty, 0.0); // no ridge by default
/// ```
#[derive(Debug)]
pub struct MonotoneFit {
    /// The model kept: the new one, or a copy of the warm start if the new one was worse.
    pub model: Box<dyn Model>,
    /// Loss `L` of the kept model.
    pub loss: f64,
    /// Penalty `Ω` of the kept model ([`Oracle::penalty`]).
    pub penalty: f64,
    /// Loss `L` of the warm-start model (`None` without one).
    pub previous_loss: Option<f64>,
    /// Penalty `Ω` of the warm-start model (`None` without one).
    pub previous_penalty: Option<f64>,
    /// Whether the new fit was rejected in favour of the warm start.
    pub rejected: bool,
}

impl MonotoneFit {
    /// `J = L + Ω` of the kept model: what the oracle minimises.
    pub fn objective(&self) -> f64 {
        self.loss + self.penalty
    }

    /// `J = L + Ω` of the warm-start model (`None` without one).
    pub fn previous_objective(&self) -> Option<f64> {
        Some(self.previous_loss? + self.previous_penalty?)
    }
}

/// Fits with `oracle` and keeps the result only if it does not increase the
/// oracle's objective `J = L + Ω` ([`Oracle::penalty`]) over `warm`
/// (docs/MATH.md §4: "an oracle step never increases R when the oracle is
/// warm-started from its previous function and only accepts improvements";
/// with a penalty, the learner's objective is `R + Σ_t ε_t Ω_t`). Comparing
/// `J`, not `L`, matters with a penalty: the step towards the penalised
/// optimum from an over-fitted warm start raises `L`, and a comparison of `L`
/// alone would reject it for ever.
///
/// ```
/// use oracles::{Features, FitContext, Problem, fit_monotone};
/// let x = [0.0, 1.0];
/// let p = Problem::new(Features::new(&x, 2, 1).unwrap(), &[0, 1], &[0.0; 4], 2, None).unwrap();
/// let fit = fit_monotone(&oracles::constant::ConstantOracle::default(), &p, None, FitContext { seed: 0 }).unwrap();
/// assert!(!fit.rejected && fit.previous_loss.is_none());
/// ```
pub fn fit_monotone(
    oracle: &dyn Oracle,
    problem: &Problem<'_>,
    warm: Option<&dyn Model>,
    ctx: FitContext,
) -> Result<MonotoneFit, OracleError> {
    monotone(oracle, problem, warm, ctx, None)
}

/// [`fit_monotone`] keeping `scores` current, as [`Oracle::fit_scored`]: given
/// the warm start's scores on the problem's rows (zeros without one), it
/// leaves the kept model's scores there, bit for bit what [`Model::score`]
/// writes (the warm start's again when the fit is rejected).
///
/// ```
/// use oracles::{Features, FitContext, Model, Problem, fit_monotone_scored};
/// let x = [0.0, 1.0, 2.0, 3.0];
/// let p = Problem::new(Features::new(&x, 4, 1).unwrap(), &[0, 0, 1, 1], &[0.0; 8], 2, None).unwrap();
/// let oracle = oracles::boosting::BoostingOracle { rounds: 2, ..Default::default() };
/// let mut scores = vec![0.0; 8];
/// let first = fit_monotone_scored(&oracle, &p, None, FitContext { seed: 0 }, &mut scores).unwrap();
/// let second = fit_monotone_scored(&oracle, &p, Some(first.model.as_ref()), FitContext { seed: 1 }, &mut scores).unwrap();
/// let mut direct = vec![0.0; 8];
/// second.model.score(p.features(), &mut direct).unwrap();
/// assert_eq!(scores, direct);
/// ```
pub fn fit_monotone_scored(
    oracle: &dyn Oracle,
    problem: &Problem<'_>,
    warm: Option<&dyn Model>,
    ctx: FitContext,
    scores: &mut [f64],
) -> Result<MonotoneFit, OracleError> {
    check_score_buffer(problem.features(), problem.classes(), scores)?;
    monotone(oracle, problem, warm, ctx, Some(scores))
}

/// [`fit_monotone`] and [`fit_monotone_scored`].
fn monotone(
    oracle: &dyn Oracle,
    problem: &Problem<'_>,
    warm: Option<&dyn Model>,
    ctx: FitContext,
    scores: Option<&mut [f64]>,
) -> Result<MonotoneFit, OracleError> {
    oracle.validate()?;
    let (model, known, scores) = match scores {
        Some(s) => {
            let (model, known) = oracle.fit_scored(problem, warm, ctx, s)?;
            (model, known, Some(s))
        }
        None => {
            let (model, known) = oracle.fit_with_losses(problem, warm, ctx)?;
            (model, known, None)
        }
    };
    let (previous_loss, previous_penalty) = match (warm, known.warm_loss) {
        (Some(w), Some(l)) => (Some(l), Some(oracle.penalty(w)?)),
        (Some(w), None) => (Some(model_loss(w, problem)?), Some(oracle.penalty(w)?)),
        (None, _) => (None, None),
    };
    let loss = match (known.loss, &scores) {
        (Some(l), _) => l,
        (None, Some(s)) => crate::logistic_loss(problem, s, None),
        (None, None) => model_loss(model.as_ref(), problem)?,
    };
    let penalty = oracle.penalty(model.as_ref())?;
    match (warm, previous_loss, previous_penalty) {
        // Also rejects a NaN objective: only one that compares ≤ the previous one is kept.
        (Some(w), Some(prev), Some(prev_pen))
            if !matches!((loss + penalty).partial_cmp(&(prev + prev_pen)), Some(Ordering::Less | Ordering::Equal)) =>
        {
            if let Some(s) = scores {
                w.score(problem.features(), s)?;
            }
            Ok(MonotoneFit {
                model: w.clone_model(),
                loss: prev,
                penalty: prev_pen,
                previous_loss,
                previous_penalty,
                rejected: true,
            })
        }
        _ => Ok(MonotoneFit { model, loss, penalty, previous_loss, previous_penalty, rejected: false }),
    }
}

/// Reads a model of one kind back from [`Model::to_bytes`].
///
/// ```
/// let loader: oracles::ModelLoader = oracles::linear::load;
/// let m = oracles::linear::LinearModel::zeros(2, 3);
/// use oracles::Model;
/// assert_eq!(loader(&m.to_bytes().unwrap()).unwrap().classes(), 3);
/// ```
pub type ModelLoader = fn(&[u8]) -> Result<Box<dyn Model>, OracleError>;

/// Encodes a serde model with postcard (helper for [`Model::to_bytes`]).
///
/// ```
/// let bytes = oracles::encode("demo", &(3u32, vec![1.5f64])).unwrap();
/// let back: (u32, Vec<f64>) = oracles::decode("demo", &bytes).unwrap();
/// assert_eq!(back, (3, vec![1.5]));
/// ```
pub fn encode<T: serde::Serialize>(kind: &str, value: &T) -> Result<Vec<u8>, OracleError> {
    postcard::to_stdvec(value).map_err(|source| OracleError::Codec { kind: kind.to_string(), source })
}

/// Decodes a serde model with postcard (helper for loaders).
///
/// ```
/// let err = oracles::decode::<Vec<f64>>("demo", &[0xff]).unwrap_err();
/// assert!(err.to_string().contains("demo"));
/// ```
pub fn decode<T: serde::de::DeserializeOwned>(kind: &str, bytes: &[u8]) -> Result<T, OracleError> {
    postcard::from_bytes(bytes).map_err(|source| OracleError::Codec { kind: kind.to_string(), source })
}
