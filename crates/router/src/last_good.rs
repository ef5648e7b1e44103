//! The last policy the shaper accepted, kept on disk, so that an edit that a reload refused
//! ("kept the running policy") cannot take the link down at the next restart.
//!
//! Principles:
//! * **Saved whenever a policy is accepted**: at start and by every reload that validates
//!   (SIGHUP, `reload`, `class add|del`), on the builder thread or a thread of its own, never
//!   on the datapath thread. A `class change` by name has no text to save: the file it was
//!   `--write`n into is saved by the next reload. The policy's text is saved with the subscriber table it reads (a
//!   table named by a relative path is copied beside it under the same path; one named by an
//!   absolute path is read from there).
//! * **Atomic**: each save is a new generation directory, complete before the `current`
//!   symlink is renamed onto it (rename(2) replaces a symlink atomically); the older
//!   generation is removed after. A crash leaves the previous generation or the new one.
//! * **Used only when the file given is invalid at start**, with a loud warning naming both
//!   files and the diagnostics of the invalid one; a reload still reads the file given, so the
//!   fix takes effect with `systemctl reload`.
//! * Where: `--last-good DIR`, or `$STATE_DIRECTORY/<policy file's stem>.last-good` under
//!   systemd (`StateDirectory=linkshare`); without either, nothing is kept.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use anyhow::Context;
use linkshare_config::Policy;

/// The file name of the saved policy in a generation directory.
const POLICY_FILE: &str = "policy.toml";
/// The symlink to the newest complete generation.
const CURRENT: &str = "current";

/// Where the last good policy of one shaper is kept.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LastGood {
    dir: PathBuf,
}

/// The process's store, set once at start ([`configure`]) and read by the builder thread.
static STORE: OnceLock<LastGood> = OnceLock::new();

/// Keep accepted policies in `store` from now on (the first call wins).
pub fn configure(store: LastGood) {
    let _ = STORE.set(store);
}

/// Save an accepted policy in the configured store, if any; a failure is reported on stderr
/// (the shaper runs on; the previous generation stays).
pub fn remember(text: &str, origin: &str, policy: &Policy) {
    if let Some(s) = STORE.get() {
        if let Err(e) = s.save(text, origin, policy) {
            eprintln!(
                "linkshare: warning: cannot keep the accepted policy in {}: {e:#}",
                s.dir.display()
            );
        }
    }
}

impl LastGood {
    pub fn new(dir: PathBuf) -> LastGood {
        LastGood { dir }
    }

    /// The store systemd's `StateDirectory=` gives the shaper of policy file `policy`.
    pub fn from_state_directory(policy: &Path) -> Option<LastGood> {
        let state = std::env::var_os("STATE_DIRECTORY")?;
        // Several directories are separated by colons; the first is ours.
        let first = state.to_string_lossy().split(':').next()?.to_string();
        let stem = policy.file_stem()?.to_string_lossy().into_owned();
        Some(LastGood::new(
            PathBuf::from(first).join(format!("{stem}.last-good")),
        ))
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The saved policy file, if a generation is complete.
    pub fn saved(&self) -> Option<PathBuf> {
        let p = self.dir.join(CURRENT).join(POLICY_FILE);
        p.is_file().then_some(p)
    }

    /// Save `text` (read from `origin`, checked as `policy`) as the newest generation.
    pub fn save(&self, text: &str, origin: &str, policy: &Policy) -> anyhow::Result<PathBuf> {
        std::fs::create_dir_all(&self.dir)
            .with_context(|| format!("cannot create {}", self.dir.display()))?;
        let gen = format!("gen-{}-{}", std::process::id(), crate::sys::monotonic_ns());
        let tmp = self.dir.join(format!(".{gen}"));
        std::fs::create_dir_all(&tmp)?;
        if let Some(subs) = policy.subscribers() {
            let src = PathBuf::from(&subs.file);
            let base = Path::new(origin).parent().unwrap_or(Path::new(""));
            // A table named relative to the policy is copied under the same relative path.
            if let Ok(rel) = src.strip_prefix(base) {
                if rel.is_relative() && !rel.as_os_str().is_empty() {
                    let to = tmp.join(rel);
                    if let Some(parent) = to.parent() {
                        std::fs::create_dir_all(parent)?;
                    }
                    std::fs::copy(&src, &to)
                        .with_context(|| format!("cannot copy {}", src.display()))?;
                }
            }
        }
        std::fs::write(tmp.join(POLICY_FILE), text)?;
        std::fs::write(tmp.join("ORIGIN"), format!("{origin}\n"))?;
        let done = self.dir.join(&gen);
        std::fs::rename(&tmp, &done)?;
        let link_tmp = self.dir.join(format!(".{CURRENT}-{gen}"));
        let _ = std::fs::remove_file(&link_tmp);
        std::os::unix::fs::symlink(&gen, &link_tmp)?;
        std::fs::rename(&link_tmp, self.dir.join(CURRENT))?;
        // Older generations (and leftovers of an interrupted save) go.
        if let Ok(rd) = std::fs::read_dir(&self.dir) {
            for e in rd.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                let old_gen = name.starts_with("gen-") && name != gen;
                let leftover = name.starts_with(".gen-") || name.starts_with(".current-");
                if old_gen || leftover {
                    let _ = std::fs::remove_dir_all(e.path())
                        .or_else(|_| std::fs::remove_file(e.path()));
                }
            }
        }
        Ok(done.join(POLICY_FILE))
    }
}

/// What the shaper starts with: the policy file given, or, when that does not validate and a
/// last good policy is kept, that one (after a loud warning). `load` checks and builds a text
/// (its `Err` is the rendered diagnostics). Returns what `load` made, the text and its origin.
pub fn load_at_start<T>(
    path: &Path,
    store: Option<&LastGood>,
    load: impl Fn(&str, &str) -> Result<T, String>,
) -> anyhow::Result<(T, String, String)> {
    let origin = path.display().to_string();
    let given = std::fs::read_to_string(path).with_context(|| format!("cannot read {origin}"));
    let why = match given {
        Ok(text) => match load(&text, &origin) {
            Ok(t) => return Ok((t, text, origin)),
            Err(d) => d,
        },
        Err(e) => format!("{e:#}"),
    };
    let Some(saved) = store.and_then(LastGood::saved) else {
        anyhow::bail!("{why}");
    };
    let s_origin = saved.display().to_string();
    let text = std::fs::read_to_string(&saved)
        .with_context(|| format!("{why}\nand cannot read the last good policy {s_origin}"))?;
    let t = load(&text, &s_origin).map_err(|d| {
        anyhow::anyhow!("{why}\nand the last good policy {s_origin} does not load either:\n{d}")
    })?;
    eprintln!(
        "linkshare: WARNING: {origin} is not a valid policy; starting with the last good policy \
         kept in {s_origin}.\nlinkshare: WARNING: fix {origin} and reload (SIGHUP, `systemctl \
         reload`) to run it. What is wrong with it:\n{why}"
    );
    Ok((t, text, s_origin))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(tag: &str) -> PathBuf {
        let d =
            std::env::temp_dir().join(format!("linkshare-lastgood-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap_or_else(|e| panic!("{e}"));
        d
    }

    const GOOD: &str =
        "qdisc = \"htb\"\ndefault = \"root\"\n[[class]]\nname = \"root\"\nrate = \"10mbit\"\n";

    fn load(text: &str, origin: &str) -> Result<String, String> {
        Policy::parse(text, origin)
            .map(|_| text.to_string())
            .map_err(|e| format!("{e:?}"))
    }

    #[test]
    fn an_invalid_file_starts_with_the_last_good_policy_and_a_valid_one_with_itself() {
        let d = scratch("start");
        let store = LastGood::new(d.join("store"));
        let file = d.join("wan.toml");
        std::fs::write(&file, GOOD).unwrap_or_else(|e| panic!("{e}"));
        let origin = file.display().to_string();
        let p = Policy::parse(GOOD, &origin).unwrap_or_else(|e| panic!("{e:?}"));
        store
            .save(GOOD, &origin, &p)
            .unwrap_or_else(|e| panic!("{e:#}"));
        // A second save replaces the first generation.
        let saved = store
            .save(GOOD, &origin, &p)
            .unwrap_or_else(|e| panic!("{e:#}"));
        let gens = std::fs::read_dir(store.dir())
            .unwrap_or_else(|e| panic!("{e}"))
            .filter(|e| {
                e.as_ref()
                    .is_ok_and(|e| e.file_name().to_string_lossy().starts_with("gen-"))
            })
            .count();
        assert_eq!(gens, 1, "one generation kept");
        assert_eq!(store.saved(), Some(store.dir().join("current/policy.toml")));
        assert_eq!(std::fs::read_to_string(&saved).ok().as_deref(), Some(GOOD));

        let (_, _, from) =
            load_at_start(&file, Some(&store), load).unwrap_or_else(|e| panic!("{e:#}"));
        assert_eq!(from, origin, "a valid file is used as given");

        std::fs::write(&file, "qdisc = \"htb\"\n[[class]]\nname = 3\n")
            .unwrap_or_else(|e| panic!("{e}"));
        let (text, _, from) =
            load_at_start(&file, Some(&store), load).unwrap_or_else(|e| panic!("{e:#}"));
        assert_eq!(text, GOOD);
        assert!(from.ends_with("current/policy.toml"), "{from}");
        // Without a store, the invalid file is an error.
        assert!(load_at_start(&file, None, load).is_err());
        // Nor does an empty store help.
        assert!(load_at_start(&file, Some(&LastGood::new(d.join("empty"))), load).is_err());
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_subscriber_table_is_kept_beside_the_policy() {
        let d = scratch("subs");
        let file = d.join("isp.toml");
        let text = "qdisc = \"htb\"\ndefault = \"other\"\nsubscribers = \"tables/subs.csv\"\n\
                    [[plan]]\nname = \"basic\"\nrate = \"1mbit\"\nceil = \"2mbit\"\n\
                    [[class]]\nname = \"root\"\nrate = \"100mbit\"\n\
                    [[class]]\nname = \"ap\"\nparent = \"root\"\nrate = \"50mbit\"\n\
                    [[class]]\nname = \"other\"\nparent = \"root\"\nrate = \"10mbit\"\n";
        std::fs::create_dir_all(d.join("tables")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(
            d.join("tables/subs.csv"),
            "name,addresses,plan,parent\nalice,10.0.0.1,basic,ap\n",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(&file, text).unwrap_or_else(|e| panic!("{e}"));
        let origin = file.display().to_string();
        let p = match Policy::parse(text, &origin) {
            Ok(p) => p,
            Err(e) => panic!("the test policy must check: {e:?}"),
        };
        let store = LastGood::new(d.join("store"));
        let saved = store
            .save(text, &origin, &p)
            .unwrap_or_else(|e| panic!("{e:#}"));
        let copy = store.dir().join("current/tables/subs.csv");
        assert!(copy.is_file(), "the table is copied: {}", copy.display());
        // The saved copy checks on its own, with the table beside it.
        let again = std::fs::read_to_string(&saved).unwrap_or_else(|e| panic!("{e}"));
        assert!(Policy::parse(&again, &saved.display().to_string()).is_ok());
        let _ = std::fs::remove_dir_all(&d);
    }
}
