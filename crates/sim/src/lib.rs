//! The simulator. (Being written.)
