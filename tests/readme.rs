//! The README shows what the code does: its library snippet is
//! `examples/quickstart.rs` verbatim, and the guide's oracle table names
//! every hyper-parameter the library has.

#[test]
fn readme_library_snippet_is_the_quickstart_example() {
    let readme = include_str!("../README.md");
    let example = include_str!("../examples/quickstart.rs");
    assert!(
        readme.contains(&format!("```rust\n{example}```")),
        "README.md's library snippet differs from examples/quickstart.rs"
    );
}

#[test]
fn guide_lists_every_oracle_hyper_parameter() {
    let readme = include_str!("../docs/guide/oracles.md");
    for kind in structlearn::oracle_config::BUILTIN_KINDS {
        for h in structlearn::oracle_config::hyper_parameters(kind).unwrap() {
            // Nested L-BFGS options are listed once per block (`lbfgs.*` / `leaf_lbfgs.*`).
            let block = h.name.split('.').next().unwrap();
            assert!(
                readme.contains(&format!("`{}`", h.name)) || readme.contains(&format!("`{block}.*`")),
                "docs/guide/oracles.md does not list {kind}'s `{}`",
                h.name
            );
        }
    }
}
