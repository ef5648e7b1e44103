//! Circuit ids: the subscriber table's `id` column (LibreQoS's Circuit ID), the label by which
//! operators find a subscriber in `stat` and in `/metrics`.
//!
//! Principles: the ids belong to the policy, not to the scheduler, so the datapath never sees
//! them. Whoever puts a policy into service records its ids here for its direction — the loop
//! when it installs a build (reload.rs), the control thread of `--workers` when it cuts one —
//! and whoever finishes a snapshot labels its rows from here (`Snapshot::label_circuits`: the
//! stats plane, the control thread), one hash look-up per row, off the datapath. The ids are keyed by class name, so a
//! snapshot copied just before an install is labelled right for every class the two policies
//! share; a policy without ids costs nothing per row.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use linkshare_config::Policy;

/// One policy's circuit ids: class name → id.
pub(crate) type Ids = HashMap<Box<str>, Box<str>>;

/// The ids of what each direction runs, shared between the threads that install policies and
/// those that finish snapshots.
#[derive(Clone, Debug, Default)]
pub(crate) struct Circuits(Arc<RwLock<[Arc<Ids>; 2]>>);

/// The ids of a policy.
pub(crate) fn ids_of(p: &Policy) -> Arc<Ids> {
    Arc::new(
        p.circuit_ids()
            .map(|(name, id)| (name.into(), id.into()))
            .collect(),
    )
}

impl Circuits {
    /// Direction `dir` now runs a policy with these ids. The ids replaced are handed back, for
    /// the caller to free where freeing costs nothing (the loop sends them to its builder
    /// thread: 100,000 ids are 200,000 allocations).
    pub fn set(&self, dir: usize, ids: Arc<Ids>) -> Option<Arc<Ids>> {
        let mut g = match self.0.write() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        g.get_mut(dir).map(|slot| std::mem::replace(slot, ids))
    }

    /// The ids each direction runs now (`Snapshot::label_circuits` labels rows with them).
    pub fn current(&self) -> [Arc<Ids>; 2] {
        match self.0.read() {
            Ok(g) => g.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_kept_per_direction() {
        let c = Circuits::default();
        let ids: Ids = [("alice".into(), "C-1".into())].into_iter().collect();
        c.set(0, Arc::new(ids));
        c.set(7, Arc::new(Ids::new())); // no such direction: ignored
        let [down, up] = c.current();
        assert_eq!(down.get("alice").map(|s| &**s), Some("C-1"));
        assert!(up.is_empty());
    }
}
