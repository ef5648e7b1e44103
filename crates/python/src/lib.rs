//! # linkshare-python
//!
//! The `linkshare` Python package's native part: thin over `linkshare-sim` and
//! `linkshare-config`, in the layout of the Rust-core-plus-bindings projects (tokenizers,
//! polars): what can be plain Rust is plain Rust, tested by `cargo test`; the pyo3 glue
//! (feature `python`, turned on by maturin) only converts values at the boundary and releases the
//! GIL while the simulator runs.
//!
//! * [`point`]: one run from a scenario's text with keys set and a seed (what `simulate` and each
//!   point of a `sweep` do), and a scenario's own `[sweep]` as a list of points;
//! * [`columns`]: a run's results as column arrays (time series, RTT probes, per-class and
//!   per-flow figures), which the Python side turns into DataFrames without a loop per row;
//! * `bindings` (feature `python`): the `linkshare._native` module.
//!
//! The Python API (`python/linkshare`) and its guide: `docs/python.md`.

pub mod columns;
pub mod point;

#[cfg(feature = "python")]
mod bindings;
