//! Class names, front coded: the control path's names at a few bytes a class.
//!
//! Principles (front coding, as sorted-string dictionaries store their terms: Witten, Moffat and
//! Bell, "Managing Gigabytes", 2nd ed. 1999, §4.1): names are kept in class order in blocks of
//! [`BLOCK`]; the first name of a block is stored whole, each following one as the length of the
//! prefix it shares with the name before it and the bytes after that prefix, both lengths as
//! LEB128 varints. Subscriber trees name their classes in sequence (`c1000`, `c1001`, … or
//! `sub-10.0.3.17`, `sub-10.0.3.18`, …), so a name costs two or three bytes instead of its length
//! plus a 4-byte index. Only the control path reads names (`stat`, `class_id`, adopt's matching
//! by name): fetching one decodes at most one block, O([`BLOCK`] × name length); walking them in
//! order decodes each once. The shared prefix always ends on a UTF-8 character boundary, so every
//! intermediate string is valid.

/// Names per block (one 4-byte offset each).
const BLOCK: usize = 16;

/// Every class's name, by class id.
#[derive(Clone, Debug, Default)]
pub(super) struct Names {
    /// Encoded entries, block after block.
    bytes: Vec<u8>,
    /// Offset in `bytes` of each block's first entry.
    blocks: Vec<u32>,
    len: usize,
    /// The last name pushed (building only; emptied by `shrink`).
    last: String,
}

fn put_varint(out: &mut Vec<u8>, mut v: usize) {
    while v >= 0x80 {
        out.push((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Read a varint at `*at`, moving `*at` past it; `None` on truncated data.
fn get_varint(bytes: &[u8], at: &mut usize) -> Option<usize> {
    let mut v = 0usize;
    let mut shift = 0;
    loop {
        let b = *bytes.get(*at)?;
        *at += 1;
        v |= ((b & 0x7f) as usize) << shift;
        if b & 0x80 == 0 {
            return Some(v);
        }
        shift += 7;
        if shift >= usize::BITS {
            return None;
        }
    }
}

/// Bytes shared at the start of `a` and `b`, backed off to a character boundary.
fn shared_prefix(a: &str, b: &str) -> usize {
    let mut n = a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
    while !a.is_char_boundary(n) {
        n -= 1;
    }
    n
}

impl Names {
    /// Append the name of the next class. Fails only past 4 GiB of encoded names.
    pub(super) fn push(&mut self, name: &str) -> Result<(), ()> {
        let shared = if self.len.is_multiple_of(BLOCK) {
            self.blocks
                .push(u32::try_from(self.bytes.len()).map_err(|_| ())?);
            0
        } else {
            shared_prefix(&self.last, name)
        };
        put_varint(&mut self.bytes, shared);
        put_varint(&mut self.bytes, name.len() - shared);
        self.bytes.extend_from_slice(&name.as_bytes()[shared..]);
        self.last.clear();
        self.last.push_str(name);
        self.len += 1;
        Ok(())
    }

    /// Give class `i` a new name (`i` = the number of names: a new one at the end): its block
    /// of [`BLOCK`] names is coded again in place, the bytes after it move and the offsets of
    /// the blocks after it shift. O(bytes) of `memmove` and O(blocks) additions, no allocation
    /// that grows with the names but the block's own (the control path's: a class added or
    /// removed in place, `reshape`). Fails only past 4 GiB of encoded names.
    pub(super) fn set(&mut self, i: usize, name: &str) -> Result<(), ()> {
        if i >= self.len {
            return if i == self.len {
                self.push(name)
            } else {
                Err(())
            };
        }
        let b = i / BLOCK;
        let start = *self.blocks.get(b).ok_or(())? as usize;
        let end = match self.blocks.get(b + 1) {
            Some(&e) => e as usize,
            None => self.bytes.len(),
        };
        let mut names = Vec::with_capacity(BLOCK);
        let (mut at, mut buf) = (start, String::new());
        for _ in 0..BLOCK.min(self.len - b * BLOCK) {
            self.step(&mut at, &mut buf).ok_or(())?;
            names.push(buf.clone());
        }
        names[i % BLOCK] = name.to_string();
        let mut coded = Vec::new();
        let mut prev = "";
        for (j, n) in names.iter().enumerate() {
            let shared = if j == 0 { 0 } else { shared_prefix(prev, n) };
            put_varint(&mut coded, shared);
            put_varint(&mut coded, n.len() - shared);
            coded.extend_from_slice(&n.as_bytes()[shared..]);
            prev = n;
        }
        let total = self.bytes.len() - (end - start) + coded.len();
        u32::try_from(total).map_err(|_| ())?;
        let (grew, by) = if coded.len() >= end - start {
            (true, coded.len() - (end - start))
        } else {
            (false, end - start - coded.len())
        };
        self.bytes.splice(start..end, coded);
        for o in &mut self.blocks[b + 1..] {
            *o = if grew { *o + by as u32 } else { *o - by as u32 };
        }
        if b + 1 == self.blocks.len() {
            // The next name pushed shares its prefix with the block's last one.
            self.last = names.pop().unwrap_or_default();
        }
        Ok(())
    }

    /// Drop the building state and spare capacity but a little room (a 256th and 64 more),
    /// for the first names set in place without growing (`set`).
    pub(super) fn shrink(&mut self) {
        self.bytes
            .shrink_to(self.bytes.len() + self.bytes.len() / 256 + 64);
        self.blocks
            .shrink_to(self.blocks.len() + self.blocks.len() / 256 + 64);
        self.last = String::new();
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// Decode the entry at `*at` on top of `buf` (the name before it in its block).
    fn step(&self, at: &mut usize, buf: &mut String) -> Option<()> {
        let shared = get_varint(&self.bytes, at)?;
        let rest = get_varint(&self.bytes, at)?;
        let tail = self.bytes.get(*at..at.checked_add(rest)?)?;
        *at += rest;
        if shared > buf.len() || !buf.is_char_boundary(shared) {
            return None;
        }
        buf.truncate(shared);
        buf.push_str(std::str::from_utf8(tail).ok()?);
        Some(())
    }

    /// The name of class `i` (empty if out of range).
    pub(super) fn get(&self, i: usize) -> String {
        let mut buf = String::new();
        if i >= self.len {
            return buf;
        }
        let Some(&start) = self.blocks.get(i / BLOCK) else {
            return buf;
        };
        let mut at = start as usize;
        for _ in 0..=(i % BLOCK) {
            if self.step(&mut at, &mut buf).is_none() {
                return String::new();
            }
        }
        buf
    }

    /// Every name in class order, each decoded once; `f(id, name)`.
    pub(super) fn for_each(&self, mut f: impl FnMut(usize, &str)) {
        let mut buf = String::new();
        let mut at = 0;
        for i in 0..self.len {
            if i.is_multiple_of(BLOCK) {
                buf.clear();
            }
            if self.step(&mut at, &mut buf).is_none() {
                return;
            }
            f(i, &buf);
        }
    }

    /// All names in class order.
    pub(super) fn all(&self) -> Vec<String> {
        let mut v = Vec::with_capacity(self.len);
        self.for_each(|_, n| v.push(n.to_string()));
        v
    }

    /// The id of the first class named `name`.
    pub(super) fn find(&self, name: &str) -> Option<usize> {
        let mut found = None;
        self.for_each(|i, n| {
            if found.is_none() && n == name {
                found = Some(i);
            }
        });
        found
    }

    /// Heap bytes held.
    pub(super) fn heap_bytes(&self) -> usize {
        self.bytes.capacity() + self.blocks.capacity() * 4 + self.last.capacity()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store(names: &[String]) -> Names {
        let mut s = Names::default();
        for n in names {
            assert!(s.push(n).is_ok());
        }
        s.shrink();
        s
    }

    #[test]
    fn round_trips_sequences_and_unicode() {
        let mut names: Vec<String> = (0..1000).map(|i| format!("c{i}")).collect();
        // Shared prefixes that end inside a multi-byte character, empty names, long names.
        names.extend(["é1", "é2", "è", "", "x", "ab".repeat(200).as_str(), "ab"].map(String::from));
        names.extend((0..40).map(|i| format!("sub-10.0.{}.{}", i / 7, i % 7)));
        let s = store(&names);
        assert_eq!(s.len(), names.len());
        for (i, n) in names.iter().enumerate() {
            assert_eq!(&s.get(i), n, "name {i}");
        }
        assert_eq!(s.all(), names);
        assert_eq!(s.find("c999"), Some(999));
        assert_eq!(s.find("è"), Some(1002));
        assert_eq!(s.find("nope"), None);
        assert_eq!(s.get(names.len()), "");
    }

    #[test]
    fn names_set_in_place_read_back_and_keep_the_others() {
        let mut names: Vec<String> = (0..100).map(|i| format!("sub-{i}")).collect();
        let mut s = store(&names);
        // Longer, shorter, empty, unicode; first, middle and last of a block; the last block.
        for (i, n) in [
            (0usize, "x"),
            (17, "sub-17-with-a-much-longer-name"),
            (31, ""),
            (47, "é-47"),
            (99, "last"),
            (17, "s"),
        ] {
            assert!(s.set(i, n).is_ok());
            names[i] = n.to_string();
            assert_eq!(s.all(), names, "after setting {i} to {n:?}");
        }
        // One past the end is a push; further is refused.
        assert!(s.set(100, "sub-100").is_ok());
        names.push("sub-100".into());
        assert!(s.push("sub-101").is_ok());
        names.push("sub-101".into());
        assert!(s.set(200, "no").is_err());
        assert_eq!(s.all(), names);
        assert_eq!(s.find("sub-101"), Some(101));
    }

    #[test]
    fn sequential_names_take_a_few_bytes() {
        let names: Vec<String> = (0..100_000).map(|i| format!("c{i}")).collect();
        let s = store(&names);
        let plain: usize = names.iter().map(|n| n.len() + 4).sum();
        // Whole names with a 4-byte index would take 9.9 bytes a name here; front coded, a
        // block's first name is whole and the 15 others share all but their last digit or two.
        assert!(s.heap_bytes() * 2 < plain, "{} vs {plain}", s.heap_bytes());
        assert_eq!(s.get(54_321), "c54321");
    }
}
