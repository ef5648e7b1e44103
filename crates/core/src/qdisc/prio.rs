//! `prio` (being written).
