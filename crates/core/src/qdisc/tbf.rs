//! `tbf` (being written).
