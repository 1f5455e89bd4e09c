//! The papers' experiments as a library, run by `cargo xtask reproduce …`
//! (which only parses the command line): the 5 × 5 function-class tables
//! share one runner ([`runner`]: cells, presets, `--resume`, `--merge`,
//! Ctrl-C, tables, curves, per-class scores, `run.json`) behind the
//! [`runner::Experiment`] trait, implemented by [`denoising`] (NIPS 2013
//! Table 1 left) and [`images`] (Weizmann horses, Stanford Background);
//! [`hazan_urtasun`] and [`punyakanok`] have tables of their own.

pub mod denoising;
pub mod hazan_urtasun;
pub mod hu_unary;
pub mod images;
pub mod punyakanok;
pub mod runner;
