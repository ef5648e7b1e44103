//! A small plotting layer: one layout, two drawing backends.
//!
//! A [`Figure`] describes *what* to plot (series of points, titles, axis labels with units).
//! [`layout::layout`] turns it into a [`Scene`]: a flat list of primitives (rectangles,
//! polylines, text) in pixel coordinates, with ticks at nice numbers, a grid, and a legend placed
//! below the plot area so it never covers data. The scene is then drawn by either backend:
//! [`svg::render`] writes SVG text, [`raster::render`] rasterises it (anti-aliased lines, the
//! built-in [`font`]) and [`raster::encode_png`] encodes it with the `png` crate. Both backends
//! draw the very same scene, so the SVG and PNG of a plot agree.

pub mod font;
pub mod layout;
pub mod raster;
pub mod svg;
pub mod ticks;

/// An sRGB colour.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Rgb(pub u8, pub u8, pub u8);

impl Rgb {
    pub const WHITE: Rgb = Rgb(255, 255, 255);
    pub const TEXT: Rgb = Rgb(34, 34, 34);
    pub const AXIS: Rgb = Rgb(96, 96, 96);
    pub const GRID: Rgb = Rgb(224, 224, 224);
    pub const REFERENCE: Rgb = Rgb(80, 80, 80);

    /// `#rrggbb`.
    pub fn hex(self) -> String {
        format!("#{:02x}{:02x}{:02x}", self.0, self.1, self.2)
    }
}

/// Okabe & Ito's colour-blind-safe palette (black left out: it is the reference-line colour;
/// yellow last: it is the weakest on white).
pub const PALETTE: [Rgb; 7] = [
    Rgb(0, 114, 178),   // blue
    Rgb(230, 159, 0),   // orange
    Rgb(0, 158, 115),   // bluish green
    Rgb(213, 94, 0),    // vermillion
    Rgb(86, 180, 233),  // sky blue
    Rgb(204, 121, 167), // reddish purple
    Rgb(200, 180, 0),   // yellow, darkened for contrast on white
];

/// How a line is stroked.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum LineStyle {
    Solid,
    Dashed,
    Dotted,
}

impl LineStyle {
    /// On/off lengths in units of the line width (`None` for solid).
    pub fn pattern(self) -> Option<(f64, f64)> {
        match self {
            LineStyle::Solid => None,
            LineStyle::Dashed => Some((4.0, 2.5)),
            LineStyle::Dotted => Some((1.0, 1.5)),
        }
    }
}

/// Colour and style of the `i`-th data series: the palette in order, then again dotted, then
/// dashed, so that up to 21 series stay distinguishable.
pub fn series_look(i: usize) -> (Rgb, LineStyle) {
    let colour = PALETTE[i % PALETTE.len()];
    let style = match (i / PALETTE.len()) % 3 {
        0 => LineStyle::Solid,
        1 => LineStyle::Dotted,
        _ => LineStyle::Dashed,
    };
    (colour, style)
}

/// One line on a plot.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    pub name: String,
    /// `(x, y)` in data units, in drawing order.
    pub points: Vec<(f64, f64)>,
    pub colour: Rgb,
    pub style: LineStyle,
    /// Stroke width in pixels.
    pub width: f64,
}

impl Series {
    /// The `index`-th data series, coloured from the palette.
    pub fn data(index: usize, name: impl Into<String>, points: Vec<(f64, f64)>) -> Series {
        let (colour, style) = series_look(index);
        Series {
            name: name.into(),
            points,
            colour,
            style,
            width: 2.0,
        }
    }

    /// A dashed reference line (e.g. the link rate).
    pub fn reference(name: impl Into<String>, points: Vec<(f64, f64)>) -> Series {
        Series {
            name: name.into(),
            points,
            colour: Rgb::REFERENCE,
            style: LineStyle::Dashed,
            width: 1.5,
        }
    }
}

/// What to plot.
#[derive(Clone, Debug, PartialEq)]
pub struct Figure {
    /// Used for element ids in SVG (must be unique within one HTML page) and file names.
    pub id: String,
    pub title: String,
    /// Axis labels, with units, e.g. `time (s)`, `throughput (Mbit/s)`.
    pub x_label: String,
    pub y_label: String,
    /// Fixed x range; `None` fits the data.
    pub x_range: Option<(f64, f64)>,
    /// Start the y axis at zero (rates, delays, queue lengths).
    pub y_from_zero: bool,
    pub series: Vec<Series>,
    /// Shown in the plot area when there is nothing to draw.
    pub empty_message: String,
    /// Canvas width, and height of the canvas without the legend (the legend adds rows below).
    pub width: u32,
    pub height: u32,
}

impl Figure {
    pub fn new(id: &str, title: &str, x_label: &str, y_label: &str) -> Figure {
        Figure {
            id: id.to_string(),
            title: title.to_string(),
            x_label: x_label.to_string(),
            y_label: y_label.to_string(),
            x_range: None,
            y_from_zero: true,
            series: Vec::new(),
            empty_message: "no data".to_string(),
            width: 960,
            height: 480,
        }
    }
}

/// A rectangle in pixels: top-left corner and size.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct Rect {
    pub x: f64,
    pub y: f64,
    pub w: f64,
    pub h: f64,
}

impl Rect {
    pub fn right(&self) -> f64 {
        self.x + self.w
    }
    pub fn bottom(&self) -> f64 {
        self.y + self.h
    }
}

/// Horizontal alignment of text relative to its anchor point.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Anchor {
    Start,
    Middle,
    End,
}

/// A drawing primitive in pixel coordinates.
#[derive(Clone, Debug, PartialEq)]
pub enum Item {
    Rect {
        rect: Rect,
        fill: Option<Rgb>,
        stroke: Option<Rgb>,
    },
    Polyline {
        points: Vec<(f64, f64)>,
        colour: Rgb,
        width: f64,
        style: LineStyle,
        /// Clip to the scene's plot area.
        clipped: bool,
    },
    /// Text whose baseline starts (or centres, or ends) at `(x, y)`; `vertical` text reads bottom
    /// to top (rotated −90° about the anchor). `scale` multiplies the 5×7 font.
    Text {
        x: f64,
        y: f64,
        text: String,
        scale: u32,
        anchor: Anchor,
        colour: Rgb,
        vertical: bool,
    },
}

/// A laid-out figure, ready for a backend.
#[derive(Clone, Debug, PartialEq)]
pub struct Scene {
    pub id: String,
    pub title: String,
    pub width: u32,
    pub height: u32,
    pub background: Rgb,
    /// The plot area; clipped polylines stay inside it.
    pub plot: Rect,
    pub items: Vec<Item>,
}

/// At most `max` points of `points`, chosen deterministically: when there are more, the points
/// are cut into `max / 2` consecutive buckets and each bucket keeps its minimum and maximum `y`
/// (in their original order), so peaks and dips survive. `max < 4` is treated as 4.
pub fn downsample(points: &[(f64, f64)], max: usize) -> Vec<(f64, f64)> {
    let max = max.max(4);
    if points.len() <= max {
        return points.to_vec();
    }
    let buckets = max / 2;
    let mut out = Vec::with_capacity(max);
    for b in 0..buckets {
        let start = b * points.len() / buckets;
        let end = (b + 1) * points.len() / buckets;
        let chunk = &points[start..end];
        if chunk.is_empty() {
            continue;
        }
        let mut lo = 0;
        let mut hi = 0;
        for (i, p) in chunk.iter().enumerate() {
            if p.1 < chunk[lo].1 {
                lo = i;
            }
            if p.1 > chunk[hi].1 {
                hi = i;
            }
        }
        let (first, second) = if lo <= hi { (lo, hi) } else { (hi, lo) };
        out.push(chunk[first]);
        if second != first {
            out.push(chunk[second]);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn downsample_bounds_and_keeps_extremes() {
        let pts: Vec<(f64, f64)> = (0..10_000)
            .map(|i| (i as f64, if i == 4321 { 1000.0 } else { (i % 7) as f64 }))
            .collect();
        let d = downsample(&pts, 2000);
        assert!(d.len() <= 2000);
        assert!(d.len() > 1000);
        assert!(d.contains(&(4321.0, 1000.0)));
        assert!(d.windows(2).all(|w| w[0].0 < w[1].0), "order kept");
        assert_eq!(d, downsample(&pts, 2000));
        let few = vec![(0.0, 1.0), (1.0, 2.0)];
        assert_eq!(downsample(&few, 2000), few);
    }

    #[test]
    fn looks_are_distinct_for_many_series() {
        let looks: Vec<_> = (0..21).map(series_look).collect();
        for a in 0..looks.len() {
            for b in a + 1..looks.len() {
                assert_ne!(looks[a], looks[b]);
            }
        }
    }
}
