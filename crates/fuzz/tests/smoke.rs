//! A short deterministic fuzz run of every loader (the 1,000,000-input runs
//! are `cargo xtask fuzz --iterations 1000000`; docs/ROBUSTNESS.md).

use structlearn_fuzz::{LimitAlloc, run_range, targets};

#[global_allocator]
static ALLOC: LimitAlloc = LimitAlloc;

#[test]
fn every_loader_survives_a_short_deterministic_fuzz_run() {
    let iterations: u64 = std::env::var("STRUCTLEARN_FUZZ_SMOKE").ok().and_then(|v| v.parse().ok()).unwrap_or(8000);
    let out = tempfile::tempdir().unwrap();
    let mut failed = Vec::new();
    for target in targets() {
        let stats = run_range(&target, 2026, 0..iterations, 256 << 20, Some(out.path()), None);
        eprintln!("{stats:?}");
        assert_eq!(stats.executions, iterations);
        // The mutations reach both outcomes: some inputs load, most are refused.
        assert!(stats.accepted > 0 && stats.rejected > 0, "{stats:?}");
        if stats.failures() > 0 {
            failed.push(stats);
        }
    }
    let crashes: Vec<String> = std::fs::read_dir(out.path().join("crashes"))
        .map(|d| {
            d.filter_map(Result::ok)
                .filter(|e| e.path().extension().is_some_and(|x| x == "txt"))
                .map(|e| {
                    format!(
                        "{}: {}",
                        e.file_name().to_string_lossy(),
                        std::fs::read_to_string(e.path()).unwrap_or_default()
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    assert!(failed.is_empty(), "{failed:?}\n{}", crashes.join(""));
}
