//! The namespace testbed shared by `linkshare lab` and `linkshare lab bench` (being written).
