//! The control thread's reloads: a built policy is cut into one shard per worker, each worker
//! is sent its shard, and who asked hears one report once every worker has installed its part
//! (`combine`). SIGHUP reloads the files given at start the same way.

use super::*;

/// A policy cut into one shard per worker.
pub(super) struct Cut {
    pub(super) policy: Policy,
    pub(super) shards: Vec<Shard<Frame>>,
    pub(super) steer: Arc<Steer>,
}

/// How a coordinator cuts policies: `n` shards, placed as `placement` says or, with
/// `by_address`, by each top-level class's first address (workers/address.rs).
#[derive(Clone)]
pub(super) struct Place {
    pub(super) n: usize,
    pub(super) placement: Placement,
    pub(super) by_address: bool,
}

impl Place {
    pub(super) fn of(opts: &Options) -> Place {
        Place {
            n: opts.workers,
            placement: opts.placement.clone(),
            by_address: opts.by_address,
        }
    }
}

/// Parse `text` and cut its HTB for direction `dir` (the download side of a policy that has
/// both); `Err` is `check`'s diagnostics or why it cannot be cut.
pub(super) fn cut(
    text: &str,
    origin: &str,
    place: &Place,
    dir: usize,
    gen: u64,
) -> Result<Cut, String> {
    let mut policy = Policy::parse(text, origin).map_err(|e| render_config_error(text, &e))?;
    let _ = policy.take_upload();
    cut_policy(policy, text, place, dir, gen)
}

/// [`cut`] of the first interface's policy at start: its download side for direction 0 and,
/// when `with_upload` and the policy has one, its upload side for direction 1.
pub(super) fn cut_both(
    text: &str,
    origin: &str,
    place: &Place,
    with_upload: bool,
) -> Result<(Cut, Option<Cut>), String> {
    let mut policy = Policy::parse(text, origin).map_err(|e| render_config_error(text, &e))?;
    let up = policy.take_upload().filter(|_| with_upload);
    let down = cut_policy(policy, text, place, 0, 1)?;
    let up = match up {
        Some(u) => Some(cut_policy(u, text, place, 1, 1)?),
        None => None,
    };
    Ok((down, up))
}

/// Cut a checked policy's HTB into `place.n` shards for direction `dir`.
fn cut_policy(
    policy: Policy,
    text: &str,
    place: &Place,
    dir: usize,
    gen: u64,
) -> Result<Cut, String> {
    let placement = if place.by_address {
        super::super::address::placement(&policy, super::super::address::Side::of_dir(dir), place.n)
    } else {
        place.placement.clone()
    };
    let cfg = ShardConfig {
        placement,
        ..ShardConfig::new(place.n)
    };
    let sharded = policy
        .build_sharded::<Frame>(&cfg)
        .map_err(|e| render_config_error(text, &e))?;
    let (shards, map, classifier) = sharded.into_parts();
    Ok(Cut {
        policy,
        shards,
        steer: Arc::new(Steer {
            gen,
            classifier,
            map,
        }),
    })
}

/// A reload being installed by the workers.
pub(super) struct Pending {
    asker: Asker,
    dir: usize,
    left: usize,
    reports: Vec<ReloadReport>,
    text: (String, String),
    path: Option<PathBuf>,
}

impl Coord {
    pub(super) fn start_reload(&mut self, dir: usize, asker: Asker, source: Source) {
        let job = Job { dir, asker, source };
        if let Err(job) = self.builder.submit(job) {
            let b = crate::builder::build(job);
            self.on_built(b);
        }
    }

    /// A policy was built (parsed and checked): cut it and send each worker its shard.
    pub(super) fn on_built(&mut self, b: Built) {
        let ready = match b.result {
            Ok(r) => r,
            Err(f) => {
                self.finish(b.asker, b.dir, Err(f.reply()));
                return;
            }
        };
        // The coordinator's builder holds no running policy, so every build is whole text.
        let Text::Whole(text, origin) = ready.text else {
            let e = ErrorReply::new(ErrorKind::Unsupported, "send the edited policy text");
            self.finish(b.asker, b.dir, Err(e));
            return;
        };
        let gen = self.gen + 1;
        let mut c = match cut(&text, &origin, &Place::of(&self.opts), b.dir, gen) {
            Ok(c) => c,
            Err(diag) => {
                self.finish(b.asker, b.dir, Err(rejected(diag)));
                return;
            }
        };
        self.gen = gen;
        self.seq += 1;
        let seq = self.seq;
        let link = crate::builder::LinkRules::of(&c.policy);
        // Labels follow the policy from now (a class the old and new share keeps its row's).
        self.circuits.set(b.dir, ids_of(&c.policy));
        for (w, shard) in self.workers.iter().zip(std::mem::take(&mut c.shards)) {
            w.send(Cmd::Install(Box::new(Install {
                seq,
                dir: b.dir,
                shard,
                steer: c.steer.clone(),
                link,
                text: text.clone(),
                origin: origin.clone(),
                path: ready.path.clone(),
            })));
        }
        self.pending.push((
            seq,
            Pending {
                asker: b.asker,
                dir: b.dir,
                left: self.n,
                reports: Vec::new(),
                text: (text, origin),
                path: ready.path,
            },
        ));
    }

    /// Answer who asked for a reload.
    pub(super) fn finish(
        &mut self,
        asker: Asker,
        dir: usize,
        outcome: Result<ReloadReport, ErrorReply>,
    ) {
        match &outcome {
            Ok(_) => self.reloads.ok += 1,
            Err(_) => self.reloads.failed += 1,
        }
        match asker {
            Asker::Client(id) => {
                let resp = match outcome {
                    Ok(r) => Response::Reloaded(r),
                    Err(e) => Response::Error(e),
                };
                if let Some(srv) = self.control.as_mut() {
                    srv.reply(id, &resp.to_line(), sys::monotonic_ns());
                }
            }
            Asker::Hangup => {
                crate::reload::report_hangup(&outcome, self.paths[dir].as_deref());
                self.hangups_pending = self.hangups_pending.saturating_sub(1);
                if self.hangups_pending == 0 {
                    notify::tell(&self.ready_message());
                }
            }
        }
    }

    pub(super) fn on_sighup(&mut self) {
        notify::tell(&notify::reloading_message(sys::monotonic_ns()));
        let paths: Vec<(usize, PathBuf)> = (0..2)
            .filter_map(|d| self.paths[d].clone().map(|p| (d, p)))
            .collect();
        self.hangups_pending += paths.len();
        for (d, p) in paths {
            self.start_reload(d, Asker::Hangup, Source::File(p));
        }
    }

    pub(super) fn on_installed(&mut self, seq: u64, report: ReloadReport) {
        let Some(i) = self.pending.iter().position(|(s, _)| *s == seq) else {
            return;
        };
        let p = &mut self.pending[i].1;
        p.reports.push(report);
        p.left -= 1;
        if p.left > 0 {
            return;
        }
        let (_, p) = self.pending.remove(i);
        self.texts[p.dir] = Some(p.text);
        if let Some(path) = p.path {
            self.paths[p.dir] = Some(path);
        }
        let r = combine(p.reports);
        self.finish(p.asker, p.dir, Ok(r));
    }
}

/// One report from the workers' reports of a reload: numbers add; a class kept anywhere, or
/// removed from one shard and added to another (it moved), is kept; the root, in every shard,
/// is listed once.
fn combine(reports: Vec<ReloadReport>) -> ReloadReport {
    let mut kept = BTreeSet::new();
    let mut added = BTreeSet::new();
    let mut removed = BTreeSet::new();
    let mut changed = BTreeSet::new();
    let mut out = ReloadReport::default();
    for r in reports {
        kept.extend(r.kept_names);
        changed.extend(r.changed);
        added.extend(r.added);
        removed.extend(r.removed);
        out.moved_packets += r.moved_packets;
        out.reclassified += r.reclassified;
        out.dropped_packets += r.dropped_packets;
    }
    let moved: BTreeSet<String> = added.intersection(&removed).cloned().collect();
    kept.extend(moved.iter().cloned());
    out.added = added.difference(&kept).cloned().collect();
    out.removed = removed.difference(&kept).cloned().collect();
    out.changed = changed.into_iter().collect();
    out.kept = kept.len() as u64;
    out.kept_names = kept.into_iter().collect();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use linkshare_core::Qdisc;

    fn policy(extra: &[&str]) -> String {
        let mut s = String::from(
            "qdisc = \"htb\"\ndefault = \"k0\"\n[[class]]\nname = \"root\"\nrate = \"100mbit\"\n",
        );
        for name in ["k0", "k1", "k2", "k3", "k4", "k5"].iter().chain(extra) {
            s.push_str(&format!(
                "[[class]]\nname = \"{name}\"\nparent = \"root\"\nrate = \"1mbit\"\nceil = \"100mbit\"\n"
            ));
        }
        s
    }

    /// Where each class of a cut lives, by name.
    fn places(c: &Cut) -> Vec<(String, usize)> {
        let mut v = Vec::new();
        for (s, shard) in c.shards.iter().enumerate() {
            shard.htb().visit_classes(&mut |v2| {
                if v2.name != "root" {
                    v.push((v2.name.to_string(), s));
                }
            });
        }
        v.sort();
        v
    }

    /// `--placement hash`: a reload that adds a top-level class in front of the others leaves
    /// every other class on its worker; round robin moves some.
    #[test]
    fn hash_placement_keeps_classes_on_their_worker_across_a_reload() {
        let before = policy(&[]);
        // "new" declared first among the children.
        let after = policy(&[]).replacen(
            "[[class]]\nname = \"k0\"",
            "[[class]]\nname = \"new\"\nparent = \"root\"\nrate = \"1mbit\"\nceil = \"100mbit\"\n[[class]]\nname = \"k0\"",
            1,
        );
        let kept = |p: &Placement| -> usize {
            let place = Place {
                n: 2,
                placement: p.clone(),
                by_address: false,
            };
            let (Ok(a), Ok(b)) = (
                cut(&before, "a", &place, 0, 1),
                cut(&after, "b", &place, 0, 2),
            ) else {
                panic!("cut failed")
            };
            let pb = places(&b);
            places(&a)
                .iter()
                .filter(|(n, s)| pb.iter().any(|(m, t)| m == n && t == s))
                .count()
        };
        assert_eq!(kept(&Placement::Hash), 6, "hash keeps all six");
        assert!(kept(&Placement::RoundRobin) < 6, "round robin moves some");
    }
}
