//! Command-line value parsers that reject bad numbers with a message naming
//! the option's meaning, and error printing that shows each cause once.

/// Smallest and largest entropy weight `ε` the command line accepts: those
/// training accepts ([`structlearn::train::EPSILON_RANGE`]).
///
/// ```
/// let (lo, hi) = structlearn_cli::EPS_RANGE;
/// assert!(lo > 0.0 && hi.is_finite());
/// ```
pub const EPS_RANGE: (f64, f64) = structlearn::train::EPSILON_RANGE;

/// Parses an entropy weight `ε`: a number in [`EPS_RANGE`].
///
/// ```
/// use structlearn_cli::parse_eps;
/// assert_eq!(parse_eps("0.1"), Ok(0.1));
/// assert!(parse_eps("-1").unwrap_err().contains("ε"));
/// assert!(parse_eps("1e308").is_err());
/// assert!(parse_eps("nan").is_err());
/// ```
pub fn parse_eps(text: &str) -> Result<f64, String> {
    let (lo, hi) = EPS_RANGE;
    match text.trim().parse::<f64>() {
        Ok(v) if (lo..=hi).contains(&v) => Ok(v),
        Ok(v) => Err(format!("the entropy weight ε must be between {lo:e} and {hi:e} (got {v:e})")),
        Err(_) => Err(format!("the entropy weight ε must be a number (got `{text}`)")),
    }
}

/// Parses the last ε of an annealed prediction as a multiple of the model's
/// ε: a number in (0, 1].
///
/// ```
/// use structlearn_cli::parse_eps_factor;
/// assert_eq!(parse_eps_factor("0.01"), Ok(0.01));
/// assert!(parse_eps_factor("0").is_err() && parse_eps_factor("2").is_err() && parse_eps_factor("nan").is_err());
/// ```
pub fn parse_eps_factor(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(v) if v > 0.0 && v <= 1.0 => Ok(v),
        Ok(v) => Err(format!("--eps-min is the last ε as a multiple of the model's: a number in (0, 1] (got {v:e})")),
        Err(_) => Err(format!("--eps-min must be a number in (0, 1] (got `{text}`)")),
    }
}

/// Parses a convergence tolerance: a finite number > 0.
///
/// ```
/// use structlearn_cli::parse_tolerance;
/// assert_eq!(parse_tolerance("1e-4"), Ok(1e-4));
/// for bad in ["0", "nan", "-1", "inf", "x"] {
///     assert!(parse_tolerance(bad).unwrap_err().contains("tolerance"));
/// }
/// ```
pub fn parse_tolerance(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(v) if v > 0.0 && v.is_finite() => Ok(v),
        Ok(v) => Err(format!("the tolerance (largest marginalisation violation) must be finite and > 0 (got {v:e})")),
        Err(_) => Err(format!("the tolerance must be a number (got `{text}`)")),
    }
}

/// Parses a duration in seconds: a finite number ≥ 0.
///
/// ```
/// use structlearn_cli::parse_seconds;
/// assert_eq!(parse_seconds("600"), Ok(600.0));
/// assert_eq!(parse_seconds("0"), Ok(0.0));
/// for bad in ["-1", "nan", "inf", "x"] {
///     assert!(parse_seconds(bad).unwrap_err().contains("seconds"));
/// }
/// ```
pub fn parse_seconds(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(v) if v >= 0.0 && v.is_finite() => Ok(v),
        Ok(v) => Err(format!("the number of seconds must be finite and ≥ 0 (got {v})")),
        Err(_) => Err(format!("the number of seconds must be a number (got `{text}`)")),
    }
}

/// An error and its causes as one line, each cause once: a cause whose text
/// its parent already shows (as in `"file: No such file"` above the I/O error
/// `"No such file"`) is skipped.
///
/// ```
/// let io = std::io::Error::new(std::io::ErrorKind::NotFound, "no such file");
/// let e = anyhow::Error::new(io).context("data.sld: no such file").context("training set");
/// assert_eq!(structlearn_cli::error_text(&e), "training set: data.sld: no such file");
/// ```
pub fn error_text(error: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in error.chain() {
        let part = cause.to_string();
        if text.is_empty() {
            text = part;
        } else if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
    }
    text
}
