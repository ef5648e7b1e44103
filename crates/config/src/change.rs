//! One class's new rates applied to a checked policy, without its text: what `linkshare class
//! change NAME --rate …` asks of a running shaper that holds the policy it runs (the router's
//! builder thread), so that changing one subscriber among 100,000 costs neither sending nor
//! parsing the whole policy.
//!
//! Principles:
//! * **the same numbers a file edit gives**: the class's numbers that the policy did not write
//!   ([`crate::Written`]) follow the new rates as the defaults do (`ceil` the rate, bursts
//!   `default_burst`, quantum `default_quantum`), the written ones stay, as they would if the
//!   rate were edited in the file and the file reloaded. A subscriber's ceil (its row's or its
//!   plan's) counts as written;
//! * **the same rules `check` applies**, for what one class's rates can break: a rate above
//!   zero, a ceil not below it, the class's guarantee within its parent's together with its
//!   siblings', and its children's within its own. Nothing is changed when a rule fails;
//! * O(siblings + children) after the O(n) look-up of the name, and no copy of the policy.

use linkshare_core::classify::ClassId;
use linkshare_core::htb::{default_burst, default_quantum};
use linkshare_core::units::Rate;

use crate::{Policy, QdiscKind};

impl Policy {
    /// Give class `name` the rate and ceil given (the other left as it is, or following the
    /// rate where the policy did not write it), and the defaults that follow from them. `Err`
    /// says what rule the change breaks (the policy is then unchanged). Returns the class's id.
    pub fn change_rates(
        &mut self,
        name: &str,
        rate: Option<Rate>,
        ceil: Option<Rate>,
    ) -> Result<ClassId, String> {
        if self.kind != QdiscKind::Htb {
            return Err(format!(
                "only an HTB class's rates change in place; this policy is {}",
                self.kind_name()
            ));
        }
        let Some(id) = self.class_id(name) else {
            let hint = crate::diag::suggest(name, self.classes.iter().map(|c| c.name.as_str()))
                .map(|s| format!("; did you mean `{s}`?"))
                .unwrap_or_default();
            return Err(format!("no class named `{name}`{hint}"));
        };
        let c = &self.classes[id as usize];
        let new_rate = rate.unwrap_or(c.rate);
        if new_rate == Rate(0) {
            return Err(format!(
                "class `{name}`: rate is zero; give a rate above zero"
            ));
        }
        let new_ceil = match ceil {
            Some(x) => x,
            None if c.written.ceil => c.ceil,
            None => new_rate,
        };
        if new_ceil < new_rate {
            return Err(format!(
                "class `{name}`: ceil {new_ceil} is below rate {new_rate}; give a ceil of at \
                 least {new_rate} too (--ceil)"
            ));
        }
        if let Some(p) = c.parent_id {
            let parent = &self.classes[p as usize];
            let others: u64 = parent
                .children
                .iter()
                .filter(|&&k| k != id)
                .map(|&k| self.classes[k as usize].rate.0)
                .fold(0, u64::saturating_add);
            let sum = others.saturating_add(new_rate.0);
            if sum > parent.rate.0 {
                return Err(format!(
                    "class `{name}`: impossible capacity: the guaranteed rates under `{}` would \
                     add up to {}, above its rate {}; lower the rate by {} or raise `{}`'s",
                    parent.name,
                    Rate(sum),
                    parent.rate,
                    Rate(sum - parent.rate.0),
                    parent.name
                ));
            }
        }
        let kids: u64 = c
            .children
            .iter()
            .map(|&k| self.classes[k as usize].rate.0)
            .fold(0, u64::saturating_add);
        if kids > new_rate.0 {
            return Err(format!(
                "class `{name}`: impossible capacity: its children's guaranteed rates add up to \
                 {}, above the new rate {new_rate}",
                Rate(kids)
            ));
        }
        let (mtu, r2q) = (self.mtu, self.r2q);
        let written = ceil.is_some();
        let c = &mut self.classes[id as usize];
        c.rate = new_rate;
        c.ceil = new_ceil;
        c.written.ceil |= written;
        if !c.written.burst {
            c.burst = default_burst(new_rate, mtu);
        }
        if !c.written.cburst {
            c.cburst = default_burst(new_ceil, mtu);
        }
        if !c.written.quantum {
            c.quantum = default_quantum(new_rate, r2q).0;
        }
        Ok(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: &str = "qdisc = \"htb\"\ndefault = \"a\"\n\
        [[class]]\nname = \"root\"\nrate = \"10mbit\"\n\
        [[class]]\nname = \"a\"\nparent = \"root\"\nrate = \"2mbit\"\n\
        [[class]]\nname = \"b\"\nparent = \"root\"\nrate = \"2mbit\"\nceil = \"5mbit\"\nburst = \"20kb\"\n";

    fn edited(from: &str, to: &str) -> Policy {
        Policy::parse(&P.replacen(from, to, 1), "p.toml").expect("valid")
    }

    /// The class's numbers are those of the file edited the same way and checked again.
    #[test]
    fn a_change_gives_what_the_edited_file_gives() {
        let mut p = Policy::parse(P, "p.toml").expect("valid");
        let a = p
            .change_rates("a", Some(Rate(3_000_000)), None)
            .expect("ok");
        let want = edited("rate = \"2mbit\"\n", "rate = \"3mbit\"\n");
        assert_eq!(p.classes()[a as usize], want.classes()[a as usize]);
        // b writes its ceil and burst: they stay; its cburst and quantum follow.
        let b = p
            .change_rates("b", Some(Rate(1_000_000)), None)
            .expect("ok");
        let want = edited(
            "rate = \"2mbit\"\nceil = \"5mbit\"",
            "rate = \"1mbit\"\nceil = \"5mbit\"",
        );
        assert_eq!(p.classes()[b as usize], want.classes()[b as usize]);
    }

    #[test]
    fn a_change_that_breaks_a_rule_changes_nothing() {
        let mut p = Policy::parse(P, "p.toml").expect("valid");
        let before = p.clone();
        let e = p
            .change_rates("a", Some(Rate(9_000_000)), None)
            .unwrap_err();
        assert!(
            e.contains("impossible capacity") && e.contains("`root`"),
            "{e}"
        );
        let e = p
            .change_rates("b", Some(Rate(6_000_000)), None)
            .unwrap_err();
        assert!(e.contains("below rate") && e.contains("--ceil"), "{e}");
        let e = p
            .change_rates("root", Some(Rate(1_000_000)), None)
            .unwrap_err();
        assert!(e.contains("children"), "{e}");
        let e = p
            .change_rates("aa", Some(Rate(1_000_000)), None)
            .unwrap_err();
        assert!(e.contains("did you mean `a`"), "{e}");
        assert_eq!(p, before);
    }

    #[test]
    fn a_given_ceil_is_kept_by_the_next_rate_change() {
        let mut p = Policy::parse(P, "p.toml").expect("valid");
        let a = p
            .change_rates("a", None, Some(Rate(4_000_000)))
            .expect("ok") as usize;
        assert_eq!(p.classes()[a].rate, Rate(2_000_000));
        p.change_rates("a", Some(Rate(3_000_000)), None)
            .expect("ok");
        assert_eq!(p.classes()[a].ceil, Rate(4_000_000));
    }
}
