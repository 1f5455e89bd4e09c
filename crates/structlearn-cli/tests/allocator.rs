//! `return_large_blocks_when_freed`: blocks of a few MB freed between live
//! small allocations leave the resident set (glibc only; its own process, so
//! no other test allocates meanwhile).

#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[test]
fn freed_blocks_of_a_few_mb_leave_the_resident_set() {
    /// The resident set in KiB (`VmRSS` of `/proc/self/status`).
    fn resident_kib() -> usize {
        let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
        let line = status.lines().find(|l| l.starts_with("VmRSS:")).expect("a VmRSS line");
        line.split_whitespace().nth(1).and_then(|v| v.parse().ok()).expect("VmRSS in kB")
    }

    structlearn_cli::return_large_blocks_when_freed();
    // A large block freed first: glibc would now raise its threshold to
    // 16 MiB and serve the 1 MiB blocks below from its heap.
    drop(std::hint::black_box(vec![1u8; 16 << 20]));
    const BLOCKS: usize = 256;
    let mut blocks = Vec::with_capacity(BLOCKS);
    let mut small = Vec::with_capacity(BLOCKS);
    for i in 0..BLOCKS {
        blocks.push(vec![i as u8 | 1; 1 << 20]);
        // Live between the blocks: a heap could not give them back from its top.
        small.push(Box::new([i as u64; 8]));
    }
    let full = resident_kib();
    drop(std::hint::black_box(blocks));
    let after = resident_kib();
    assert!(
        full - after >= 200 * 1024,
        "freeing 256 MiB of 1 MiB blocks returned only {} KiB ({full} → {after} KiB resident)",
        full.saturating_sub(after)
    );
    assert_eq!(small.iter().map(|b| b[0]).sum::<u64>(), (0..BLOCKS as u64).sum::<u64>());
}
