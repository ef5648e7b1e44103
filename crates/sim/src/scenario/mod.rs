//! Scenario files: the link, the policy and the traffic of one simulation, as TOML.
//!
//! Every key, its unit and its default is documented in `docs/scenario-format.md`. Parsing is
//! strict: an unknown key, a value of the wrong type or unit, a key that does not apply to the
//! flow's kind, or a flow of an unknown kind is an error that points at the line and column.
//!
//! Parsing happens in two steps: serde reads the document into the `Raw*` structs of `raw` (unit
//! values keep their span), then `check` checks every value and expands `count`.
//!
//! One file per concern:
//! * `spec`: the checked types ([`Scenario`], [`FlowSpec`], …) and the format's defaults and
//!   bounds;
//! * `error`: [`ScenarioError`] and locating a span as file:line:col;
//! * `raw`: the document as serde reads it;
//! * `check`: the scenario, its `[link]` and policy checked, flows in order;
//! * `flow`: one `[[flow]]` checked and expanded;
//! * `arrivals`: a tcp `[[flow]]` with `arrivals` expanded into its arriving flows;
//! * `value`: single values (durations, rates, sizes, …) read and bounded.
//!
//! The public paths are `crate::scenario::X`: the files are private, their items re-exported
//! here.

mod arrivals;
mod check;
mod error;
mod expect;
mod flow;
mod path;
mod raw;
mod spec;
#[cfg(test)]
mod tests;
mod value;

pub use arrivals::{DATAMINING_CDF, DEFAULT_SIZE_MAX, WEBSEARCH_CDF};
pub use error::ScenarioError;
pub(crate) use error::{line_col, toml_error, Doc};
pub use spec::{
    Arrival, Axis, CcKind, FlowKind, FlowSpec, LinkSpec, Pattern, PingSpec, Point, Scenario,
    SizeMix, Sweep, TcpSpec, UdpSpec, UplinkSpec, DEFAULT_DPORT_BASE, DEFAULT_DURATION,
    DEFAULT_INIT_CWND, DEFAULT_MIN_RTO, DEFAULT_MTU, DEFAULT_PING_INTERVAL, DEFAULT_PING_SIZE,
    DEFAULT_QUEUE, DEFAULT_SAMPLE, DEFAULT_SPORT_BASE, DEFAULT_WINDOW, MAX_ARRIVALS, MAX_COUNT,
    MAX_DURATION,
};
