//! The UAI competitions' result formats, so that their scorers read our answers:
//!
//! ```text
//! MAP
//! 3 0 1 2           number of variables, then each variable's label
//! ```
//!
//! ```text
//! MAR
//! 2 2 0.25 0.75 3 0.1 0.2 0.7     number of variables, then for each: its cardinality and its marginals
//! ```
//!
//! [`format_map`] / [`format_mar`] write them (probabilities in the shortest
//! form that reads back to the same `f64`), [`parse_map`] / [`parse_mar`]
//! read them back (errors name the line).
//!
//! ```
//! let text = factor_graph::format_mar(&[vec![0.25, 0.75], vec![1.0]]);
//! assert_eq!(text, "MAR\n2 2 0.25 0.75 1 1.0\n");
//! assert_eq!(factor_graph::parse_mar(&text).unwrap(), vec![vec![0.25, 0.75], vec![1.0]]);
//! ```

use crate::UaiError;

/// The `.MAP` text of a labelling: `MAP`, then `n y_0 … y_{n−1}`.
///
/// ```
/// assert_eq!(factor_graph::format_map(&[0, 2, 1]), "MAP\n3 0 2 1\n");
/// ```
pub fn format_map(labels: &[usize]) -> String {
    let mut s = format!("MAP\n{}", labels.len());
    for y in labels {
        s.push(' ');
        s.push_str(&y.to_string());
    }
    s.push('\n');
    s
}

/// The `.MAR` text of marginals, one distribution per variable: `MAR`, then
/// `n`, then for each variable its cardinality and its probabilities.
pub fn format_mar(marginals: &[Vec<f64>]) -> String {
    let mut s = format!("MAR\n{}", marginals.len());
    for m in marginals {
        s.push(' ');
        s.push_str(&m.len().to_string());
        for p in m {
            s.push(' ');
            s.push_str(&format!("{p:?}"));
        }
    }
    s.push('\n');
    s
}

/// Tokens with their 1-based line numbers.
fn tokens(text: &str) -> Vec<(usize, &str)> {
    text.lines().enumerate().flat_map(|(i, line)| line.split_whitespace().map(move |t| (i + 1, t))).collect()
}

/// Reads the next token as `T`, or a parse error naming the line.
fn take<T: std::str::FromStr>(items: &[(usize, &str)], pos: &mut usize, expected: &str) -> Result<T, UaiError> {
    let Some(&(line, tok)) = items.get(*pos) else {
        return Err(UaiError::Parse {
            line: items.last().map_or(1, |t| t.0),
            expected: expected.into(),
            found: "end of file".into(),
        });
    };
    *pos += 1;
    tok.parse().map_err(|_| UaiError::Parse { line, expected: expected.into(), found: format!("`{tok}`") })
}

/// The header word, then nothing after the body.
fn check_header(items: &[(usize, &str)], word: &str) -> Result<(), UaiError> {
    match items.first() {
        Some(&(_, w)) if w == word => Ok(()),
        Some(&(line, w)) => Err(UaiError::Parse { line, expected: format!("`{word}`"), found: format!("`{w}`") }),
        None => Err(UaiError::Parse { line: 1, expected: format!("`{word}`"), found: "end of file".into() }),
    }
}

fn check_end(items: &[(usize, &str)], pos: usize) -> Result<(), UaiError> {
    match items.get(pos) {
        Some(&(line, tok)) => Err(UaiError::Parse { line, expected: "end of file".into(), found: format!("`{tok}`") }),
        None => Ok(()),
    }
}

/// Reads `.MAP` text ([`format_map`]) back to the labels.
///
/// ```
/// assert_eq!(factor_graph::parse_map("MAP\n2 1 0\n").unwrap(), vec![1, 0]);
/// assert!(factor_graph::parse_map("MAP\n2 1\n").is_err());
/// ```
pub fn parse_map(text: &str) -> Result<Vec<usize>, UaiError> {
    let items = tokens(text);
    check_header(&items, "MAP")?;
    let mut pos = 1;
    let n: usize = take(&items, &mut pos, "the number of variables")?;
    let mut labels = Vec::with_capacity(n.min(items.len()));
    for i in 0..n {
        labels.push(take(&items, &mut pos, &format!("the label of variable {i}"))?);
    }
    check_end(&items, pos)?;
    Ok(labels)
}

/// Reads `.MAR` text ([`format_mar`]) back to one distribution per variable.
pub fn parse_mar(text: &str) -> Result<Vec<Vec<f64>>, UaiError> {
    let items = tokens(text);
    check_header(&items, "MAR")?;
    let mut pos = 1;
    let n: usize = take(&items, &mut pos, "the number of variables")?;
    let mut marginals = Vec::with_capacity(n.min(items.len()));
    for i in 0..n {
        let card: usize = take(&items, &mut pos, &format!("the cardinality of variable {i}"))?;
        let mut m = Vec::with_capacity(card.min(items.len()));
        for y in 0..card {
            m.push(take(&items, &mut pos, &format!("the marginal of label {y} of variable {i}"))?);
        }
        marginals.push(m);
    }
    check_end(&items, pos)?;
    Ok(marginals)
}
