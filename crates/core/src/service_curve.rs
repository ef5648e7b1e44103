//! The data of an HFSC service curve and of an HFSC class's view, below both `hfsc` (the
//! scheduler, which runs the curves) and `qdisc` (whose class views carry them): the two-piece
//! curve as written, its segment arithmetic, exact in 128 bits, and the state `stat` shows.
//! The principles of the curves and their rounding are in `hfsc/curve.rs`, which re-exports
//! these.

pub(crate) const NS_BITS_PER_BYTE: u128 = 8 * 1_000_000_000;

/// "Never": the time a zero slope takes to serve one byte; sums saturate here.
pub const INF: u64 = u64::MAX;

/// Bytes a slope of `m` bit/s serves in `x` ns, rounded down (Linux `seg_x2y`). When `x · m`
/// fits in 64 bits (the usual case) the division by the constant compiles to a multiplication.
#[inline]
pub fn seg_x2y(x: u64, m: u64) -> u64 {
    if let Some(p) = x.checked_mul(m) {
        return p / NS_BITS_PER_BYTE as u64;
    }
    let y = x as u128 * m as u128 / NS_BITS_PER_BYTE;
    y.min(u64::MAX as u128) as u64
}

/// `u64::MAX / m`, the reciprocal [`seg_y2x_inv`] divides with (0 for a zero slope). Computed
/// once per curve, as Linux precomputes `ism`; unlike `ism` it only steers the division, whose
/// result stays exact.
#[inline]
pub fn inverse(m: u64) -> u64 {
    u64::MAX.checked_div(m).unwrap_or(0)
}

/// [`seg_y2x`] with `inv = inverse(m)`: the same value, without a division when `y · 8e9` fits in
/// 64 bits. The quotient estimate `⌊n · inv / 2^64⌋` is at most `⌊n / m⌋` (as `inv ≤ 2^64 / m`)
/// and at least `n / m − 2` (as `inv > (2^64 − 1) / m − 1` and `n < 2^64`), so at most three
/// corrections make it exact.
#[inline]
pub fn seg_y2x_inv(y: u64, m: u64, inv: u64) -> u64 {
    if y == 0 {
        return 0;
    }
    if m == 0 {
        return INF;
    }
    let Some(n) = y.checked_mul(NS_BITS_PER_BYTE as u64) else {
        return seg_y2x(y, m);
    };
    let mut q = ((n as u128 * inv as u128) >> 64) as u64;
    let mut r = n - q * m;
    while r >= m {
        q += 1;
        r -= m;
    }
    q + u64::from(r != 0)
}

/// Nanoseconds a slope of `m` bit/s takes to serve `y` bytes, rounded up; [`INF`] when `m` is 0
/// and `y` is not (Linux `seg_y2x`).
#[inline]
pub fn seg_y2x(y: u64, m: u64) -> u64 {
    if y == 0 {
        return 0;
    }
    if m == 0 {
        return INF;
    }
    let x = (y as u128 * NS_BITS_PER_BYTE).div_ceil(m as u128);
    x.min(INF as u128) as u64
}

/// A two-piece linear service curve as written: `m1` bit/s for `d` ns, then `m2` bit/s.
/// A linear curve has `d = 0` (and `m1` is then irrelevant; [`ServiceCurve::rate`] sets it to `m2`).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct ServiceCurve {
    pub m1: u64,
    pub d: u64,
    pub m2: u64,
}

impl ServiceCurve {
    /// A linear curve of `m` bit/s.
    #[inline]
    pub fn rate(m: u64) -> Self {
        ServiceCurve { m1: m, d: 0, m2: m }
    }

    /// tc-hfsc(7)'s `umax dmax rate` form: the curve that serves `umax` bytes within `dmax` ns and
    /// then `rate` bit/s. When `umax` at `rate` already takes at most `dmax`, the curve is convex:
    /// nothing for `dmax − umax/rate`, then `rate` (tc's translation); otherwise concave:
    /// `m1 = umax / dmax` for `dmax`, then `rate`. `None` when `dmax` is 0.
    pub fn from_umax(umax: u64, dmax: u64, rate: u64) -> Option<Self> {
        if dmax == 0 {
            return None;
        }
        let at_rate = seg_y2x(umax, rate);
        if at_rate <= dmax {
            // Convex: idle for dmax − umax/rate, then the rate.
            Some(ServiceCurve {
                m1: 0,
                d: dmax - at_rate,
                m2: rate,
            })
        } else {
            let m1 = (umax as u128 * NS_BITS_PER_BYTE / dmax as u128).min(u64::MAX as u128) as u64;
            Some(ServiceCurve {
                m1,
                d: dmax,
                m2: rate,
            })
        }
    }

    /// Bytes owed `t` ns after the start.
    pub fn at(&self, t: u64) -> u64 {
        if t <= self.d {
            seg_x2y(t, self.m1)
        } else {
            seg_x2y(self.d, self.m1).saturating_add(seg_x2y(t - self.d, self.m2))
        }
    }

    /// `m1 ≤ m2`: the first segment is no steeper than the second.
    #[inline]
    pub fn is_convex(&self) -> bool {
        self.m1 <= self.m2
    }

    /// Both slopes zero: no curve at all (tc's `rt 0`).
    #[inline]
    pub fn is_zero(&self) -> bool {
        self.m1 == 0 && self.m2 == 0
    }

    /// The largest slope, for the "sum above the parent" checks (`max(m1, m2)`).
    pub fn peak(&self) -> u64 {
        if self.d == 0 {
            self.m2
        } else {
            self.m1.max(self.m2)
        }
    }

    #[inline]
    pub(crate) fn first_dy(&self) -> u64 {
        seg_x2y(self.d, self.m1)
    }
}

/// A class's scheduler state, in tc's words for hfsc classes (times in ns since the clock's
/// origin, amounts in bytes).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct HfscClassState {
    /// Backlog periods of the class (`period`).
    pub period: u64,
    /// 0 for leaves, parents one above their highest child (`level`).
    pub level: u8,
    /// Virtual time (`vt`).
    pub vt: u64,
    /// Fit time `f` (`ft`): the class may not be served by link-sharing before it.
    pub f: u64,
    /// Eligible time (`et`) and deadline (`dt`) of a real-time leaf.
    pub e: u64,
    pub d: u64,
    /// Bytes served by the real-time criterion (`c`) and in all (`w`).
    pub cumul: u64,
    pub total: u64,
    /// Active children (leaves: 1 while active for link-sharing).
    pub nactive: u32,
}

/// What a view of an HFSC class carries ([`crate::qdisc::ClassView::hfsc`]): its curves as in effect and its
/// scheduler state.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct HfscClassView {
    pub rt: Option<ServiceCurve>,
    pub ls: Option<ServiceCurve>,
    pub ul: Option<ServiceCurve>,
    pub state: HfscClassState,
}
