//! The UAI model format (MARKOV networks with tables), as used by the UAI
//! inference competitions, so models can be exchanged with other tools.
//!
//! ```text
//! MARKOV
//! 3                 number of variables
//! 2 2 3             cardinalities
//! 2                 number of factors
//! 2 0 1             scope of factor 0: size, then variables
//! 2 1 2             scope of factor 1
//! 4                 table of factor 0: size, then entries (last scope variable fastest)
//!  0.1 0.9 0.5 0.5
//! 6
//!  1 2 3 4 5 0
//! ```
//!
//! `BAYES` files have the same layout; each table is a conditional
//! probability table whose child is the last variable of its scope, and is
//! used as a factor like a MARKOV table (rows that do not sum to 1 give a
//! [`UaiWarning`], not an error).
//!
//! Conversion to a region graph ([`UaiModel::to_region_graph`]): one singleton
//! region per variable (type `unary`, regions `0..N`) plus one region per
//! distinct scope of two or more variables (type `factor`), each the parent of
//! its variables' singletons; single-variable factors merge into the singleton;
//! factors with the same scope add; `θ = ln(table value)`, so a zero entry is
//! `θ = −∞` (a hard constraint). A factor with an empty scope adds a constant.

use std::fmt::Write as _;
use std::path::Path;

use crate::graph::{ZeroPropagation, strides};
use crate::{InfeasibleCause, MAX_REGION_CONFIGS, MIN_GRAPH_BUDGET, RegionGraph, RegionGraphBuilder, UNARY, UaiError};

/// Factor type name of the non-singleton regions of a converted UAI model.
pub const UAI_FACTOR_TYPE: &str = "factor";

/// One factor of a UAI file: its scope and table (last scope variable fastest).
///
/// ```
/// let f = factor_graph::UaiFactor { scope: vec![0, 1], table: vec![1.0, 2.0, 3.0, 4.0] };
/// assert_eq!(f.table.len(), 4); // |Y_0| · |Y_1|, last variable fastest
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct UaiFactor {
    /// Variables in the order of the file.
    pub scope: Vec<usize>,
    /// Non-negative table entries, one per configuration of `scope`.
    pub table: Vec<f64>,
}

/// A MARKOV network as written in a UAI file.
///
/// ```
/// use factor_graph::UaiModel;
/// // Two binary variables, a unary and a pairwise table (UAI MARKOV format).
/// let text = "MARKOV\n2\n2 2\n2\n1 0\n2 0 1\n\n2\n0.4 0.6\n\n4\n1 2 2 1\n";
/// let model = UaiModel::parse(text).unwrap();
/// assert_eq!(model.cardinalities, vec![2, 2]);
/// // As a region graph with log-potentials θ = ln(table):
/// let m = model.to_region_graph().unwrap();
/// let r = m.placements[1].region.unwrap();
/// assert_eq!(m.graph.region_variables(r), &[0, 1]);
/// assert!((m.theta[m.graph.config_range(r).start + 1] - 2f64.ln()).abs() < 1e-12);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct UaiModel {
    /// The file's preamble: `MARKOV` or `BAYES`. Both convert alike (each
    /// table a factor); a BAYES model's tables are conditional probability
    /// tables, the child the last variable of each scope, checked by
    /// [`UaiModel::cpt_warnings`].
    pub network: UaiNetwork,
    /// `|Y_i|` per variable.
    pub cardinalities: Vec<usize>,
    /// The factors, in file order.
    pub factors: Vec<UaiFactor>,
}

/// The network type of a UAI file's preamble.
///
/// ```
/// let m = factor_graph::UaiModel::parse("BAYES\n1\n2\n1\n1 0\n2\n0.3 0.7\n").unwrap();
/// assert_eq!(m.network, factor_graph::UaiNetwork::Bayes);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum UaiNetwork {
    /// `MARKOV`: tables are non-negative potentials.
    #[default]
    Markov,
    /// `BAYES`: each table is a conditional probability table `P(child | parents)`,
    /// the child the last variable of its scope (so each run of `|Y_child|`
    /// consecutive entries, one per parent configuration, should sum to 1).
    Bayes,
}

impl UaiNetwork {
    /// The preamble word: `MARKOV` or `BAYES`.
    pub fn name(self) -> &'static str {
        match self {
            UaiNetwork::Markov => "MARKOV",
            UaiNetwork::Bayes => "BAYES",
        }
    }
}

/// Something in a UAI file that is valid but probably not what was meant.
///
/// ```
/// let text = "BAYES\n2\n2 2\n2\n1 0\n2 0 1\n2\n0.5 0.5\n4\n0.2 0.8 0.6 0.6\n";
/// let (_, warnings) = factor_graph::UaiModel::parse_with_warnings(text).unwrap();
/// assert_eq!(warnings.len(), 1);
/// assert!(warnings[0].to_string().starts_with("UAI line 9: table of factor 1 (child variable 1)"));
/// ```
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum UaiWarning {
    /// A BAYES table with a row (the child's entries for one configuration of
    /// the parents) that does not sum to 1 within [`CPT_TOLERANCE`]. It is
    /// still used as a factor (`θ = ln` of its entries).
    #[error(
        "UAI line {line}: table of factor {factor} (child variable {child}) is not a conditional probability table: \
         {bad_rows} of its {rows} rows do not sum to 1 (row {first_row}, a configuration of the parents, sums to {sum}); \
         it is used as a factor as it is"
    )]
    CptNotNormalized {
        /// 1-based line of the table's size.
        line: usize,
        /// The factor (index in the file).
        factor: usize,
        /// The child: the last variable of its scope.
        child: usize,
        /// Rows (parent configurations).
        rows: usize,
        /// Rows whose sum is off.
        bad_rows: usize,
        /// The first such row (parent configuration index, last parent fastest).
        first_row: usize,
        /// Its sum.
        sum: f64,
    },
}

/// How far a row of a BAYES table may sum from 1 without a [`UaiWarning`].
pub const CPT_TOLERANCE: f64 = 1e-6;

/// Where a factor of the file lives in the converted region graph.
///
/// ```
/// let m = factor_graph::UaiModel::parse("MARKOV\n1\n2\n1\n1 0\n2\n1 3\n").unwrap().to_region_graph().unwrap();
/// let p = &m.placements[0];
/// assert_eq!(p.map, vec![0, 1]); // table entry i is configuration p.map[i] of region p.region
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct FactorPlacement {
    /// The region holding the factor (`None` for an empty scope).
    pub region: Option<usize>,
    /// `map[table index] = region configuration index` (the region may order
    /// its variables differently from this factor's scope).
    pub map: Vec<usize>,
}

/// A UAI model converted to a region graph and potentials.
///
/// ```
/// let m = factor_graph::UaiModel::parse("MARKOV\n1\n2\n1\n1 0\n2\n1 3\n").unwrap().to_region_graph().unwrap();
/// assert_eq!(m.graph.num_regions(), 1);
/// assert_eq!(m.theta.len(), 2);
/// ```
#[derive(Debug, Clone)]
pub struct UaiRegionModel {
    /// The region graph.
    pub graph: RegionGraph,
    /// Flat potentials `θ` (see `RegionGraph::config_range`).
    pub theta: Vec<f64>,
    /// Sum of `ln` of the empty-scope factors (a constant added to every score).
    pub constant: f64,
    /// For every factor of the file, in file order, where it went.
    pub placements: Vec<FactorPlacement>,
}

/// The whitespace-separated tokens of a UAI text file (model or evidence),
/// each with its 1-based line, `//` comments left out.
pub(crate) fn tokens(text: &str) -> Vec<(usize, &str)> {
    text.lines()
        .enumerate()
        .flat_map(|(i, line)| {
            let line = line.split_once("//").map_or(line, |(a, _)| a);
            line.split_whitespace().map(move |t| (i + 1, t))
        })
        .collect()
}

struct Tokens<'a> {
    items: Vec<(usize, &'a str)>,
    pos: usize,
}

impl<'a> Tokens<'a> {
    fn new(text: &'a str) -> Self {
        Self { items: tokens(text), pos: 0 }
    }

    fn next(&mut self, expected: &str) -> Result<(usize, &'a str), UaiError> {
        match self.items.get(self.pos) {
            Some(&(line, tok)) => {
                self.pos += 1;
                Ok((line, tok))
            }
            None => Err(UaiError::Parse {
                line: self.items.last().map_or(1, |t| t.0),
                expected: expected.to_string(),
                found: "end of file".to_string(),
            }),
        }
    }

    /// Tokens not read yet: an upper bound on what any declared count can hold.
    fn remaining(&self) -> usize {
        self.items.len() - self.pos
    }

    fn usize(&mut self, expected: &str) -> Result<usize, UaiError> {
        let (line, tok) = self.next(expected)?;
        tok.parse().map_err(|_| UaiError::Parse { line, expected: expected.to_string(), found: format!("`{tok}`") })
    }

    fn value(&mut self, expected: &str) -> Result<f64, UaiError> {
        let (line, tok) = self.next(expected)?;
        match tok.parse::<f64>() {
            Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
            _ => Err(UaiError::Parse { line, expected: expected.to_string(), found: format!("`{tok}`") }),
        }
    }
}

impl UaiRegionModel {
    /// Refuses a model whose zero entries rule out every labelling, naming
    /// the factors of `model` (the model this one was converted from):
    ///
    /// * [`InfeasibleCause::AllZero`]: the factors placed in one region (one
    ///   factor, factors over the same variables, or factors over one
    ///   variable) are zero together in every configuration;
    /// * [`InfeasibleCause::Propagation`]: following the zero entries from
    ///   factor to factor through shared variables
    ///   ([`RegionGraph::propagate_zeros`], at most 32 visits per flat entry
    ///   of the graph) leaves some region with no possible configuration.
    ///
    /// Inference on such a model minimises a dual that is unbounded below and
    /// reports meaningless numbers. `Ok` does not prove that a labelling of
    /// positive probability exists: the propagation is sound, not complete.
    ///
    /// ```
    /// use factor_graph::{InfeasibleCause, UaiError, UaiModel};
    /// // f(0, 1) allows only (0, 0), f(1, 2) only (1, 1): jointly impossible.
    /// let model = UaiModel::parse("MARKOV\n3\n2 2 2\n2\n2 0 1\n2 1 2\n4\n1 0 0 0\n4\n0 0 0 1\n").unwrap();
    /// let err = model.to_region_graph().unwrap().check_feasible(&model).unwrap_err();
    /// assert!(matches!(err, UaiError::Infeasible { cause: InfeasibleCause::Propagation { .. }, .. }));
    /// ```
    pub fn check_feasible(&self, model: &UaiModel) -> Result<(), UaiError> {
        let g = &self.graph;
        let placed = |r: usize| -> Vec<usize> {
            self.placements.iter().enumerate().filter(|(_, p)| p.region == Some(r)).map(|(f, _)| f).collect()
        };
        let named = |factors: Vec<usize>| -> Vec<(usize, Vec<usize>)> {
            factors.into_iter().map(|f| (f, model.factors[f].scope.clone())).collect()
        };
        for r in 0..g.num_regions() {
            if self.theta[g.config_range(r)].iter().all(|&t| t == f64::NEG_INFINITY) {
                let factors = placed(r);
                // One factor that is all zeros by itself is the whole story.
                let alone = factors.iter().copied().find(|&f| model.factors[f].table.iter().all(|&v| v == 0.0));
                let factors = alone.map_or(factors, |f| vec![f]);
                return Err(UaiError::Infeasible { factors: named(factors), cause: InfeasibleCause::AllZero });
            }
        }
        let max_work = g.spec().flat_len().unwrap_or(usize::MAX).saturating_mul(32);
        if let ZeroPropagation::Empty { region } = g.propagate_zeros(&self.theta, max_work) {
            let variables = g.region_variables(region).to_vec();
            let factors = match variables[..] {
                [v] => (0..model.factors.len()).filter(|&f| model.factors[f].scope.contains(&v)).collect(),
                _ => placed(region),
            };
            return Err(UaiError::Infeasible {
                factors: named(factors),
                cause: InfeasibleCause::Propagation { variables },
            });
        }
        Ok(())
    }
}

impl UaiModel {
    /// Parses UAI text. Errors name the line and what was expected.
    ///
    /// ```
    /// let m = factor_graph::UaiModel::parse("MARKOV\n2\n2 2\n1\n2 0 1\n4\n1 2 3 4\n").unwrap();
    /// assert_eq!(m.factors[0].table, vec![1.0, 2.0, 3.0, 4.0]);
    /// let err = factor_graph::UaiModel::parse("MARKOV\n2\n2 x\n").unwrap_err();
    /// assert!(err.to_string().contains("line 3"));
    /// ```
    pub fn parse(text: &str) -> Result<Self, UaiError> {
        Self::parse_with_warnings(text).map(|(model, _)| model)
    }

    /// [`UaiModel::parse`], and what is valid but suspicious: for a BAYES
    /// file, the tables whose rows do not sum to 1 ([`UaiWarning`]).
    pub fn parse_with_warnings(text: &str) -> Result<(Self, Vec<UaiWarning>), UaiError> {
        let mut t = Tokens::new(text);
        let (line, kind) = t.next("network type MARKOV")?;
        if !kind.eq_ignore_ascii_case("MARKOV") && !kind.eq_ignore_ascii_case("BAYES") {
            return Err(UaiError::Parse {
                line,
                expected: "network type MARKOV (or BAYES)".into(),
                found: format!("`{kind}`"),
            });
        }
        let network = if kind.eq_ignore_ascii_case("BAYES") { UaiNetwork::Bayes } else { UaiNetwork::Markov };
        let n = t.usize("number of variables")?;
        // Capacities never exceed the tokens left: a header cannot reserve
        // more memory than the file's own text could fill.
        let mut cardinalities = Vec::with_capacity(n.min(t.remaining()));
        for i in 0..n {
            let (line, tok) = t.next(&format!("cardinality of variable {i}"))?;
            match tok.parse::<usize>() {
                Ok(c) if c >= 1 => cardinalities.push(c),
                _ => {
                    return Err(UaiError::Parse {
                        line,
                        expected: format!("cardinality (>= 1) of variable {i}"),
                        found: format!("`{tok}`"),
                    });
                }
            }
        }
        let nf = t.usize("number of factors")?;
        let mut scopes = Vec::with_capacity(nf.min(t.remaining()));
        // `in_scope[v] == f + 1` while factor `f`'s scope is read and names `v`:
        // a repeat is found in O(1), so a scope of k variables costs O(k), not O(k²).
        let mut in_scope = vec![0usize; n];
        let mut scope_lines = Vec::with_capacity(nf.min(t.remaining()));
        for f in 0..nf {
            scope_lines.push(t.items.get(t.pos).map_or(0, |item| item.0));
            let size = t.usize(&format!("scope size of factor {f}"))?;
            let mut scope = Vec::with_capacity(size.min(t.remaining()));
            for _ in 0..size {
                let (line, tok) = t.next(&format!("variable of factor {f}'s scope"))?;
                match tok.parse::<usize>() {
                    Ok(v) if v < n && in_scope[v] != f + 1 => {
                        in_scope[v] = f + 1;
                        scope.push(v);
                    }
                    _ => {
                        return Err(UaiError::Parse {
                            line,
                            expected: format!("a distinct variable index < {n} in factor {f}'s scope"),
                            found: format!("`{tok}`"),
                        });
                    }
                }
            }
            scopes.push(scope);
        }
        let mut factors = Vec::with_capacity(nf);
        let mut warnings = Vec::new();
        for (f, scope) in scopes.into_iter().enumerate() {
            let entries = scope.iter().try_fold(1u128, |acc, &v| acc.checked_mul(cardinalities[v] as u128));
            let expected_len = match entries {
                Some(e) if e <= MAX_REGION_CONFIGS as u128 => e as usize,
                _ => {
                    return Err(UaiError::TableTooLarge {
                        line: scope_lines[f],
                        factor: f,
                        scope_len: scope.len(),
                        entries,
                        limit: MAX_REGION_CONFIGS,
                    });
                }
            };
            let (line, tok) = t.next(&format!("table size of factor {f}"))?;
            if tok.parse::<usize>().ok() != Some(expected_len) {
                return Err(UaiError::Parse {
                    line,
                    expected: format!("table size {expected_len} of factor {f} (product of its scope's cardinalities)"),
                    found: format!("`{tok}`"),
                });
            }
            if expected_len > t.remaining() {
                return Err(UaiError::Parse {
                    line,
                    expected: format!("{expected_len} table entries of factor {f}"),
                    found: format!("only {} values before the end of file", t.remaining()),
                });
            }
            let mut table = Vec::with_capacity(expected_len);
            for _ in 0..expected_len {
                table.push(t.value(&format!("a finite, non-negative table entry of factor {f}"))?);
            }
            if network == UaiNetwork::Bayes {
                warnings.extend(cpt_warning(line, f, &scope, &table, &cardinalities));
            }
            factors.push(UaiFactor { scope, table });
        }
        if let Some(&(line, tok)) = t.items.get(t.pos) {
            return Err(UaiError::Parse { line, expected: "end of file".into(), found: format!("`{tok}`") });
        }
        Ok((Self { network, cardinalities, factors }, warnings))
    }

    /// The BAYES tables whose rows do not sum to 1 within [`CPT_TOLERANCE`]
    /// (none for a MARKOV model); `line` of each warning is 0 (the model does
    /// not keep its file's lines: [`UaiModel::parse_with_warnings`] gives them).
    ///
    /// ```
    /// let m = factor_graph::UaiModel::parse("BAYES\n1\n2\n1\n1 0\n2\n0.3 0.6\n").unwrap();
    /// assert_eq!(m.cpt_warnings().len(), 1);
    /// ```
    pub fn cpt_warnings(&self) -> Vec<UaiWarning> {
        if self.network != UaiNetwork::Bayes {
            return Vec::new();
        }
        self.factors
            .iter()
            .enumerate()
            .filter_map(|(f, factor)| cpt_warning(0, f, &factor.scope, &factor.table, &self.cardinalities))
            .collect()
    }

    /// Reads and parses a UAI file; errors name the file ([`UaiError::in_file`]).
    ///
    /// ```
    /// let path = std::env::temp_dir().join(format!("read-doc-{}.uai", std::process::id()));
    /// std::fs::write(&path, "MARKOV\n2\n2 x\n").unwrap();
    /// let err = factor_graph::UaiModel::read(&path).unwrap_err().to_string();
    /// assert!(err.contains(&path.display().to_string()) && err.contains("line 3"));
    /// std::fs::remove_file(&path).unwrap();
    /// ```
    pub fn read(path: &Path) -> Result<Self, UaiError> {
        Self::read_with_warnings(path).map(|(model, _)| model)
    }

    /// [`UaiModel::read`] and the file's warnings ([`UaiModel::parse_with_warnings`]).
    pub fn read_with_warnings(path: &Path) -> Result<(Self, Vec<UaiWarning>), UaiError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| UaiError::Io { path: path.display().to_string(), source })?;
        Self::parse_with_warnings(&text).map_err(|e| e.in_file(path))
    }

    /// Writes the model as UAI text (entries printed exactly: shortest round-trip form).
    pub fn to_uai_string(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "{}\n{}", self.network.name(), self.cardinalities.len());
        let cards: Vec<String> = self.cardinalities.iter().map(usize::to_string).collect();
        let _ = writeln!(s, "{}\n{}", cards.join(" "), self.factors.len());
        for f in &self.factors {
            let vars: Vec<String> = f.scope.iter().map(usize::to_string).collect();
            let _ = writeln!(s, "{} {}", f.scope.len(), vars.join(" "));
        }
        for f in &self.factors {
            let vals: Vec<String> = f.table.iter().map(|v| format!("{v:?}")).collect();
            let _ = writeln!(s, "\n{}\n {}", f.table.len(), vals.join(" "));
        }
        s
    }

    /// Writes the model to a UAI file.
    pub fn write(&self, path: &Path) -> Result<(), UaiError> {
        std::fs::write(path, self.to_uai_string())
            .map_err(|source| UaiError::Io { path: path.display().to_string(), source })
    }

    /// Converts to a region graph and potentials (see module docs).
    ///
    /// The graph may hold at most [`MIN_GRAPH_BUDGET`] plus 64 entries per table
    /// entry of the model ([`RegionGraphSpec::flat_len`](crate::RegionGraphSpec::flat_len)),
    /// so that a few bytes declaring huge cardinalities give
    /// [`GraphError::TooLarge`](crate::GraphError::TooLarge), not gigabytes of
    /// potentials. An empty-scope factor is a constant factor `ln(value)` of
    /// the score; a value of 0 makes every configuration impossible and is an
    /// error.
    pub fn to_region_graph(&self) -> Result<UaiRegionModel, UaiError> {
        if let Some(f) =
            self.factors.iter().position(|f| f.scope.is_empty() && f.table.first().is_none_or(|&v| v <= 0.0))
        {
            return Err(UaiError::Invalid(format!(
                "factor {f} has an empty scope and value 0 (or no value), so every configuration has probability 0"
            )));
        }
        let entries = self.factors.iter().fold(0usize, |acc, f| acc.saturating_add(f.table.len()));
        let n = self.cardinalities.len();
        // Named here by variable: the builder would report "region i".
        if let Some((variable, &c)) = self.cardinalities.iter().enumerate().find(|&(_, &c)| c > MAX_REGION_CONFIGS) {
            return Err(UaiError::Invalid(format!(
                "variable {variable} has cardinality {c}, more than the limit of {MAX_REGION_CONFIGS} labels"
            )));
        }
        let mut b = RegionGraphBuilder::new(self.cardinalities.clone())?;
        let unary = b.add_factor_type(UNARY)?;
        for i in 0..n {
            b.add_region(&[i], unary)?;
        }
        let mut factor_type = None;
        let mut region_of = Vec::with_capacity(self.factors.len());
        for f in &self.factors {
            let region = match f.scope.len() {
                0 => None,
                1 => Some(f.scope[0]),
                _ => Some(match b.find_region(&f.scope) {
                    Some(r) => r,
                    None => {
                        let t = match factor_type {
                            Some(t) => t,
                            None => *factor_type.insert(b.add_factor_type(UAI_FACTOR_TYPE)?),
                        };
                        let r = b.add_region(&f.scope, t)?;
                        for &v in &f.scope {
                            b.add_edge(r, v)?;
                        }
                        r
                    }
                }),
            };
            region_of.push(region);
        }
        let graph = b.build_within(MIN_GRAPH_BUDGET.saturating_add(entries.saturating_mul(64)))?;
        let mut theta = vec![0.0; graph.total_configs()];
        let mut constant = 0.0;
        let mut placements = Vec::with_capacity(self.factors.len());
        for (f, region) in self.factors.iter().zip(region_of) {
            let Some(r) = region else {
                constant += f.table[0].ln();
                placements.push(FactorPlacement { region: None, map: vec![0] });
                continue;
            };
            let map = table_to_region_map(&graph, r, &f.scope);
            let range = graph.config_range(r);
            for (k, &v) in f.table.iter().enumerate() {
                theta[range.start + map[k]] += v.ln();
            }
            placements.push(FactorPlacement { region: Some(r), map });
        }
        Ok(UaiRegionModel { graph, theta, constant, placements })
    }

    /// Exports a region graph with potentials `θ` as a UAI model: one factor per
    /// region, table `exp(θ_α)` (so `θ = −∞` becomes 0).
    pub fn from_region_graph(graph: &RegionGraph, theta: &[f64]) -> Self {
        let factors = (0..graph.num_regions())
            .map(|r| UaiFactor {
                scope: graph.region_variables(r).to_vec(),
                table: theta[graph.config_range(r)].iter().map(|t| t.exp()).collect(),
            })
            .collect();
        Self { network: UaiNetwork::Markov, cardinalities: graph.cardinalities().to_vec(), factors }
    }
}

/// The warning for a BAYES table whose rows (runs of `|Y_child|` entries, the
/// child last in the scope) do not all sum to 1 within [`CPT_TOLERANCE`].
fn cpt_warning(line: usize, factor: usize, scope: &[usize], table: &[f64], cards: &[usize]) -> Option<UaiWarning> {
    let child = *scope.last()?;
    let width = cards[child].max(1);
    let rows = table.len() / width;
    let bad: Vec<(usize, f64)> = table
        .chunks(width)
        .map(|row| row.iter().sum::<f64>())
        .enumerate()
        .filter(|&(_, sum)| (sum - 1.0).abs() > CPT_TOLERANCE)
        .collect();
    let &(first_row, sum) = bad.first()?;
    Some(UaiWarning::CptNotNormalized { line, factor, child, rows, bad_rows: bad.len(), first_row, sum })
}

/// `map[k]` = configuration index in region `r` of the configuration with table
/// index `k` under the variable order `scope` (a permutation of the region's variables).
///
/// Variables of cardinality 1 are always at label 0 and move no index, so only
/// the others (at most 28 of them: a table has at most 2^28 entries) take
/// part in the mixed-radix count; a scope of k variables costs O(k + entries),
/// not O(k²).
fn table_to_region_map(graph: &RegionGraph, r: usize, scope: &[usize]) -> Vec<usize> {
    let region_vars = graph.region_variables(r);
    let region_strides = strides(region_vars, graph.cardinalities());
    // (cardinality, stride in the region) of the scope's variables with more than one label.
    let digits: Vec<(usize, usize)> = scope
        .iter()
        .filter(|&&v| graph.cardinality(v) > 1)
        .map(|&v| (graph.cardinality(v), region_strides[region_vars.iter().position(|&w| w == v).unwrap_or(0)]))
        .collect();
    let total: usize = digits.iter().map(|&(c, _)| c).product();
    let mut map = Vec::with_capacity(total);
    let mut count = vec![0usize; digits.len()];
    let mut idx = 0usize;
    for _ in 0..total {
        map.push(idx);
        for (i, &(card, contrib)) in digits.iter().enumerate().rev() {
            count[i] += 1;
            idx += contrib;
            if count[i] < card {
                break;
            }
            idx -= contrib * card;
            count[i] = 0;
        }
    }
    map
}
