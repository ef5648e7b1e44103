//! tc(8): export a policy as a `tc -batch` script, import scripts and live configurations.

mod cake;
pub mod export;
pub mod filter;
pub mod hashed_in;
pub mod hfsc_in;
pub mod hfsc_out;
pub mod import;
pub mod leaf;
pub mod lex;
pub mod live;
mod merge;
mod mq;
pub mod stab;
pub mod u32_hash;
mod u32_out;
