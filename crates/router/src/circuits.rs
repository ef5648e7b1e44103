//! Circuit ids: the subscriber table's `id` column (LibreQoS's Circuit ID), the label by which
//! operators find a subscriber in `stat` and in `/metrics`.
//!
//! Principles: the ids belong to the policy, not to the scheduler, so the datapath never sees
//! them. Whoever puts a policy into service records its ids here for its direction — the loop
//! when it installs a build (reload.rs), the control thread of `--workers` when it cuts one —
//! and whoever finishes a snapshot labels its rows from here (the stats plane, the control
//! thread), one hash look-up per row, off the datapath. The ids are keyed by class name, so a
//! snapshot copied just before an install is labelled right for every class the two policies
//! share; a policy without ids costs nothing per row.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use linkshare_config::Policy;

use crate::control::snapshot::Snapshot;

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
    /// Direction `dir` now runs a policy with these ids.
    pub fn set(&self, dir: usize, ids: Arc<Ids>) {
        let mut g = match self.0.write() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        if let Some(slot) = g.get_mut(dir) {
            *slot = ids;
        }
    }

    /// Give every row of `snap` that is a subscriber with an id its `circuit_id`.
    pub fn label(&self, snap: &mut Snapshot) {
        let maps = match self.0.read() {
            Ok(g) => g.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        };
        for (d, dir) in snap.directions.iter_mut().enumerate() {
            let Some(m) = maps.get(d).filter(|m| !m.is_empty()) else {
                continue;
            };
            for c in &mut dir.classes {
                c.circuit_id = m.get(c.name.as_str()).map(|s| s.to_string());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::snapshot::{ClassSnapshot, DirectionSnapshot};

    #[test]
    fn rows_are_labelled_by_name_per_direction() {
        let c = Circuits::default();
        let ids: Ids = [("alice".into(), "C-1".into())].into_iter().collect();
        c.set(0, Arc::new(ids));
        let row = |n: &str| ClassSnapshot {
            name: n.into(),
            ..ClassSnapshot::default()
        };
        let dir = DirectionSnapshot {
            classes: vec![row("root"), row("alice")],
            ..DirectionSnapshot::default()
        };
        let mut s = Snapshot {
            directions: vec![dir.clone(), dir],
            ..Snapshot::default()
        };
        c.label(&mut s);
        let got: Vec<Vec<Option<String>>> = s
            .directions
            .iter()
            .map(|d| d.classes.iter().map(|r| r.circuit_id.clone()).collect())
            .collect();
        // Direction 1 has no ids recorded: unlabelled.
        assert_eq!(got, [vec![None, Some("C-1".to_string())], vec![None, None]]);
    }
}
