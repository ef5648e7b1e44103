//! # linkshare-fuzzing
//!
//! Every fuzz harness of the project as a plain function `fn(&[u8])`, in one place, so that the
//! same code runs two ways:
//!
//! * under libFuzzer, through the thin `fuzz_target!` wrappers in `fuzz/fuzz_targets/` (cargo-fuzz,
//!   nightly; `scripts/fuzz` runs each for a while);
//! * as an ordinary test on stable (`tests/corpus.rs`), which replays every input kept in
//!   `fuzz/seeds/<target>/`, `fuzz/regressions/<target>/` (and a local working corpus `fuzz/corpus/<target>/`, not committed), so a crash found once stays fixed.
//!
//! A harness **panics only when an invariant is broken** — that is how libFuzzer sees a finding.
//! Bad input must come back as an error value from the code under test, never as a panic.
//!
//! | target     | input                                   | invariants                                   |
//! |------------|-----------------------------------------|----------------------------------------------|
//! | `frame`    | an Ethernet frame                       | parsing is total; the parsed packet goes through classification, enqueue and dequeue with conserved counters |
//! | `policy`   | a policy file (UTF-8 text)              | parsing and validation are total; an accepted policy builds and renders |
//! | `scenario` | a scenario file (UTF-8 text)            | parsing is total                             |
//! | `import_tc`, `import_libreqos`, `import_pf` | a tc script; network.json + `---` + ShapedDevices.csv; a pf.conf | the importers are total; an accepted import is TOML the policy parser reads without panicking |
//! | `control`  | control-socket request lines (JSON lines) | every line gets a well-formed reply the client reads back; refused input gets an `error` with a message; the snapshot's parents are rows of its tree; a reload is what `policy` returns |
//! | `sched`    | a class tree and a sequence of operations | HTB and CBQ conserve packets after every call (`enqueued = dequeued + dropped + backlog`), HTB never sends a class more than its `ceil` allows |

pub mod control;
pub mod frame;
pub mod import;
pub mod sched;
pub mod text;

/// A harness: one input, a panic on a broken invariant.
pub type Harness = fn(&[u8]);

/// The targets by name, as `fuzz/fuzz_targets/` and the corpus folders name them.
pub const TARGETS: &[(&str, Harness)] = &[
    ("frame", frame::run),
    ("policy", text::policy),
    ("scenario", text::scenario),
    ("sched", sched::run),
    ("import_tc", import::tc),
    ("import_libreqos", import::libreqos),
    ("import_pf", import::pf),
    ("control", control::run),
];

/// Packets accounted by a scheduler must balance: everything accepted is dequeued (drained
/// packets count as dequeued), dropped after acceptance, or still queued.
pub fn assert_conserved<P: linkshare_core::Packet>(q: &dyn linkshare_core::Qdisc<P>, what: &str) {
    let st = q.stats();
    let dropped = st.dropped.total().packets;
    let lhs = st.enqueued.packets;
    let rhs = st.dequeued.packets + dropped + st.backlog.packets;
    assert_eq!(
        lhs, rhs,
        "{what}: packets not conserved: enqueued {lhs} != dequeued {} + dropped {dropped} + backlog {}",
        st.dequeued.packets, st.backlog.packets
    );
}
