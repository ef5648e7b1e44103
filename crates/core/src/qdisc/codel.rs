//! `codel` (being written).
