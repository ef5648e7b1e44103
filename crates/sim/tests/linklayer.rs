//! A policy's link layer (`overhead`, `mpu`, `linklayer`, tc-stab semantics) in the simulator:
//! the scheduler charges the framed size, so a class shaped to R carries R × IP length / framed
//! size of IP bytes, the factor computed by hand from the cell arithmetic.

use linkshare_sim::{run, Scenario};

/// A 4 Mbit/s HTB class on a 10 Mbit/s link, offered 8 Mbit/s of 1500-byte UDP datagrams; the
/// link-layer keys given are put at the top of the policy.
fn goodput_mbit(link_keys: &str) -> f64 {
    let text = format!(
        r#"name = "linklayer"
duration = "12s"
seed = 1
[link]
rate = "10mbit"
delay = "5ms"
mtu = 1500
[policy]
qdisc = "htb"
default = "dsl"
{link_keys}
[[policy.class]]
name = "dsl"
rate = "4mbit"
leaf = {{ type = "pfifo", limit = 100 }}
[[flow]]
name = "udp"
kind = "udp"
rate = "8mbit"
size = 1500
start = "0s"
stop = "12s"
"#
    );
    let sc = Scenario::parse(&text, "linklayer.toml").unwrap_or_else(|e| panic!("{e}"));
    let r = run(&sc, None).unwrap_or_else(|e| panic!("{e}"));
    let f = r
        .summary
        .flows
        .get("udp")
        .unwrap_or_else(|| panic!("no flow"));
    f.goodput_bps / 1e6
}

#[test]
fn atm_and_ptm_framing_lower_goodput_by_the_cell_factor() {
    let plain = goodput_mbit("");
    assert!((plain - 4.0).abs() < 0.05, "ethernet {plain} Mbit/s");

    // PPPoA over ATM, overhead 10: 1510 bytes = 32 cells = 1696 bytes charged per 1500.
    let atm = goodput_mbit("overhead = 10\nlinklayer = \"atm\"");
    let want = 1500.0 / 1696.0;
    assert!(
        (atm / plain - want).abs() < 0.005,
        "atm/ethernet {} (want {want:.4})",
        atm / plain
    );

    // VDSL2 PTM, overhead 22: 1522 bytes = 24 blocks of 65 = 1560 bytes per 1500.
    let ptm = goodput_mbit("overhead = 22\nlinklayer = \"ptm\"");
    let want = 1500.0 / 1560.0;
    assert!(
        (ptm / plain - want).abs() < 0.005,
        "ptm/ethernet {} (want {want:.4})",
        ptm / plain
    );

    // An mpu below the packet size changes nothing for full-size packets.
    let mpu = goodput_mbit("mpu = 64");
    assert!((mpu - plain).abs() < 1e-9, "mpu {mpu} vs {plain}");
}
