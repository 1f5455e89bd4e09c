//! Running inputs: one in-process loop per target (panics caught, memory
//! counted by [`crate::LimitAlloc`]), and a supervisor that runs that loop in
//! a child process, so that an abort (a refused allocation) or a hang costs
//! one input, not the run.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::alloc::{arm, armed, disarm};
use crate::targets::{Outcome, Target};

/// How one input ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// A typed result: loaded, or refused with an error.
    Clean(Outcome),
    /// The loader panicked (the message).
    Panic(String),
    /// The loader stayed within the limit per allocation but its peak live
    /// memory passed the limit (can only happen without a limiting allocator).
    Memory(usize),
}

/// Counts of one target's run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    /// Target name.
    pub target: String,
    /// Inputs run.
    pub executions: u64,
    /// Inputs loaded.
    pub accepted: u64,
    /// Inputs refused with a typed error.
    pub rejected: u64,
    /// Panics.
    pub panics: u64,
    /// Failed checks on loaded values (round trips, first score).
    pub invariants: u64,
    /// Aborts: an allocation refused by the limit, or another abort.
    pub aborts: u64,
    /// Inputs killed after the time limit.
    pub timeouts: u64,
    /// Largest peak of live bytes of one input.
    pub max_peak_bytes: usize,
    /// Slowest input, seconds.
    pub max_seconds: f64,
    /// Index of the slowest input.
    pub slowest_index: u64,
    /// Wall-clock seconds.
    pub seconds: f64,
    /// Memory limit, bytes.
    pub limit_bytes: usize,
}

impl Stats {
    /// Failures of any kind.
    pub fn failures(&self) -> u64 {
        self.panics + self.invariants + self.aborts + self.timeouts
    }

    fn absorb(&mut self, other: &Stats) {
        self.executions += other.executions;
        self.accepted += other.accepted;
        self.rejected += other.rejected;
        self.panics += other.panics;
        self.invariants += other.invariants;
        self.aborts += other.aborts;
        self.timeouts += other.timeouts;
        self.max_peak_bytes = self.max_peak_bytes.max(other.max_peak_bytes);
        if other.max_seconds > self.max_seconds {
            self.max_seconds = other.max_seconds;
            self.slowest_index = other.slowest_index;
        }
    }
}

static PANIC_MESSAGE: Mutex<String> = Mutex::new(String::new());

/// Replaces the panic hook by one that only records the message (with its
/// location) for [`execute`], instead of printing it.
pub fn quiet_panics() {
    std::panic::set_hook(Box::new(|info| {
        let was_armed = armed();
        let _ = disarm();
        let message = info.payload().downcast_ref::<&str>().map(|s| s.to_string()).unwrap_or_else(|| {
            info.payload().downcast_ref::<String>().cloned().unwrap_or_else(|| "(no message)".into())
        });
        let at = info.location().map_or_else(String::new, |l| format!(" at {}:{}", l.file(), l.line()));
        if let Ok(mut m) = PANIC_MESSAGE.lock() {
            *m = format!("{message}{at}");
        }
        if was_armed {
            arm(usize::MAX);
        }
    }));
}

/// Runs one input under the memory limit, catching panics.
pub fn execute(target: &Target, bytes: &[u8], limit: usize) -> (Verdict, usize) {
    arm(limit);
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| target.run(bytes)));
    let usage = disarm();
    let verdict = match result {
        Ok(_) if usage.peak > limit => Verdict::Memory(usage.peak),
        Ok(outcome) => Verdict::Clean(outcome),
        Err(_) => Verdict::Panic(PANIC_MESSAGE.lock().map(|m| m.clone()).unwrap_or_default()),
    };
    (verdict, usage.peak)
}

/// Saves a failing input and why it failed under `dir/crashes/`.
pub fn save_crash(dir: &Path, target: &str, index: u64, bytes: &[u8], why: &str) {
    let crashes = dir.join("crashes");
    let _ = std::fs::create_dir_all(&crashes);
    let _ = std::fs::write(crashes.join(format!("{target}-{index}.bin")), bytes);
    let _ = std::fs::write(crashes.join(format!("{target}-{index}.txt")), format!("{why}\n"));
}

/// Runs inputs `start..end` of `target` in this process, saving failures under
/// `out` (if given) and writing the index of the input about to run to
/// `progress` (if given) so a supervisor can tell which input aborted.
pub fn run_range(
    target: &Target,
    seed: u64,
    range: std::ops::Range<u64>,
    limit: usize,
    out: Option<&Path>,
    progress: Option<&std::fs::File>,
) -> Stats {
    quiet_panics();
    // Build the targets' shared state outside the counted stretch.
    let _ = target.run(&target.seeds[0]);
    let started = Instant::now();
    let mut stats = Stats { target: target.name.to_string(), limit_bytes: limit, ..Stats::default() };
    for index in range {
        let bytes = target.input(seed, index);
        if let Some(p) = progress {
            write_progress(p, index);
        }
        let t0 = Instant::now();
        let (verdict, peak) = execute(target, &bytes, limit);
        let seconds = t0.elapsed().as_secs_f64();
        stats.executions += 1;
        stats.max_peak_bytes = stats.max_peak_bytes.max(peak);
        if seconds > stats.max_seconds {
            stats.max_seconds = seconds;
            stats.slowest_index = index;
        }
        let failure = match verdict {
            Verdict::Clean(Outcome::Accepted) => {
                stats.accepted += 1;
                None
            }
            Verdict::Clean(Outcome::Rejected(_)) => {
                stats.rejected += 1;
                None
            }
            Verdict::Clean(Outcome::Invariant(why)) => {
                stats.invariants += 1;
                Some(format!("invariant: {why}"))
            }
            Verdict::Panic(why) => {
                stats.panics += 1;
                Some(format!("panic: {why}"))
            }
            Verdict::Memory(peak) => {
                stats.aborts += 1;
                Some(format!("memory: peak {peak} bytes > limit {limit}"))
            }
        };
        if let (Some(why), Some(dir)) = (failure, out) {
            save_crash(dir, target.name, index, &bytes, &why);
        }
    }
    stats.seconds = started.elapsed().as_secs_f64();
    stats
}

#[cfg(unix)]
fn write_progress(file: &std::fs::File, index: u64) {
    use std::os::unix::fs::FileExt;
    let _ = file.write_at(&index.to_le_bytes(), 0);
}

#[cfg(not(unix))]
fn write_progress(_: &std::fs::File, _: u64) {}

fn read_progress(path: &Path) -> Option<u64> {
    let bytes = std::fs::read(path).ok()?;
    Some(u64::from_le_bytes(bytes.get(..8)?.try_into().ok()?))
}

/// Options of a supervised run.
#[derive(Debug, Clone)]
pub struct Options {
    /// The program to run as a worker (the caller's own executable).
    pub exe: PathBuf,
    /// Arguments that make `exe` run [`worker`]: the supervisor
    /// appends `--target T --seed S --start I --end N --limit L --out DIR`.
    pub worker_args: Vec<String>,
    /// First seed of the mutations.
    pub seed: u64,
    /// Inputs per target.
    pub iterations: u64,
    /// Memory limit per input, bytes.
    pub limit: usize,
    /// Output folder: crashes/, summary.json.
    pub out: PathBuf,
    /// An input running longer than this is a timeout.
    pub timeout: Duration,
}

/// Runs `target` in worker processes from input 0 to `iterations`, restarting
/// after each abort or timeout (saving that input), and returns the counts.
pub fn supervise(target: &Target, opts: &Options) -> std::io::Result<Stats> {
    std::fs::create_dir_all(&opts.out)?;
    let progress = opts.out.join(format!("{}.progress", target.name));
    let stats_path = opts.out.join(format!("{}.stats.json", target.name));
    let mut total = Stats { target: target.name.to_string(), limit_bytes: opts.limit, ..Stats::default() };
    let started = Instant::now();
    let mut start = 0;
    while start < opts.iterations {
        let _ = std::fs::remove_file(&stats_path);
        std::fs::write(&progress, start.to_le_bytes())?;
        let mut child = Command::new(&opts.exe)
            .args(&opts.worker_args)
            .args(["--target", target.name])
            .args(["--seed", &opts.seed.to_string()])
            .args(["--start", &start.to_string()])
            .args(["--end", &opts.iterations.to_string()])
            .args(["--limit", &opts.limit.to_string()])
            .arg("--out")
            .arg(&opts.out)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()?;
        let stderr = child.stderr.take();
        let reader = std::thread::spawn(move || {
            let mut text = String::new();
            if let Some(mut s) = stderr {
                let _ = std::io::Read::read_to_string(&mut s, &mut text);
            }
            text
        });
        let (mut last, mut since) = (read_progress(&progress), Instant::now());
        let status = loop {
            if let Some(status) = child.try_wait()? {
                break Some(status);
            }
            std::thread::sleep(Duration::from_millis(100));
            let now = read_progress(&progress);
            if now != last {
                (last, since) = (now, Instant::now());
            } else if since.elapsed() > opts.timeout {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
        };
        let stderr = reader.join().unwrap_or_default();
        if let Ok(text) = std::fs::read_to_string(&stats_path)
            && let Ok(s) = serde_json::from_str::<Stats>(&text)
        {
            total.absorb(&s);
        }
        match status {
            Some(s) if s.success() => break,
            _ => {
                let index = read_progress(&progress).unwrap_or(start);
                let bytes = target.input(opts.seed, index);
                let tail: String =
                    stderr.lines().rev().take(5).collect::<Vec<_>>().into_iter().rev().collect::<Vec<_>>().join("\n");
                let why = match status {
                    None => {
                        total.timeouts += 1;
                        format!("timeout: still running after {:?}", opts.timeout)
                    }
                    Some(s) => {
                        total.aborts += 1;
                        format!("abort ({s}): {tail}")
                    }
                };
                total.executions += 1;
                save_crash(&opts.out, target.name, index, &bytes, &why);
                start = index + 1;
            }
        }
    }
    total.seconds = started.elapsed().as_secs_f64();
    let _ = std::fs::remove_file(&progress);
    let _ = std::fs::remove_file(&stats_path);
    Ok(total)
}

/// The worker side of [`supervise`]: runs `start..end` of the target named
/// `name`, writing progress and, every 10,000 inputs and at the end, its counts.
pub fn worker(name: &str, seed: u64, start: u64, end: u64, limit: usize, out: &Path) -> std::io::Result<()> {
    let targets = crate::targets::targets();
    let target = targets
        .iter()
        .find(|t| t.name == name)
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("unknown target `{name}`")))?;
    let progress = std::fs::OpenOptions::new().write(true).open(out.join(format!("{name}.progress")))?;
    let stats_path = out.join(format!("{name}.stats.json"));
    let mut total = Stats { target: name.to_string(), limit_bytes: limit, ..Stats::default() };
    let mut at = start;
    while at < end {
        let next = (at + 10_000).min(end);
        let s = run_range(target, seed, at..next, limit, Some(out), Some(&progress));
        total.absorb(&s);
        total.seconds += s.seconds;
        let text = serde_json::to_string(&total).map_err(std::io::Error::other)?;
        structlearn::files::write_atomic_io(&stats_path, text.as_bytes())?;
        at = next;
    }
    Ok(())
}

/// Writes `summary.json` and prints one line per target.
pub fn report(out: &Path, all: &[Stats], seed: u64) -> std::io::Result<()> {
    let summary = serde_json::json!({ "seed": seed, "targets": all });
    structlearn::files::write_atomic_io(
        &out.join("summary.json"),
        serde_json::to_string_pretty(&summary).map_err(std::io::Error::other)?.as_bytes(),
    )?;
    let mut stdout = std::io::stdout().lock();
    writeln!(
        stdout,
        "{:<16} {:>10} {:>9} {:>9} {:>6} {:>6} {:>6} {:>6} {:>10} {:>9} {:>8}",
        "target", "execs", "accepted", "rejected", "panic", "invar", "abort", "hang", "peak MiB", "max ms", "exec/s"
    )?;
    for s in all {
        writeln!(
            stdout,
            "{:<16} {:>10} {:>9} {:>9} {:>6} {:>6} {:>6} {:>6} {:>10.2} {:>9.2} {:>8.0}",
            s.target,
            s.executions,
            s.accepted,
            s.rejected,
            s.panics,
            s.invariants,
            s.aborts,
            s.timeouts,
            s.max_peak_bytes as f64 / f64::from(1 << 20),
            s.max_seconds * 1e3,
            s.executions as f64 / s.seconds.max(1e-9)
        )?;
    }
    Ok(())
}
