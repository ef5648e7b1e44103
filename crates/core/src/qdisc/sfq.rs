//! `sfq` (being written).
