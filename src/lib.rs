//! Thin root package: owns end-to-end tests and benchmarks.
