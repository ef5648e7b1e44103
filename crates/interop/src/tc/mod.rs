//! tc(8): export a policy as a `tc -batch` script, import scripts and live configurations.

pub mod export;
pub mod filter;
pub mod import;
pub mod leaf;
pub mod lex;
pub mod live;
mod merge;
pub mod stab;
