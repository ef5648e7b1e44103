//! CBQ (being written).
