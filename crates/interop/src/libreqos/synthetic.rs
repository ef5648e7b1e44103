//! A synthetic LibreQoS export of any size, for tests and benchmarks.
//!
//! The shape the scale work measures (issue 35): `sites` sites of `aps_per_site` access points
//! each (25 × 8 by default), `circuits` circuits spread round-robin over the APs, one device
//! per circuit with one IPv4 address (`100.64.0.0/10`, consecutive, so up to 4,194,304
//! circuits) and optionally one IPv6 /64 (`2001:db8::/32`), four plans (each AP gets all four in turn), and no
//! `sqm` (fq_codel per circuit, as the importer writes it). Sites are 10 Gbit/s down and
//! 2 Gbit/s up, APs 2 Gbit/s and 400 Mbit/s: at 100,000 circuits the minimums under an AP are
//! about 4 times what it gets of its site, so the import scales them, as real exports need. Everything
//! is a function of the parameters: the same call gives the same bytes.

use std::fmt::Write as _;

/// What to generate.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Synthetic {
    pub circuits: usize,
    pub sites: usize,
    pub aps_per_site: usize,
    /// Give each circuit an IPv6 /64 besides its IPv4 address.
    pub ipv6: bool,
}

impl Synthetic {
    /// `circuits` circuits under 25 sites × 8 APs, IPv4 only.
    pub fn new(circuits: usize) -> Synthetic {
        Synthetic {
            circuits,
            sites: 25,
            aps_per_site: 8,
            ipv6: false,
        }
    }
}

/// The four plans, in Mbps: download min, upload min, download max, upload max.
pub const PLANS: [[u32; 4]; 4] = [
    [10, 2, 50, 10],
    [25, 5, 100, 20],
    [50, 10, 250, 50],
    [100, 20, 500, 100],
];

/// `(network.json, ShapedDevices.csv)`.
pub fn generate(s: &Synthetic) -> (String, String) {
    let (sites, aps) = (s.sites.max(1), s.aps_per_site.max(1));
    let mut net = String::from("{\n");
    for site in 0..sites {
        let _ = writeln!(
            net,
            "  \"Site_{site}\": {{\n    \"downloadBandwidthMbps\": 10000,\n    \"uploadBandwidthMbps\": 2000,\n    \"type\": \"Site\",\n    \"children\": {{"
        );
        for ap in 0..aps {
            let comma = if ap + 1 < aps { "," } else { "" };
            let _ = writeln!(
                net,
                "      \"AP_{site}_{ap}\": {{ \"downloadBandwidthMbps\": 2000, \"uploadBandwidthMbps\": 400, \"type\": \"AP\" }}{comma}"
            );
        }
        let comma = if site + 1 < sites { "," } else { "" };
        let _ = writeln!(net, "    }}\n  }}{comma}");
    }
    net.push_str("}\n");

    let mut csv = String::with_capacity(s.circuits * 110 + 200);
    csv.push_str("Circuit ID,Circuit Name,Device ID,Device Name,Parent Node,MAC,IPv4,IPv6,Download Min Mbps,Upload Min Mbps,Download Max Mbps,Upload Max Mbps,Comment,sqm\n");
    let n_aps = sites * aps;
    for i in 0..s.circuits {
        let id = i + 1;
        let ap = i % n_aps;
        let v4 = 0x6440_0000u32.wrapping_add(i as u32); // 100.64.0.0 + i
        let [a, b, c, d] = v4.to_be_bytes();
        let p = PLANS[(i / n_aps) % PLANS.len()]; // every AP gets every plan
        let _ = write!(
            csv,
            "{id},Subscriber {id},{id},cpe{id},AP_{}_{},,{a}.{b}.{c}.{d},",
            ap / aps,
            ap % aps
        );
        if s.ipv6 {
            let _ = write!(csv, "2001:db8:{:x}:{:x}::/64", i >> 16, i & 0xffff);
        }
        let _ = writeln!(csv, ",{},{},{},{},,", p[0], p[1], p[2], p[3]);
    }
    (net, csv)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_call_gives_the_same_bytes() {
        let s = Synthetic {
            ipv6: true,
            ..Synthetic::new(1000)
        };
        assert_eq!(generate(&s), generate(&s));
        let (net, csv) = generate(&s);
        assert_eq!(csv.lines().count(), 1001);
        assert!(csv.contains("\n1000,Subscriber 1000,1000,cpe1000,AP_24_7,,100.64.3.231,2001:db8:0:3e7::/64,10,2,50,10,,\n"), "{}", &csv[csv.len() - 200..]);
        assert_eq!(net.matches("\"type\": \"AP\"").count(), 200);
        serde_json::from_str::<serde_json::Value>(&net).unwrap();
    }
}
