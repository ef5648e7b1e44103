//! The real shaper (being written).
