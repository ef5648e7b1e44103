//! A run's results as column arrays: what the Python side turns into DataFrames without a loop
//! per row (`numpy.frombuffer` on the numeric columns, `pandas.Categorical.from_codes` on the
//! names), so a million time-series rows cost one copy each way.
//!
//! * [`timeseries`]: `timeseries.csv`'s rows (class and flow samples, with the flows' RTT);
//! * [`rtt`]: the individual RTT probes;
//! * [`figures`]: one row per class and per flow with every figure of the summary
//!   (`linkshare_sim::figures`, the same columns as `sweep.csv`).
//!
//! Principle: columns are little-endian byte buffers of one type each (f64 or u64, NaN for a
//! missing float) plus, for strings, `u32` codes into a list of names.

use std::collections::{BTreeMap, HashMap};

use linkshare_sim::figures::{rows, Cell, COLUMNS};
use linkshare_sim::model::{SeriesKind, SimResult, Summary};

/// One column.
#[derive(Clone, Debug, PartialEq)]
pub enum Column {
    F64(Vec<f64>),
    U64(Vec<u64>),
    /// Codes into `names`.
    Names {
        codes: Vec<u32>,
        names: Vec<String>,
    },
}

impl Column {
    pub fn len(&self) -> usize {
        match self {
            Column::F64(v) => v.len(),
            Column::U64(v) => v.len(),
            Column::Names { codes, .. } => codes.len(),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The numbers as little-endian bytes (`None` for names).
    pub fn le_bytes(&self) -> Option<Vec<u8>> {
        match self {
            Column::F64(v) => Some(v.iter().flat_map(|x| x.to_le_bytes()).collect()),
            Column::U64(v) => Some(v.iter().flat_map(|x| x.to_le_bytes()).collect()),
            Column::Names { .. } => None,
        }
    }
}

/// Interns names as codes.
#[derive(Default)]
struct Names {
    index: HashMap<String, u32>,
    names: Vec<String>,
    codes: Vec<u32>,
}

impl Names {
    fn push(&mut self, name: &str) {
        let code = match self.index.get(name) {
            Some(&c) => c,
            None => {
                let c = self.names.len() as u32;
                self.names.push(name.to_string());
                self.index.insert(name.to_string(), c);
                c
            }
        };
        self.codes.push(code);
    }
    fn column(self) -> Column {
        Column::Names {
            codes: self.codes,
            names: self.names,
        }
    }
}

/// The time series: `time_s, kind, name, bytes, rate_bps, backlog_bytes, drops, rtt_ms`.
pub fn timeseries(r: &SimResult) -> Vec<(&'static str, Column)> {
    let n = r.samples.len();
    let mut time = Vec::with_capacity(n);
    let mut kind = Names::default();
    let mut name = Names::default();
    let (mut bytes, mut rate, mut backlog, mut drops, mut rtt) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    for s in &r.samples {
        time.push(s.time_s);
        kind.push(match s.kind {
            SeriesKind::Class => "class",
            SeriesKind::Flow => "flow",
        });
        name.push(&s.name);
        bytes.push(s.bytes);
        rate.push(s.rate_bps);
        backlog.push(s.backlog_bytes);
        drops.push(s.drops);
        rtt.push(s.rtt_ms.unwrap_or(f64::NAN));
    }
    vec![
        ("time_s", Column::F64(time)),
        ("kind", kind.column()),
        ("name", name.column()),
        ("bytes", Column::U64(bytes)),
        ("rate_bps", Column::F64(rate)),
        ("backlog_bytes", Column::U64(backlog)),
        ("drops", Column::U64(drops)),
        ("rtt_ms", Column::F64(rtt)),
    ]
}

/// The RTT probes: `time_s, flow, rtt_ms`.
pub fn rtt(r: &SimResult) -> Vec<(&'static str, Column)> {
    let mut flow = Names::default();
    let mut time = Vec::with_capacity(r.rtt_points.len());
    let mut ms = Vec::with_capacity(r.rtt_points.len());
    for (t, f, v) in &r.rtt_points {
        time.push(*t);
        flow.push(f);
        ms.push(*v);
    }
    vec![
        ("time_s", Column::F64(time)),
        ("flow", flow.column()),
        ("rtt_ms", Column::F64(ms)),
    ]
}

/// One value of a figures table (its columns are small: one entry per class or flow).
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Str(String),
    Int(u64),
    Num(f64),
    Missing,
}

/// The per-class and per-flow figures, column by column ([`linkshare_sim::figures::COLUMNS`]).
pub fn figures(s: &Summary, offered: &BTreeMap<String, f64>) -> Vec<(&'static str, Vec<Value>)> {
    let rows = rows(s, offered);
    COLUMNS
        .iter()
        .enumerate()
        .map(|(i, (name, _))| {
            let col = rows
                .iter()
                .map(|r| match r.cell(i) {
                    Cell::Str(s) => Value::Str(s.to_string()),
                    Cell::Int(n) => Value::Int(n),
                    Cell::Num(x) => Value::Num(x),
                    Cell::Missing => Value::Missing,
                })
                .collect();
            (*name, col)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::point::{run, Source};

    #[test]
    fn columns_have_one_length_and_round_trip() {
        let src = Source {
            text: "duration = \"1s\"\nsample = \"10ms\"\n[link]\nrate = \"10mbit\"\n\
                   [[flow]]\nname = \"t\"\nkind = \"tcp\"\n[[flow]]\nname = \"p\"\nkind = \"ping\"\n\
                   interval = \"100ms\"\n"
                .into(),
            origin: "t.toml".into(),
            base_dir: Default::default(),
            default_name: "t".into(),
        };
        let r = run(&src, &[], None).unwrap();
        let ts = timeseries(&r.result);
        let n = r.result.samples.len();
        assert!(n > 100, "{n}");
        assert!(ts.iter().all(|(_, c)| c.len() == n));
        let Column::Names { codes, names } = &ts[2].1 else {
            panic!("name is a names column")
        };
        for (s, &c) in r.result.samples.iter().zip(codes) {
            assert_eq!(names[c as usize], s.name);
        }
        let Some(b) = ts[0].1.le_bytes() else {
            panic!("time is numeric")
        };
        let first = f64::from_le_bytes(b[..8].try_into().unwrap());
        assert_eq!(first, r.result.samples[0].time_s);
        let probes = rtt(&r.result);
        assert_eq!(probes[0].1.len(), r.result.rtt_points.len());
        let f = figures(&r.result.summary, &r.offered_bps);
        let kinds = &f.iter().find(|c| c.0 == "kind").unwrap().1;
        // One class (the default pfifo) and two flows.
        assert_eq!(kinds.len(), 3);
        let rtt99 = &f.iter().find(|c| c.0 == "rtt_p99_ms").unwrap().1;
        assert!(matches!(rtt99[1], Value::Num(x) if x > 0.0), "{rtt99:?}");
    }
}
