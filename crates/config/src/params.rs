//! Reading a discipline's parameters from a table (`[class.leaf]`, `qdisc = { type = … }`).
//!
//! A [`Params`] reader walks one table: each `read_*` call takes one key if present, checks its
//! type and unit, and stores it into the discipline's parameter struct; [`Params::finish`] reports
//! the keys nobody read (with a near-miss suggestion) and turns the discipline's own
//! [`ParamError`] into a diagnostic at the offending value. So every discipline's keys are checked
//! the same way, and adding one is a list of `read_*` lines.

use std::ops::Range;

use linkshare_core::qdisc::ParamError;
use linkshare_core::units::{Duration, Rate};
use toml::Spanned;

use crate::diag::suggest;
use crate::raw::Raw;
use crate::source::Sink;
use crate::values;

pub(crate) type Entries = [(Spanned<String>, Spanned<Raw>)];

pub(crate) struct Params<'a, 's, 't> {
    pub(crate) sink: &'s mut Sink<'t>,
    ctx: String,
    entries: &'a Entries,
    /// The span the whole table (or the name) covers: where errors without a key go.
    anchor: Range<usize>,
    read: Vec<&'static str>,
    ok: bool,
}

impl<'a, 's, 't> Params<'a, 's, 't> {
    /// `ctx` names the place in messages, e.g. "class `bulk`: sfq".
    pub(crate) fn new(
        sink: &'s mut Sink<'t>,
        ctx: String,
        entries: &'a Entries,
        anchor: Range<usize>,
    ) -> Self {
        Params {
            sink,
            ctx,
            entries,
            anchor,
            read: vec!["type"],
            ok: true,
        }
    }

    /// A reader over keys of a table whose unknown keys its caller already checks (a `[[class]]`
    /// or the top level): reads and type-checks, nothing more. Dropping it is fine.
    pub(crate) fn borrowed(sink: &'s mut Sink<'t>, ctx: String, entries: &'a Entries) -> Self {
        Params {
            sink,
            ctx,
            entries,
            anchor: 0..0,
            read: Vec::new(),
            ok: true,
        }
    }

    fn get(&mut self, key: &'static str) -> Option<&'a Spanned<Raw>> {
        self.read.push(key);
        self.entries
            .iter()
            .find(|(k, _)| k.get_ref() == key)
            .map(|(_, v)| v)
    }

    fn ctx(&self, key: &str) -> String {
        format!("{}: `{key}`", self.ctx)
    }

    fn note(&mut self, r: Option<()>) {
        if r.is_none() {
            self.ok = false;
        }
    }

    /// A size in bytes (`"15k"`, `1500`) within `lo..=hi`.
    pub(crate) fn size(&mut self, key: &'static str, out: &mut u32, lo: u64, hi: u64) {
        let Some(v) = self.get(key) else { return };
        let ctx = self.ctx(key);
        let r = values::size(self.sink, &ctx, v).and_then(|b| {
            if (lo..=hi).contains(&b) {
                *out = b as u32;
                Some(())
            } else {
                self.sink.error(
                    &v.span(),
                    format!("{ctx}: {b} bytes is out of range"),
                    format!("use from {lo} to {hi} bytes"),
                );
                None
            }
        });
        self.note(r);
    }

    /// An integer count within `lo..=hi`.
    pub(crate) fn int<T: TryFrom<i64>>(
        &mut self,
        key: &'static str,
        out: &mut T,
        lo: i64,
        hi: i64,
    ) {
        let Some(v) = self.get(key) else { return };
        let ctx = self.ctx(key);
        let r = values::int(self.sink, &ctx, v, lo, hi)
            .and_then(|n| T::try_from(n).ok())
            .map(|n| *out = n);
        self.note(r);
    }

    /// A rate (`"10mbit"`).
    pub(crate) fn rate(&mut self, key: &'static str, out: &mut Rate) {
        let Some(v) = self.get(key) else { return };
        let ctx = self.ctx(key);
        let r = values::rate(self.sink, &ctx, v).map(|x| *out = x);
        self.note(r);
    }

    /// An optional rate: absent leaves `None`.
    pub(crate) fn opt_rate(&mut self, key: &'static str, out: &mut Option<Rate>) {
        let Some(v) = self.get(key) else { return };
        let ctx = self.ctx(key);
        let r = values::rate(self.sink, &ctx, v).map(|x| *out = Some(x));
        self.note(r);
    }

    /// A time (`"5ms"`, `"1.5s"`; a bare `0`).
    pub(crate) fn time(&mut self, key: &'static str, out: &mut Duration) {
        let Some(v) = self.get(key) else { return };
        let ctx = self.ctx(key);
        let r = values::time(self.sink, &ctx, v).map(|x| *out = x);
        self.note(r);
    }

    /// An optional time: absent leaves `None`.
    pub(crate) fn opt_time(&mut self, key: &'static str, out: &mut Option<Duration>) {
        let Some(v) = self.get(key) else { return };
        let ctx = self.ctx(key);
        let r = values::time(self.sink, &ctx, v).map(|x| *out = Some(x));
        self.note(r);
    }

    /// A number (integer or float) within `lo..=hi`; a percentage string `"2%"` is read as 0.02.
    pub(crate) fn float(&mut self, key: &'static str, out: &mut f64, lo: f64, hi: f64) {
        let Some(v) = self.get(key) else { return };
        let ctx = self.ctx(key);
        let r = values::fraction(self.sink, &ctx, v, lo, hi).map(|x| *out = x);
        self.note(r);
    }

    /// A boolean.
    pub(crate) fn bool(&mut self, key: &'static str, out: &mut bool) {
        let Some(v) = self.get(key) else { return };
        let ctx = self.ctx(key);
        let r = values::boolean(self.sink, &ctx, v).map(|x| *out = x);
        self.note(r);
    }

    /// One of a fixed set of words.
    pub(crate) fn word<T: Copy>(
        &mut self,
        key: &'static str,
        out: &mut T,
        choices: &[(&'static str, T)],
    ) {
        let Some(v) = self.get(key) else { return };
        let ctx = self.ctx(key);
        let r = values::word(self.sink, &ctx, v, choices).map(|x| *out = x);
        self.note(r);
    }

    /// A key whose value the caller reads itself (a word or a number, a preset or a time):
    /// `read` gets the sink, the message context and the value, and returns `None` after
    /// reporting what is wrong.
    pub(crate) fn custom<T>(
        &mut self,
        key: &'static str,
        out: &mut T,
        read: impl FnOnce(&mut Sink, &str, &Spanned<Raw>) -> Option<T>,
    ) {
        let Some(v) = self.get(key) else { return };
        let ctx = self.ctx(key);
        let r = read(self.sink, &ctx, v).map(|x| *out = x);
        self.note(r);
    }

    /// A list of small integers (e.g. PRIO's `priomap`) of exactly `len` entries in `lo..=hi`.
    pub(crate) fn int_list(&mut self, key: &'static str, out: &mut [u8], lo: i64, hi: i64) {
        let Some(v) = self.get(key) else { return };
        let ctx = self.ctx(key);
        let Raw::Array(items) = v.get_ref() else {
            self.sink.error(
                &v.span(),
                format!(
                    "{ctx}: expected a list of {} integers, found {}",
                    out.len(),
                    v.get_ref().kind()
                ),
                format!("write it like [{}]", vec!["1"; out.len()].join(", ")),
            );
            self.ok = false;
            return;
        };
        if items.len() != out.len() {
            self.sink.error(
                &v.span(),
                format!("{ctx}: has {} entries, expected {}", items.len(), out.len()),
                format!("give exactly {} values", out.len()),
            );
            self.ok = false;
            return;
        }
        for (slot, it) in out.iter_mut().zip(items) {
            match values::int(self.sink, &ctx, it, lo, hi) {
                Some(n) => *slot = n as u8,
                None => self.ok = false,
            }
        }
    }

    /// The span of a key's value, if the key is present (for cross-field diagnostics).
    fn span_of(&self, key: &str) -> Option<Range<usize>> {
        self.entries
            .iter()
            .find(|(k, _)| k.get_ref() == key)
            .map(|(_, v)| v.span())
    }

    /// Report unread keys and the discipline's own validation. `None` if anything was wrong.
    pub(crate) fn finish<T>(self, value: T, check: Result<(), ParamError>) -> Option<T> {
        let Params {
            sink,
            ctx,
            entries,
            anchor,
            read,
            mut ok,
        } = self;
        for (k, _) in entries {
            let key = k.get_ref().as_str();
            if read.contains(&key) {
                continue;
            }
            let known: Vec<&str> = read.iter().copied().filter(|k| *k != "type").collect();
            let help = match suggest(key, known.iter().copied()) {
                Some(s) => format!("did you mean `{s}`? keys here: {}", known.join(", ")),
                None => format!("keys here: {}", known.join(", ")),
            };
            sink.error(&k.span(), format!("{ctx}: unknown key `{key}`"), help);
            ok = false;
        }
        if ok {
            if let Err(e) = check {
                let span = Params::span_in(entries, e.param).unwrap_or(anchor);
                sink.error(&span, format!("{ctx}: `{}` {}", e.param, e.message), e.help);
                ok = false;
            }
        }
        ok.then_some(value)
    }

    fn span_in(entries: &Entries, key: &str) -> Option<Range<usize>> {
        entries
            .iter()
            .find(|(k, _)| k.get_ref() == key)
            .map(|(_, v)| v.span())
    }

    #[allow(dead_code)]
    pub(crate) fn has(&self, key: &str) -> bool {
        self.span_of(key).is_some()
    }
}
