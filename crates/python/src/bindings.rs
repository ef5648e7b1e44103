//! The `linkshare._native` extension module: conversions at the boundary, nothing else.
//!
//! Every run happens with the GIL released (`allow_threads`), so `linkshare.sweep`'s local
//! threads run points in parallel. Errors are raised as `NativeError(kind, message,
//! diagnostics)`, which the Python side turns into `linkshare.ScenarioError` / `SimulationError`
//! with `Diagnostic` objects. Columns cross as `(type, little-endian bytes)` or `("names",
//! u32 codes, names)` (`crate::columns`).

use std::path::PathBuf;

use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyList, PyString, PyTuple};

use linkshare_config::{Diagnostic, Policy, Severity};
use linkshare_sim::overrides::Override;

use crate::columns::{self, Column, Value};
use crate::point::{self, PointError, PointRun, Source};

create_exception!(
    _native,
    NativeError,
    PyException,
    "A scenario or policy was rejected, or a run failed: (kind, message, diagnostics)."
);

/// `(severity, file, line, col, message, help)`.
type DiagTuple = (String, String, usize, usize, String, Option<String>);

fn diag_tuple(d: &Diagnostic) -> DiagTuple {
    let severity = match d.severity {
        Severity::Error => "error",
        _ => "warning",
    };
    (
        severity.to_string(),
        d.file.clone(),
        d.line,
        d.col,
        d.message.clone(),
        d.help.clone(),
    )
}

fn point_error(e: PointError) -> PyErr {
    match e {
        PointError::Scenario(s) => {
            let diags: Vec<DiagTuple> = s.diagnostics.iter().map(diag_tuple).collect();
            NativeError::new_err(("scenario".to_string(), s.to_string(), diags))
        }
        PointError::Run(r) => {
            NativeError::new_err(("run".to_string(), r.to_string(), Vec::<DiagTuple>::new()))
        }
    }
}

/// A Python value as a TOML value (bool, int, float, str, list/tuple, dict).
fn to_toml(v: &Bound<'_, PyAny>) -> PyResult<toml::Value> {
    if let Ok(b) = v.downcast::<PyBool>() {
        return Ok(toml::Value::Boolean(b.is_true()));
    }
    if let Ok(f) = v.downcast::<PyFloat>() {
        return Ok(toml::Value::Float(f.value()));
    }
    if v.downcast::<PyString>().is_ok() {
        return Ok(toml::Value::String(v.extract::<String>()?));
    }
    if let Ok(d) = v.downcast::<PyDict>() {
        let mut t = toml::Table::new();
        for (k, val) in d.iter() {
            let key: String = k
                .extract()
                .map_err(|_| PyTypeError::new_err("scenario keys must be strings"))?;
            if !val.is_none() {
                t.insert(key, to_toml(&val)?);
            }
        }
        return Ok(toml::Value::Table(t));
    }
    if v.downcast::<PyList>().is_ok() || v.downcast::<PyTuple>().is_ok() {
        let items: Vec<Bound<'_, PyAny>> = v.extract()?;
        return items
            .iter()
            .map(to_toml)
            .collect::<PyResult<Vec<_>>>()
            .map(toml::Value::Array);
    }
    if let Ok(i) = v.extract::<i64>() {
        return Ok(toml::Value::Integer(i));
    }
    if let Ok(f) = v.extract::<f64>() {
        return Ok(toml::Value::Float(f));
    }
    Err(PyTypeError::new_err(format!(
        "cannot use {} as a scenario value (give a bool, int, float, str, list or dict)",
        v.get_type().name()?
    )))
}

/// A TOML value as a Python value.
fn from_toml<'py>(py: Python<'py>, v: &toml::Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match v {
        toml::Value::String(s) => s.into_pyobject(py)?.into_any(),
        toml::Value::Integer(i) => i.into_pyobject(py)?.into_any(),
        toml::Value::Float(f) => f.into_pyobject(py)?.into_any(),
        toml::Value::Boolean(b) => b.into_pyobject(py)?.to_owned().into_any(),
        toml::Value::Datetime(d) => d.to_string().into_pyobject(py)?.into_any(),
        toml::Value::Array(a) => {
            let items = a
                .iter()
                .map(|x| from_toml(py, x))
                .collect::<PyResult<Vec<_>>>()?;
            PyList::new(py, items)?.into_any()
        }
        toml::Value::Table(t) => {
            let d = PyDict::new(py);
            for (k, x) in t {
                d.set_item(k, from_toml(py, x)?)?;
            }
            d.into_any()
        }
    })
}

fn edits_of(edits: Vec<(String, Option<Bound<'_, PyAny>>)>) -> PyResult<Vec<Override>> {
    edits
        .into_iter()
        .map(|(k, v)| Ok((k, v.map(|v| to_toml(&v)).transpose()?)))
        .collect()
}

fn source(text: String, origin: String, base_dir: PathBuf, default_name: String) -> Source {
    Source {
        text,
        origin,
        base_dir,
        default_name,
    }
}

fn columns_dict<'py>(py: Python<'py>, cols: Vec<(&str, Column)>) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for (name, c) in cols {
        let v: Bound<'py, PyAny> = match &c {
            Column::F64(_) | Column::U64(_) => {
                let ty = if matches!(c, Column::F64(_)) {
                    "f64"
                } else {
                    "u64"
                };
                let bytes = PyBytes::new(py, &c.le_bytes().unwrap_or_default());
                (ty, bytes).into_pyobject(py)?.into_any()
            }
            Column::Names { codes, names } => {
                let b: Vec<u8> = codes.iter().flat_map(|x| x.to_le_bytes()).collect();
                ("names", PyBytes::new(py, &b), names.clone())
                    .into_pyobject(py)?
                    .into_any()
            }
        };
        d.set_item(name, v)?;
    }
    Ok(d)
}

fn figures_dict<'py>(py: Python<'py>, run: &PointRun) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for (name, col) in columns::figures(&run.result.summary, &run.offered_bps) {
        let items = col
            .iter()
            .map(|v| -> PyResult<Bound<'py, PyAny>> {
                Ok(match v {
                    Value::Str(s) => PyString::new(py, s).into_any(),
                    Value::Int(n) => n.into_pyobject(py)?.into_any(),
                    Value::Num(x) => PyFloat::new(py, *x).into_any(),
                    Value::Missing => py.None().into_bound(py),
                })
            })
            .collect::<PyResult<Vec<_>>>()?;
        d.set_item(name, PyList::new(py, items)?)?;
    }
    Ok(d)
}

/// The result of one run.
#[pyclass(frozen, module = "linkshare._native")]
struct NativeResult {
    run: PointRun,
}

#[pymethods]
impl NativeResult {
    /// `summary.json` as text.
    fn summary_json(&self) -> PyResult<String> {
        linkshare_report::summary_json(&self.run.result)
            .map_err(|e| PyException::new_err(e.to_string()))
    }
    /// Per-class and per-flow figures: `{column: [values]}`.
    fn figures<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        figures_dict(py, &self.run)
    }
    /// The time series as columns.
    fn timeseries<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let cols = py.allow_threads(|| columns::timeseries(&self.run.result));
        columns_dict(py, cols)
    }
    /// The RTT probes as columns.
    fn rtt<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        columns_dict(py, columns::rtt(&self.run.result))
    }
    /// Write the report (`summary.json`, `timeseries.csv`, plots, `report.html`) into `dir`.
    fn write_report(&self, py: Python<'_>, dir: PathBuf) -> PyResult<Vec<String>> {
        let files = py
            .allow_threads(|| linkshare_report::write_all(&self.run.result, &dir))
            .map_err(|e| PyException::new_err(format!("{}: {e}", dir.display())))?;
        Ok(files.iter().map(|p| p.display().to_string()).collect())
    }
}

/// Run a scenario with keys set and a seed; the GIL is released during the run.
#[pyfunction]
#[pyo3(signature = (text, origin, base_dir, default_name, edits, seed=None))]
fn run(
    py: Python<'_>,
    text: String,
    origin: String,
    base_dir: PathBuf,
    default_name: String,
    edits: Vec<(String, Option<Bound<'_, PyAny>>)>,
    seed: Option<u64>,
) -> PyResult<NativeResult> {
    let edits = edits_of(edits)?;
    let src = source(text, origin, base_dir, default_name);
    let run = py
        .allow_threads(|| point::run(&src, &edits, seed))
        .map_err(point_error)?;
    Ok(NativeResult { run })
}

/// Run a scenario and return only its figures (a sweep point).
#[pyfunction]
#[pyo3(signature = (text, origin, base_dir, default_name, edits, seed=None))]
fn run_figures<'py>(
    py: Python<'py>,
    text: String,
    origin: String,
    base_dir: PathBuf,
    default_name: String,
    edits: Vec<(String, Option<Bound<'py, PyAny>>)>,
    seed: Option<u64>,
) -> PyResult<(Bound<'py, PyDict>, u64)> {
    let edits = edits_of(edits)?;
    let src = source(text, origin, base_dir, default_name);
    let run = py
        .allow_threads(|| point::run(&src, &edits, seed))
        .map_err(point_error)?;
    Ok((figures_dict(py, &run)?, run.result.summary.seed))
}

/// `(axis names, [(labels, values, edits)])` of the scenario's own `[sweep]`.
#[pyfunction]
#[allow(clippy::type_complexity)]
fn sweep_points<'py>(
    py: Python<'py>,
    text: String,
    origin: String,
    base_dir: PathBuf,
    default_name: String,
) -> PyResult<(Vec<String>, Vec<Bound<'py, PyTuple>>)> {
    let src = source(text, origin, base_dir, default_name);
    let (axes, pts) = py
        .allow_threads(|| point::sweep_points(&src))
        .map_err(|e| point_error(PointError::Scenario(e)))?;
    let mut out = Vec::with_capacity(pts.len());
    for p in pts {
        let values = p
            .values
            .iter()
            .map(|v| from_toml(py, v))
            .collect::<PyResult<Vec<_>>>()?;
        let edits = p
            .edits
            .iter()
            .map(|(k, v)| -> PyResult<(String, Option<Bound<'py, PyAny>>)> {
                Ok((k.clone(), v.as_ref().map(|v| from_toml(py, v)).transpose()?))
            })
            .collect::<PyResult<Vec<_>>>()?;
        out.push(PyTuple::new(
            py,
            [
                p.labels.into_pyobject(py)?.into_any(),
                PyList::new(py, values)?.into_any(),
                PyList::new(py, edits)?.into_any(),
            ],
        )?);
    }
    Ok((axes, out))
}

/// Seconds that `n` runs of the scenario take in Rust alone (parse, check, run: what `linkshare
/// sim` does in process), the baseline of `scripts/bench-python`.
#[pyfunction]
fn time_runs(
    py: Python<'_>,
    text: String,
    origin: String,
    base_dir: PathBuf,
    default_name: String,
    n: u32,
) -> PyResult<f64> {
    let src = source(text, origin, base_dir, default_name);
    py.allow_threads(|| {
        let t = std::time::Instant::now();
        for _ in 0..n {
            point::run(&src, &[], None)?;
        }
        Ok(t.elapsed().as_secs_f64())
    })
    .map_err(point_error)
}

/// Check a policy: `(valid, diagnostics)`, warnings included.
#[pyfunction]
fn check_policy(py: Python<'_>, text: String, origin: String) -> (bool, Vec<DiagTuple>) {
    py.allow_threads(|| match Policy::parse(&text, &origin) {
        Ok(p) => (true, p.warnings().iter().map(diag_tuple).collect()),
        Err(e) => (false, e.diagnostics.iter().map(diag_tuple).collect()),
    })
}

/// A dict as TOML text (a scenario given as a dict).
#[pyfunction]
fn dict_to_toml(doc: &Bound<'_, PyDict>) -> PyResult<String> {
    match to_toml(doc.as_any())? {
        toml::Value::Table(t) => {
            linkshare_sim::overrides::to_text(&t).map_err(PyTypeError::new_err)
        }
        _ => Err(PyTypeError::new_err("a scenario dict must be a table")),
    }
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(run, m)?)?;
    m.add_function(wrap_pyfunction!(run_figures, m)?)?;
    m.add_function(wrap_pyfunction!(sweep_points, m)?)?;
    m.add_function(wrap_pyfunction!(check_policy, m)?)?;
    m.add_function(wrap_pyfunction!(time_runs, m)?)?;
    m.add_function(wrap_pyfunction!(dict_to_toml, m)?)?;
    m.add_class::<NativeResult>()?;
    m.add("NativeError", m.py().get_type::<NativeError>())?;
    Ok(())
}
