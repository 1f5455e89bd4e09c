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

/// The guide's table of oracle settings is generated from the registry (kind,
/// setting, default, meaning), so it cannot drift from the code. After
/// changing an oracle's settings, regenerate it with
/// `STRUCTLEARN_BLESS=1 cargo test --test readme`.
#[test]
fn guide_oracle_table_is_generated_from_the_registry() {
    const START: &str = "<!-- oracle-table:start -->\n";
    const END: &str = "<!-- oracle-table:end -->";
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/guide/oracles.md");
    let text = std::fs::read_to_string(&path).unwrap();
    let a = text.find(START).expect("docs/guide/oracles.md has no table start marker") + START.len();
    let b = a + text[a..].find(END).expect("docs/guide/oracles.md has no table end marker");
    let table = structlearn::OracleRegistry::builtin().markdown_table();
    if std::env::var_os("STRUCTLEARN_BLESS").is_some() {
        std::fs::write(&path, format!("{}{table}{}", &text[..a], &text[b..])).unwrap();
        return;
    }
    assert!(
        text[a..b] == table,
        "docs/guide/oracles.md's settings table differs from the registry; regenerate it with \
         `STRUCTLEARN_BLESS=1 cargo test --test readme`:\n{table}"
    );
    // Every setting has a meaning (a registration without one would leave a blank cell).
    let registry = structlearn::OracleRegistry::builtin();
    for kind in registry.kinds() {
        for h in registry.hyper_parameters(kind).unwrap() {
            assert!(!h.meaning.is_empty(), "{kind}'s `{}` has no meaning in its registration", h.name);
        }
    }
}
