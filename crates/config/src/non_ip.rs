//! `non_ip = "shape" | "pass" | "drop"`: what the shaper does with frames that are not IPv4 or
//! IPv6 (ARP, LLDP, PPPoE discovery, custom EtherTypes, MPLS stacks it does not walk).
//!
//! The default is `shape`: such a frame takes the default class like an unmatched IP packet, so
//! it spends that class's rate and queue and cannot take transmit slots past the policy (a
//! host sending a flood of frames of a custom EtherType gets the default class's rate, no
//! more). `pass` forwards them at once, unshaped (the behaviour of a transparent bridge, for
//! links whose non-IP traffic must not wait behind bulk IP); `drop` discards them (an IP-only
//! link). The shaper counts them per choice (`non_ip_shaped`, `non_ip_passed`,
//! `non_ip_dropped` in `stat`).

use toml::Spanned;

use crate::raw::Raw;
use crate::source::Sink;
use crate::values;

/// What happens to a frame that is not IP.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum NonIp {
    /// Queued in the default class with the IP traffic that matches no filter.
    #[default]
    Shape,
    /// Forwarded at once, unshaped.
    Pass,
    /// Discarded.
    Drop,
}

impl NonIp {
    /// Every choice by its policy name.
    pub const KNOWN: &'static [(&'static str, NonIp)] = &[
        ("shape", NonIp::Shape),
        ("pass", NonIp::Pass),
        ("drop", NonIp::Drop),
    ];

    /// The policy name (`"shape"`, `"pass"`, `"drop"`).
    pub fn name(self) -> &'static str {
        match self {
            NonIp::Shape => "shape",
            NonIp::Pass => "pass",
            NonIp::Drop => "drop",
        }
    }
}

/// Reads `non_ip` from the top-level entries: the default when absent, `None` when invalid
/// (reported).
pub(crate) fn read(sink: &mut Sink, entries: &[(Spanned<String>, Spanned<Raw>)]) -> Option<NonIp> {
    match entries.iter().find(|(k, _)| k.get_ref() == "non_ip") {
        Some((_, v)) => values::word(sink, "`non_ip` (frames that are not IP)", v, NonIp::KNOWN),
        None => Some(NonIp::default()),
    }
}

#[cfg(test)]
mod tests {
    use super::NonIp;
    use crate::Policy;

    const TREE: &str =
        "qdisc = \"htb\"\ndefault = \"a\"\n[[class]]\nname = \"a\"\nrate = \"1mbit\"\n";

    #[test]
    fn the_default_is_shape_and_each_choice_parses() {
        let p = Policy::parse(TREE, "p.toml").expect("policy");
        assert_eq!(p.non_ip(), NonIp::Shape);
        for (name, want) in NonIp::KNOWN {
            let text = format!("non_ip = \"{name}\"\n{TREE}");
            let p = Policy::parse(&text, "p.toml").expect("policy");
            assert_eq!(p.non_ip(), *want);
            assert_eq!(want.name(), *name);
        }
    }

    #[test]
    fn an_unknown_choice_names_the_line_and_the_choices() {
        let text = format!("non_ip = \"bridge\"\n{TREE}");
        let e = Policy::parse(&text, "p.toml").expect_err("rejected");
        let msg = e.to_string();
        assert!(msg.contains("p.toml:1"), "{msg}");
        assert!(
            msg.contains("non_ip") && msg.contains("shape, pass, drop"),
            "{msg}"
        );
    }
}
