//! `red` (being written).
