//! # linkshare-sim
//!
//! A deterministic discrete-event simulator that drives linkshare's schedulers under virtual time.

pub mod model;
