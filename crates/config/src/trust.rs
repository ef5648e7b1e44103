//! The policy's trust in the DSCP of the packets it shapes: `trust_dscp` and `wash` at the top
//! of a policy for the packets its (download) side classifies, `upload_trust_dscp` and
//! `upload_wash` for its upload side (each defaults to the download side's value, as
//! `upload_leaf` defaults to `leaf`). What they do: [`linkshare_core::trust`].

use linkshare_core::trust::DscpTrust;
use toml::Spanned;

use crate::raw::Raw;
use crate::source::Sink;
use crate::values;

/// The download side's and the upload side's settings; `None` if a key is invalid (reported).
pub(crate) fn read(
    sink: &mut Sink,
    entries: &[(Spanned<String>, Spanned<Raw>)],
) -> Option<(DscpTrust, DscpTrust)> {
    let mut ok = true;
    let mut flag = |key: &str, what: &str, default: bool| match entries
        .iter()
        .find(|(k, _)| k.get_ref() == key)
    {
        None => default,
        Some((_, v)) => {
            values::boolean(sink, &format!("`{key}` ({what})"), v).unwrap_or_else(|| {
                ok = false;
                default
            })
        }
    };
    let down = DscpTrust {
        trust: flag("trust_dscp", "classify packets by their DSCP", true),
        wash: flag("wash", "clear the DSCP of the packets shaped", false),
    };
    let up = DscpTrust {
        trust: flag(
            "upload_trust_dscp",
            "classify upload packets by their DSCP",
            down.trust,
        ),
        wash: flag(
            "upload_wash",
            "clear the DSCP of the upload packets shaped",
            down.wash,
        ),
    };
    ok.then_some((down, up))
}

#[cfg(test)]
mod tests {
    use crate::Policy;
    use linkshare_core::trust::DscpTrust;

    const TREE: &str =
        "qdisc = \"htb\"\ndefault = \"a\"\n[[class]]\nname = \"a\"\nrate = \"1mbit\"\nupload_rate = \"1mbit\"\n";

    fn parse(head: &str) -> Policy {
        Policy::parse(&format!("{head}{TREE}"), "p.toml").unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn the_default_trusts_and_keeps_the_dscp() {
        let p = parse("");
        assert_eq!(p.dscp_trust(), DscpTrust::default());
        assert_eq!(
            p.upload().map(|u| u.dscp_trust()),
            Some(DscpTrust::default())
        );
    }

    #[test]
    fn the_upload_side_follows_the_download_side_unless_told() {
        let p = parse("trust_dscp = false\n");
        let untrusted = DscpTrust {
            trust: false,
            wash: false,
        };
        assert_eq!(p.dscp_trust(), untrusted);
        assert_eq!(p.upload().map(|u| u.dscp_trust()), Some(untrusted));
        let p = parse("wash = true\nupload_trust_dscp = false\nupload_wash = false\n");
        assert_eq!(
            p.dscp_trust(),
            DscpTrust {
                trust: true,
                wash: true
            }
        );
        assert_eq!(p.upload().map(|u| u.dscp_trust()), Some(untrusted));
    }

    #[test]
    fn a_string_for_a_boolean_is_refused_with_the_fix() {
        let e = match Policy::parse(&format!("trust_dscp = \"no\"\n{TREE}"), "p.toml") {
            Ok(_) => panic!("accepted"),
            Err(e) => e.to_string(),
        };
        assert!(
            e.contains("trust_dscp") && e.contains("write false without quotes"),
            "{e}"
        );
    }
}
