//! # linkshare-report
//!
//! The result model of a run and the files written from it: `summary.json`, `timeseries.csv`,
//! plots (SVG and PNG), an offline `report.html` gathering them, and a table for the terminal.
//!
//! Principles:
//! * **Plain data in, files out**: the crate knows the [`model`] (a run's summary and time series,
//!   whoever produced it — the simulator `linkshare-sim` or the namespace lab `linkshare-lab`) and
//!   nothing of the engines; it depends on no other linkshare crate, so both producers and the
//!   comparison (`linkshare_sim::compare`) can use it without a cycle.
//! * **Deterministic**: every file is byte-identical for identical input (fixed float formatting,
//!   sorted maps and rows, no timestamps). The formats are documented in `docs/outputs.md`.
//! * **Offline**: SVG and PNG are drawn here (`plot`), the HTML inlines them: no script, no URL.
//!
//! ```text
//! SimResult ─┬─ summary::summary_json ─────────────▶ summary.json
//!            ├─ csv::timeseries_csv ───────────────▶ timeseries.csv
//!            ├─ fct::fct_csv (arriving flows) ─────▶ fct.csv
//!            ├─ charts::charts ─▶ Figure ─ plot::layout ─▶ Scene ─┬─ plot::svg ───▶ *.svg
//!            │                                                    └─ plot::raster ▶ *.png
//!            ├─ html::render_html (inlines the SVGs) ─────────────────────────────▶ report.html
//!            └─ table::render_table ───────────────────────────────────────────────▶ terminal
//! ```

mod charts;
mod csv;
pub mod fct;
mod groups;
mod html;
pub mod model;
pub mod numfmt;
mod order;
pub mod plot;
mod summary;
mod table;

use std::io;
use std::path::{Path, PathBuf};

use crate::model::SimResult;

pub use charts::{charts, Chart};
pub use csv::{
    scheduler_csv, timeseries_csv, write_timeseries_csv, HEADER as TIMESERIES_HEADER,
    SCHEDULER_HEADER,
};
pub use order::class_tree;
pub use summary::{summary_json, write_summary_json};
pub use table::{render_table, Align, TextTable};

/// Extra context for the report that the result itself does not carry.
#[derive(Clone, Debug, Default)]
pub struct ReportOptions {
    /// The command line that produced the run, shown in the HTML footer.
    pub command: Option<String>,
}

/// Write every output of `result` into `dir` (created if missing): `summary.json`,
/// `timeseries.csv`, an SVG and a PNG per plot, and `report.html`. Returns the files written, in
/// that order.
pub fn write_all(result: &SimResult, dir: &Path) -> io::Result<Vec<PathBuf>> {
    write_all_with(result, dir, &ReportOptions::default())
}

/// [`write_all`] with [`ReportOptions`].
pub fn write_all_with(
    result: &SimResult,
    dir: &Path,
    options: &ReportOptions,
) -> io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let mut written = Vec::new();

    let path = dir.join("summary.json");
    write_summary_json(result, &path)?;
    written.push(path);

    let path = dir.join("timeseries.csv");
    write_timeseries_csv(result, &path)?;
    written.push(path);

    let path = dir.join("rtt.csv");
    std::fs::write(&path, csv::rtt_csv(result))?;
    written.push(path);

    if !result.fct.is_empty() {
        let path = dir.join("fct.csv");
        std::fs::write(&path, fct::fct_csv(&result.fct))?;
        written.push(path);
    }

    if !result.class_states.is_empty() {
        let path = dir.join("scheduler.csv");
        std::fs::write(&path, csv::scheduler_csv(result))?;
        written.push(path);
    }

    let charts = charts(result);
    let mut inline = Vec::with_capacity(charts.len());
    for chart in &charts {
        let scene = plot::layout::layout(&chart.figure);
        let path = dir.join(format!("{}.svg", chart.stem));
        std::fs::write(&path, plot::svg::render(&scene, true))?;
        written.push(path);
        let png = plot::raster::encode_png(&plot::raster::render(&scene))?;
        let path = dir.join(format!("{}.png", chart.stem));
        std::fs::write(&path, png)?;
        written.push(path);
        inline.push(plot::svg::render(&scene, false));
    }

    let entries: Vec<html::PlotEntry> = charts
        .iter()
        .zip(&inline)
        .map(|(c, svg)| html::PlotEntry {
            stem: c.stem,
            title: &c.figure.title,
            caption: &c.caption,
            inline_svg: svg,
        })
        .collect();
    let path = dir.join("report.html");
    std::fs::write(
        &path,
        html::render_html(result, &entries, options.command.as_deref()),
    )?;
    written.push(path);
    Ok(written)
}
