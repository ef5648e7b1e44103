//! pf.conf queues (in progress).
use crate::diag::{Diag, ImportError};
use crate::Imported;

pub fn import(_text: &str, file: &str, _iface: Option<&str>) -> Result<Imported, ImportError> {
    Err(Diag::new(file, 0, "not yet").into())
}
