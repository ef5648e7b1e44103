//! The upstream capacity as LibreQoS keeps it.
//!
//! LibreQoS's own setting is in `/etc/lqos.conf` (v1.4 and later, TOML, section `[queues]`):
//! `downlink_bandwidth_mbps` and `uplink_bandwidth_mbps`; older installations have it in
//! `ispConfig.py`: `upstreamBandwidthCapacityDownloadMbps` and
//! `upstreamBandwidthCapacityUploadMbps`. Both are `key = number` lines, so one line scan reads
//! either file without a TOML or Python parser; a key given twice is an error (the file would be
//! ambiguous), a missing one says which name to write.

use crate::diag::Diag;

use super::mbps;

/// The names of (download, upload) in lqos.conf and in ispConfig.py.
const KEYS: [[&str; 2]; 2] = [
    ["downlink_bandwidth_mbps", "uplink_bandwidth_mbps"],
    [
        "upstreamBandwidthCapacityDownloadMbps",
        "upstreamBandwidthCapacityUploadMbps",
    ],
];

/// (download, upload) in bits per second, from lqos.conf or ispConfig.py.
pub fn read(text: &str, file: &str) -> Result<(u64, u64), Diag> {
    let mut found: [Option<(u64, usize)>; 2] = [None, None];
    for (i, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let key = key.trim();
        let Some(d) = KEYS.iter().find_map(|k| k.iter().position(|n| *n == key)) else {
            continue;
        };
        let v = value.trim().trim_matches('"');
        let bits = mbps(v).filter(|b| *b > 0).ok_or_else(|| {
            Diag::new(
                file,
                i + 1,
                format!("`{key}` = `{v}` is not a rate in Mbps"),
            )
            .help("write a positive number of Mbps, e.g. 1000")
        })?;
        if let Some((_, first)) = found[d] {
            return Err(Diag::new(
                file,
                i + 1,
                format!("`{key}` is given twice (first at line {first})"),
            )
            .help("keep one"));
        }
        found[d] = Some((bits, i + 1));
    }
    match found {
        [Some((down, _)), Some((up, _))] => Ok((down, up)),
        _ => Err(Diag::new(file, 0, "no upstream capacity found").help(
            "lqos.conf gives it as `downlink_bandwidth_mbps = …` and `uplink_bandwidth_mbps = …` \
             in [queues] (ispConfig.py as upstreamBandwidthCapacityDownloadMbps/UploadMbps); \
             or pass --downlink RATE --uplink RATE",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lqos_conf_and_isp_config_are_read() {
        let conf =
            "[queues]\ndownlink_bandwidth_mbps = 10000\nuplink_bandwidth_mbps = 2500.5 # x\n";
        assert_eq!(
            read(conf, "lqos.conf").unwrap(),
            (10_000_000_000, 2_500_500_000)
        );
        let py = "upstreamBandwidthCapacityDownloadMbps = 1000\nupstreamBandwidthCapacityUploadMbps = 100\n";
        assert_eq!(
            read(py, "ispConfig.py").unwrap(),
            (1_000_000_000, 100_000_000)
        );
    }

    #[test]
    fn missing_doubled_or_bad_values_are_located() {
        let e = read("[queues]\nuplink_bandwidth_mbps = 5\n", "l.conf").unwrap_err();
        assert!(e.to_string().contains("no upstream capacity"), "{e}");
        let e = read(
            "downlink_bandwidth_mbps = 5\ndownlink_bandwidth_mbps = 6\n",
            "l.conf",
        )
        .unwrap_err();
        assert!(e.to_string().starts_with("l.conf:2:"), "{e}");
        let e = read("downlink_bandwidth_mbps = fast\n", "l.conf").unwrap_err();
        assert!(e.to_string().contains("`fast` is not a rate"), "{e}");
    }
}
