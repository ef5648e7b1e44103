//! Bounds-checked big-endian reads used by every view.
//!
//! Each helper reads through `slice::get`: a read past the end yields zero (or an empty slice)
//! instead of panicking. Views only read past the end when used unchecked; after `check_len`
//! every read is in bounds.

/// The byte at `at`, or 0.
#[inline]
pub fn u8_at(buf: &[u8], at: usize) -> u8 {
    buf.get(at).copied().unwrap_or(0)
}

/// The big-endian `u16` at `at..at + 2`, or 0.
#[inline]
pub fn be16(buf: &[u8], at: usize) -> u16 {
    array_at::<2>(buf, at).map_or(0, u16::from_be_bytes)
}

/// The big-endian `u32` at `at..at + 4`, or 0.
#[inline]
pub fn be32(buf: &[u8], at: usize) -> u32 {
    array_at::<4>(buf, at).map_or(0, u32::from_be_bytes)
}

/// The `N` bytes at `at..at + N`, if all present.
#[inline]
pub fn array_at<const N: usize>(buf: &[u8], at: usize) -> Option<[u8; N]> {
    let end = at.checked_add(N)?;
    buf.get(at..end)?.try_into().ok()
}

/// `buf[start..end]` clamped to what exists (empty if `start` is past the end).
#[inline]
pub fn clamped(buf: &[u8], start: usize, end: usize) -> &[u8] {
    let end = end.min(buf.len());
    buf.get(start..end).unwrap_or(&[])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_in_bounds_and_zero_past_the_end() {
        let b = [0x12, 0x34, 0x56, 0x78, 0x9a];
        assert_eq!(u8_at(&b, 4), 0x9a);
        assert_eq!(u8_at(&b, 5), 0);
        assert_eq!(be16(&b, 3), 0x789a);
        assert_eq!(be16(&b, 4), 0);
        assert_eq!(be32(&b, 1), 0x3456_789a);
        assert_eq!(be32(&b, 2), 0);
        assert_eq!(be32(&b, usize::MAX), 0);
        assert_eq!(clamped(&b, 1, 3), &[0x34, 0x56]);
        assert_eq!(clamped(&b, 3, 100), &[0x78, 0x9a]);
        assert_eq!(clamped(&b, 9, 100), &[] as &[u8]);
        assert_eq!(clamped(&b, 3, 1), &[] as &[u8]);
    }
}
