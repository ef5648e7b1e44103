//! Sender behaviour on hand-built ACK sequences.
