//! `drr` (being written).
