//! The Internet checksum (RFC 1071): one's-complement sum of 16-bit words.

use std::net::IpAddr;

/// Adds `data` to a running one's-complement sum (odd trailing byte padded with zero).
pub fn accumulate(mut sum: u32, data: &[u8]) -> u32 {
    let mut words = data.chunks_exact(2);
    for w in &mut words {
        sum = add(sum, u32::from(u16::from_be_bytes([w[0], w[1]])));
    }
    if let [last] = words.remainder() {
        sum = add(sum, u32::from(*last) << 8);
    }
    sum
}

/// Folds a running sum into the final 16-bit checksum (complemented).
pub fn finish(sum: u32) -> u16 {
    let mut s = sum;
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

/// Checksum of `data` alone (IPv4 header, ICMPv4).
pub fn internet(data: &[u8]) -> u16 {
    finish(accumulate(0, data))
}

/// Running sum of the TCP/UDP/ICMPv6 pseudo-header for `src`, `dst`, `proto` and `l4_len`.
/// Addresses of different families give the IPv6 form for both.
pub fn pseudo_header(src: IpAddr, dst: IpAddr, proto: u8, l4_len: u32) -> u32 {
    let mut sum = 0;
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            sum = accumulate(sum, &s.octets());
            sum = accumulate(sum, &d.octets());
            sum = add(sum, u32::from(proto));
            // The IPv4 pseudo-header carries a 16-bit length.
            sum = add(sum, l4_len & 0xffff);
        }
        _ => {
            sum = accumulate(sum, &v6_octets(src));
            sum = accumulate(sum, &v6_octets(dst));
            sum = add(sum, l4_len >> 16);
            sum = add(sum, l4_len & 0xffff);
            sum = add(sum, u32::from(proto));
        }
    }
    sum
}

fn v6_octets(a: IpAddr) -> [u8; 16] {
    match a {
        IpAddr::V4(v4) => v4.to_ipv6_mapped().octets(),
        IpAddr::V6(v6) => v6.octets(),
    }
}

/// Adds with end-around carry so the sum never overflows.
fn add(sum: u32, x: u32) -> u32 {
    let (s, carry) = sum.overflowing_add(x);
    s + u32::from(carry)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc1071_example() {
        // RFC 1071 §3: the words 0001 f203 f4f5 f6f7 sum to ddf2 (checksum 220d).
        let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(finish(accumulate(0, &data)), !0xddf2);
        assert_eq!(internet(&data), 0x220d);
    }

    #[test]
    fn checksum_of_data_with_its_checksum_is_zero() {
        let mut data = vec![
            0x45, 0x00, 0x00, 0x1c, 0x12, 0x34, 0x40, 0x00, 0x40, 0x11, 0, 0,
        ];
        data.extend_from_slice(&[10, 0, 0, 1, 10, 0, 0, 2]);
        let c = internet(&data);
        data[10..12].copy_from_slice(&c.to_be_bytes());
        assert_eq!(internet(&data), 0);
    }

    #[test]
    fn odd_length_pads_with_zero() {
        assert_eq!(internet(&[0xab]), internet(&[0xab, 0x00]));
    }
}
