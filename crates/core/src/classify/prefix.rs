//! IP prefixes (`10.0.0.0/8`, `2001:db8::/32`): parsing, masking, matching.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

/// An IP prefix such as `10.0.0.0/8` or `2001:db8::/32`.
///
/// The fields are public, so a value may carry host bits (`10.0.0.1/8`) or a length beyond the
/// family's width; [`IpPrefix::new`] and [`FromStr`] never produce the latter. Matching always
/// ignores host bits. A prefix whose length exceeds 32 (IPv4) or 128 (IPv6) matches nothing.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct IpPrefix {
    pub addr: IpAddr,
    pub len: u8,
}

/// Why a prefix could not be parsed or built.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PrefixError {
    #[error("empty prefix: write an address such as 192.0.2.0/24 or 2001:db8::/32")]
    Empty,
    #[error("`{text}` is not an IPv4 or IPv6 address")]
    BadAddress { text: String },
    #[error("`{text}` is not a prefix length: write a number after the `/`, e.g. /24")]
    BadLength { text: String },
    #[error("prefix length /{len} is too long for an {family} address (at most /{max})")]
    TooLong {
        len: u32,
        max: u8,
        family: &'static str,
    },
}

/// The result of [`IpPrefix::parse_report`]: the prefix with host bits cleared, and whether any
/// were set in the text (`10.1.2.3/8`), so that a configuration checker can warn about it.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct ParsedPrefix {
    pub prefix: IpPrefix,
    pub host_bits_cleared: bool,
}

impl IpPrefix {
    /// A prefix of `len` bits; host bits in `addr` are kept as given (see [`IpPrefix::network`]).
    pub fn new(addr: IpAddr, len: u8) -> Result<Self, PrefixError> {
        let p = IpPrefix { addr, len };
        if len > p.max_len() {
            return Err(PrefixError::TooLong {
                len: u32::from(len),
                max: p.max_len(),
                family: family_name(addr),
            });
        }
        Ok(p)
    }

    /// The whole address as a prefix (`/32` or `/128`).
    pub fn host(addr: IpAddr) -> Self {
        IpPrefix {
            addr,
            len: width(addr),
        }
    }

    /// 32 for IPv4, 128 for IPv6.
    pub fn max_len(&self) -> u8 {
        width(self.addr)
    }

    /// Whether `len` fits the address family. An invalid prefix matches nothing.
    pub fn is_valid(&self) -> bool {
        self.len <= self.max_len()
    }

    /// Whether `addr` has bits set beyond `len`.
    pub fn has_host_bits(&self) -> bool {
        self.is_valid() && bits(self.addr) & !mask(self.max_len(), self.len) != 0
    }

    /// The same prefix with host bits cleared (`10.1.2.3/8` → `10.0.0.0/8`). Invalid prefixes are
    /// returned unchanged.
    pub fn network(&self) -> Self {
        if !self.is_valid() {
            return *self;
        }
        let masked = bits(self.addr) & mask(self.max_len(), self.len);
        let addr = match self.addr {
            IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::from(masked as u32)),
            IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::from(masked)),
        };
        IpPrefix {
            addr,
            len: self.len,
        }
    }

    /// Whether `addr` lies in this prefix. Families never mix: an IPv4 prefix (even `0.0.0.0/0`)
    /// does not contain any IPv6 address, including IPv4-mapped ones, and vice versa.
    pub fn contains(&self, addr: IpAddr) -> bool {
        if width(addr) != self.max_len() || !self.is_valid() {
            return false;
        }
        let m = mask(self.max_len(), self.len);
        bits(addr) & m == bits(self.addr) & m
    }

    /// Parse `addr/len` or a bare address (a host prefix), clearing host bits and reporting
    /// whether there were any. Surrounding whitespace is ignored.
    pub fn parse_report(text: &str) -> Result<ParsedPrefix, PrefixError> {
        let text = text.trim();
        if text.is_empty() {
            return Err(PrefixError::Empty);
        }
        let (addr_text, len_text) = match text.split_once('/') {
            Some((a, l)) => (a.trim(), Some(l.trim())),
            None => (text, None),
        };
        let addr: IpAddr = addr_text.parse().map_err(|_| PrefixError::BadAddress {
            text: addr_text.to_string(),
        })?;
        let len = match len_text {
            None => width(addr),
            Some(l) => {
                let all_digits =
                    !l.is_empty() && l.len() <= 4 && l.bytes().all(|b| b.is_ascii_digit());
                let n = l
                    .parse::<u32>()
                    .ok()
                    .filter(|_| all_digits)
                    .ok_or_else(|| PrefixError::BadLength {
                        text: l.to_string(),
                    })?;
                let max = width(addr);
                if n > u32::from(max) {
                    return Err(PrefixError::TooLong {
                        len: n,
                        max,
                        family: family_name(addr),
                    });
                }
                n as u8
            }
        };
        let raw = IpPrefix { addr, len };
        Ok(ParsedPrefix {
            prefix: raw.network(),
            host_bits_cleared: raw.has_host_bits(),
        })
    }
}

impl FromStr for IpPrefix {
    type Err = PrefixError;
    /// Like [`IpPrefix::parse_report`], dropping the host-bits flag: host bits are cleared.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        IpPrefix::parse_report(s).map(|p| p.prefix)
    }
}

impl fmt::Display for IpPrefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

fn family_name(addr: IpAddr) -> &'static str {
    match addr {
        IpAddr::V4(_) => "IPv4",
        IpAddr::V6(_) => "IPv6",
    }
}

/// Address width in bits.
#[inline]
pub(crate) fn width(addr: IpAddr) -> u8 {
    match addr {
        IpAddr::V4(_) => 32,
        IpAddr::V6(_) => 128,
    }
}

/// The address as an integer (IPv4 in the low 32 bits).
#[inline]
pub(crate) fn bits(addr: IpAddr) -> u128 {
    match addr {
        IpAddr::V4(a) => u128::from(u32::from(a)),
        IpAddr::V6(a) => u128::from(a),
    }
}

/// Mask of the top `len` bits of a `width`-bit address (`len <= width <= 128`).
#[inline]
pub(crate) fn mask(width: u8, len: u8) -> u128 {
    if len == 0 {
        return 0;
    }
    let all = if width >= 128 {
        u128::MAX
    } else {
        (1u128 << width) - 1
    };
    let host = width.saturating_sub(len);
    all & !(if host >= 128 {
        u128::MAX
    } else {
        (1u128 << host) - 1
    })
}
