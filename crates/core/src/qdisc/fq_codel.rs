//! `fq_codel` (being written).
