//! Layout: [`Figure`] → [`Scene`]. The only place that decides where things go.
//!
//! ```text
//!  ┌──────────────────────────── width ─────────────────────────────┐
//!  │                         title (×3)                              │
//!  │ y  ┌──────────────────────────────────────────────────────┐     │
//!  │ l  │ grid at y ticks / x ticks; data clipped to this area  │     │
//!  │ a  │                                                      │     │ height
//!  │ b  └──────────────────────────────────────────────────────┘     │
//!  │       x tick labels                                             │
//!  │                        x label                                  │
//!  ├─────────────────────────────────────────────────────────────────┤
//!  │  ── legend entries in columns, as many rows as needed           │ + legend rows
//!  └─────────────────────────────────────────────────────────────────┘
//! ```
//!
//! Text sizes come from the bitmap font's exact metrics ([`font::text_width`]), so margins fit
//! the labels in both backends. The legend sits below the axes and never covers data.

use super::font::{text_width, ASCENT, DESCENT};
use super::ticks::{format_tick, nice_ticks, sane_range};
use super::{downsample, Anchor, Figure, Item, LineStyle, Rect, Rgb, Scene};

/// Most points drawn per series (more are downsampled, see [`downsample`]).
pub const MAX_POINTS: usize = 2000;
/// Font scale of ticks, axis labels and the legend.
const TEXT: u32 = 2;
/// Font scale of the title.
const TITLE: u32 = 3;
const PAD: f64 = 16.0;
const GAP: f64 = 8.0;
const TICK_LEN: f64 = 6.0;
const LEGEND_ROW: f64 = 26.0;
const LEGEND_SWATCH: f64 = 28.0;
/// Legend entries shown before the rest are summarised as "… N more".
const LEGEND_MAX: usize = 24;
/// Longest series name shown in the legend.
const LEGEND_NAME_MAX: usize = 28;

/// Lay `fig` out.
pub fn layout(fig: &Figure) -> Scene {
    let width = fig.width.max(320) as f64;
    let base_height = fig.height.max(240) as f64;
    let series: Vec<(usize, Vec<(f64, f64)>)> = fig
        .series
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let finite: Vec<(f64, f64)> = s
                .points
                .iter()
                .copied()
                .filter(|(x, y)| x.is_finite() && y.is_finite())
                .collect();
            (i, downsample(&finite, MAX_POINTS))
        })
        .collect();
    let has_data = series.iter().any(|(_, p)| !p.is_empty());

    // Data ranges.
    let (mut x_lo, mut x_hi) = (f64::INFINITY, f64::NEG_INFINITY);
    let (mut y_lo, mut y_hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for (_, pts) in &series {
        for &(x, y) in pts {
            x_lo = x_lo.min(x);
            x_hi = x_hi.max(x);
            y_lo = y_lo.min(y);
            y_hi = y_hi.max(y);
        }
    }
    if let Some((a, b)) = fig.x_range {
        x_lo = a;
        x_hi = b;
    }
    if fig.y_from_zero {
        y_lo = y_lo.min(0.0);
        if !y_hi.is_finite() || y_hi <= 0.0 {
            y_hi = y_hi.max(1.0);
        }
    }
    let (x_lo, x_hi) = sane_range(x_lo, x_hi);
    let (y_lo, mut y_hi) = sane_range(y_lo, y_hi);
    // Headroom: a line at the data maximum (say the link rate) must not merge with the frame.
    y_hi += (y_hi - y_lo) * 0.04;

    // Y ticks first: their labels decide the left margin.
    let y_target = (((base_height - 160.0) / 50.0).floor() as usize).max(2);
    let y_ticks = nice_ticks(y_lo, y_hi, y_target);
    let y_step = tick_step(&y_ticks);
    let (y_min, y_max) = (y_ticks[0], y_ticks[y_ticks.len() - 1]);
    let y_labels: Vec<String> = y_ticks.iter().map(|v| format_tick(*v, y_step)).collect();
    let y_label_w = y_labels
        .iter()
        .map(|l| text_width(l, TEXT))
        .max()
        .unwrap_or(0) as f64;

    let text_h = ((ASCENT + DESCENT) * TEXT) as f64;
    let left = PAD + text_h + GAP + y_label_w + GAP / 2.0 + TICK_LEN;
    let right = PAD + 28.0;
    let top = PAD + (ASCENT * TITLE) as f64 + 2.0 * GAP;
    let bottom = TICK_LEN + GAP / 2.0 + text_h + GAP + text_h + PAD / 2.0;
    let plot = Rect {
        x: left.round(),
        y: top.round(),
        w: (width - right - left).round().max(40.0),
        h: (base_height - bottom - top).round().max(40.0),
    };

    let x_target = ((plot.w / 110.0).floor() as usize).max(2);
    let x_ticks_all = nice_ticks(x_lo, x_hi, x_target);
    let x_step = tick_step(&x_ticks_all);
    let eps = x_step * 1e-6;
    let x_ticks: Vec<f64> = x_ticks_all
        .into_iter()
        .filter(|v| *v >= x_lo - eps && *v <= x_hi + eps)
        .collect();

    let map_x = |x: f64| plot.x + (x - x_lo) / (x_hi - x_lo) * plot.w;
    let map_y = |y: f64| plot.bottom() - (y - y_min) / (y_max - y_min) * plot.h;

    // Legend geometry.
    let mut legend: Vec<(Option<usize>, String)> = fig
        .series
        .iter()
        .enumerate()
        .map(|(i, s)| (Some(i), shorten_middle(&s.name, LEGEND_NAME_MAX)))
        .collect();
    if legend.len() > LEGEND_MAX {
        let more = legend.len() - (LEGEND_MAX - 1);
        legend.truncate(LEGEND_MAX - 1);
        legend.push((None, format!("... {more} more")));
    }
    let name_w = legend
        .iter()
        .map(|(_, n)| text_width(n, TEXT))
        .max()
        .unwrap_or(0) as f64;
    let col_w = LEGEND_SWATCH + GAP + name_w + 2.0 * GAP;
    let avail = width - plot.x - PAD;
    let cols = ((avail / col_w).floor() as usize).clamp(1, legend.len().max(1));
    let rows = legend.len().div_ceil(cols);
    let legend_top = base_height;
    let height = if legend.is_empty() {
        base_height
    } else {
        base_height + rows as f64 * LEGEND_ROW + PAD / 2.0
    };

    let mut items = Vec::new();
    items.push(Item::Rect {
        rect: Rect {
            x: 0.0,
            y: 0.0,
            w: width,
            h: height,
        },
        fill: Some(Rgb::WHITE),
        stroke: None,
    });

    // Grid and ticks.
    for (v, label) in y_ticks.iter().zip(&y_labels) {
        let y = crisp(map_y(*v));
        items.push(hline(plot.x, plot.right(), y, Rgb::GRID));
        items.push(hline(plot.x - TICK_LEN, plot.x, y, Rgb::AXIS));
        items.push(text(
            plot.x - TICK_LEN - GAP / 2.0,
            (y + (ASCENT * TEXT) as f64 / 2.0).round(),
            label,
            TEXT,
            Anchor::End,
        ));
    }
    for v in &x_ticks {
        let x = crisp(map_x(*v));
        items.push(vline(x, plot.y, plot.bottom(), Rgb::GRID));
        items.push(vline(x, plot.bottom(), plot.bottom() + TICK_LEN, Rgb::AXIS));
        items.push(text(
            x.round(),
            plot.bottom() + TICK_LEN + GAP / 2.0 + (ASCENT * TEXT) as f64,
            &format_tick(*v, x_step),
            TEXT,
            Anchor::Middle,
        ));
    }
    items.push(Item::Rect {
        rect: Rect {
            x: plot.x + 0.5,
            y: plot.y + 0.5,
            w: plot.w - 1.0,
            h: plot.h - 1.0,
        },
        fill: None,
        stroke: Some(Rgb::AXIS),
    });

    // Data: reference (dashed, grey) lines first, so data draws over them.
    let mut order: Vec<&(usize, Vec<(f64, f64)>)> = series.iter().collect();
    order.sort_by_key(|(i, _)| (fig.series[*i].colour != Rgb::REFERENCE, *i));
    for (i, pts) in order {
        if pts.is_empty() {
            continue;
        }
        let s = &fig.series[*i];
        items.push(Item::Polyline {
            points: pts.iter().map(|&(x, y)| (map_x(x), map_y(y))).collect(),
            colour: s.colour,
            width: s.width,
            style: s.style,
            clipped: true,
        });
    }

    if !has_data {
        items.push(Item::Text {
            x: (plot.x + plot.w / 2.0).round(),
            y: (plot.y + plot.h / 2.0).round(),
            text: fig.empty_message.clone(),
            scale: TEXT,
            anchor: Anchor::Middle,
            colour: Rgb::AXIS,
            vertical: false,
        });
    }

    // Title and axis labels.
    // A title too wide for the canvas drops to the small font, then is cut.
    let title_room = width - 2.0 * PAD;
    let (title, title_scale) = if text_width(&fig.title, TITLE) as f64 <= title_room {
        (fig.title.clone(), TITLE)
    } else {
        let max_chars = ((title_room / (6 * TEXT) as f64).floor() as usize).max(4);
        (truncate(&fig.title, max_chars), TEXT)
    };
    items.push(Item::Text {
        x: (width / 2.0).round(),
        y: PAD + (ASCENT * TITLE) as f64,
        text: title,
        scale: title_scale,
        anchor: Anchor::Middle,
        colour: Rgb::TEXT,
        vertical: false,
    });
    items.push(text(
        (plot.x + plot.w / 2.0).round(),
        plot.bottom() + TICK_LEN + GAP / 2.0 + text_h + GAP + (ASCENT * TEXT) as f64,
        &fig.x_label,
        TEXT,
        Anchor::Middle,
    ));
    items.push(Item::Text {
        x: PAD + (ASCENT * TEXT) as f64,
        y: (plot.y + plot.h / 2.0).round(),
        text: fig.y_label.clone(),
        scale: TEXT,
        anchor: Anchor::Middle,
        colour: Rgb::TEXT,
        vertical: true,
    });

    // Legend.
    for (k, (index, name)) in legend.iter().enumerate() {
        let col = (k % cols) as f64;
        let row = (k / cols) as f64;
        let x = plot.x + col * col_w;
        let mid = legend_top + row * LEGEND_ROW + LEGEND_ROW / 2.0;
        let mut text_x = x;
        if let Some(i) = index {
            let s = &fig.series[*i];
            let y = crisp(mid);
            items.push(Item::Polyline {
                points: vec![(x, y), (x + LEGEND_SWATCH, y)],
                colour: s.colour,
                width: s.width.max(2.0) + 1.0,
                style: s.style,
                clipped: false,
            });
            text_x = x + LEGEND_SWATCH + GAP;
        }
        items.push(text(
            text_x,
            (mid + (ASCENT * TEXT) as f64 / 2.0).round(),
            name,
            TEXT,
            Anchor::Start,
        ));
    }

    Scene {
        id: fig.id.clone(),
        title: fig.title.clone(),
        width: width as u32,
        height: height as u32,
        background: Rgb::WHITE,
        plot,
        items,
    }
}

/// The step between consecutive ticks (1 when there is only one).
fn tick_step(ticks: &[f64]) -> f64 {
    if ticks.len() >= 2 {
        ticks[1] - ticks[0]
    } else {
        1.0
    }
}

/// The centre of the pixel row/column containing `v`, so 1-px lines are sharp.
fn crisp(v: f64) -> f64 {
    v.floor() + 0.5
}

fn hline(x0: f64, x1: f64, y: f64, colour: Rgb) -> Item {
    Item::Polyline {
        points: vec![(x0, y), (x1, y)],
        colour,
        width: 1.0,
        style: LineStyle::Solid,
        clipped: false,
    }
}

fn vline(x: f64, y0: f64, y1: f64, colour: Rgb) -> Item {
    Item::Polyline {
        points: vec![(x, y0), (x, y1)],
        colour,
        width: 1.0,
        style: LineStyle::Solid,
        clipped: false,
    }
}

fn text(x: f64, y: f64, s: &str, scale: u32, anchor: Anchor) -> Item {
    Item::Text {
        x,
        y,
        text: s.to_string(),
        scale,
        anchor,
        colour: Rgb::TEXT,
        vertical: false,
    }
}

/// `s` cut to `max` characters by replacing its middle with `...`, so that names differing only
/// at the end (`flow-01` … `flow-35`) stay distinguishable.
fn shorten_middle(s: &str, max: usize) -> String {
    let n = s.chars().count();
    if n <= max {
        return s.to_string();
    }
    let keep = max.saturating_sub(3);
    let head = keep.div_ceil(2);
    let tail = keep - head;
    let mut t: String = s.chars().take(head).collect();
    t.push_str("...");
    t.extend(s.chars().skip(n - tail));
    t
}

/// `s` cut to `max` characters, ending in `...` when cut.
fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(max.saturating_sub(3)).collect();
        t.push_str("...");
        t
    }
}

#[cfg(test)]
mod tests {
    use super::super::Series;
    use super::*;

    fn figure(n_series: usize) -> Figure {
        let mut fig = Figure::new("t", "Test", "time (s)", "rate (Mbit/s)");
        fig.x_range = Some((0.0, 10.0));
        for i in 0..n_series {
            let pts = (0..=100)
                .map(|k| (k as f64 / 10.0, (i + 1) as f64 * 1.7))
                .collect();
            fig.series.push(Series::data(i, format!("s{i}"), pts));
        }
        fig
    }

    fn texts(scene: &Scene) -> Vec<String> {
        scene
            .items
            .iter()
            .filter_map(|it| match it {
                Item::Text { text, .. } => Some(text.clone()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn data_stays_inside_plot_area_and_legend_below() {
        let scene = layout(&figure(3));
        let p = scene.plot;
        for it in &scene.items {
            if let Item::Polyline {
                points,
                clipped: true,
                ..
            } = it
            {
                for &(x, y) in points {
                    assert!(x >= p.x - 1e-9 && x <= p.right() + 1e-9, "x {x}");
                    assert!(y >= p.y - 1e-9 && y <= p.bottom() + 1e-9, "y {y}");
                }
            }
            if let Item::Text { text, y, .. } = it {
                if text.starts_with('s') && text.len() == 2 {
                    assert!(*y > p.bottom(), "legend entry {text} overlaps the plot");
                }
            }
        }
        assert!(scene.height > 480);
        let t = texts(&scene);
        for want in [
            "Test",
            "time (s)",
            "rate (Mbit/s)",
            "s0",
            "s1",
            "s2",
            "0",
            "10",
        ] {
            assert!(t.iter().any(|x| x == want), "missing text {want}: {t:?}");
        }
    }

    #[test]
    fn y_axis_reaches_a_nice_number_above_the_data() {
        // Max 5.1: ticks must end at the first nice number >= 5.1.
        let scene = layout(&figure(3));
        let t = texts(&scene);
        assert!(t.iter().any(|x| x == "6"), "{t:?}");
        assert!(!t.iter().any(|x| x == "5.1"));
    }

    #[test]
    fn long_names_keep_both_ends() {
        assert_eq!(shorten_middle("short", 28), "short");
        let a = shorten_middle("a-rather-long-flow-name-number-01-of-many", 28);
        let b = shorten_middle("a-rather-long-flow-name-number-02-of-many", 28);
        assert_eq!(a.chars().count(), 28);
        assert_eq!(a, "a-rather-long...r-01-of-many");
        assert_ne!(a, b);
    }

    #[test]
    fn empty_figure_says_so() {
        let mut fig = figure(0);
        fig.empty_message = "no RTT samples".into();
        let scene = layout(&fig);
        assert!(texts(&scene).iter().any(|x| x == "no RTT samples"));
        assert_eq!(scene.height, 480);
    }

    #[test]
    fn long_legends_are_summarised() {
        let scene = layout(&figure(45));
        let t = texts(&scene);
        assert!(t.iter().any(|x| x == "... 22 more"), "{t:?}");
        assert!(!t.iter().any(|x| x == "s44"));
    }
}
