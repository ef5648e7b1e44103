//! Raster backend: a [`Scene`] drawn into an RGB pixel buffer, encoded as PNG.
//!
//! * Lines are anti-aliased by coverage: a pixel's coverage is how far its centre lies inside the
//!   stroke (a capsule of the line's width around each segment), clamped to [0, 1]. Coverage is
//!   combined with `max` over a whole polyline before blending, so joints are not drawn twice.
//!   A 1-px line on a pixel centre (`n + 0.5`) covers exactly one row: grid lines stay sharp.
//! * Dashes are cut along the polyline's arc length, so patterns continue across vertices.
//! * Text uses the built-in 5×7 [`font`](super::font) at integer scale, without smoothing.
//!
//! All arithmetic is plain `f64`/integer code with no platform-dependent calls, so the same scene
//! gives the same bytes.

use std::io;

use super::font::{glyph, text_width, ADVANCE, ASCENT};
use super::{Anchor, Item, Rect, Rgb, Scene};

/// An RGB image, 8 bits per channel, rows top to bottom.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Canvas {
    pub width: u32,
    pub height: u32,
    pub data: Vec<u8>,
}

impl Canvas {
    pub fn new(width: u32, height: u32, background: Rgb) -> Canvas {
        let n = width as usize * height as usize;
        let mut data = Vec::with_capacity(n * 3);
        for _ in 0..n {
            data.extend_from_slice(&[background.0, background.1, background.2]);
        }
        Canvas {
            width,
            height,
            data,
        }
    }

    /// The colour at `(x, y)`, if inside.
    pub fn pixel(&self, x: u32, y: u32) -> Option<Rgb> {
        if x >= self.width || y >= self.height {
            return None;
        }
        let i = (y as usize * self.width as usize + x as usize) * 3;
        Some(Rgb(self.data[i], self.data[i + 1], self.data[i + 2]))
    }

    fn blend(&mut self, x: i64, y: i64, c: Rgb, alpha: f32) {
        if x < 0 || y < 0 || x >= self.width as i64 || y >= self.height as i64 || alpha <= 0.0 {
            return;
        }
        let i = (y as usize * self.width as usize + x as usize) * 3;
        let a = alpha.min(1.0);
        for (k, v) in [c.0, c.1, c.2].into_iter().enumerate() {
            let old = self.data[i + k] as f32;
            self.data[i + k] = (old + (v as f32 - old) * a).round() as u8;
        }
    }

    fn fill_rect(&mut self, r: Rect, c: Rgb) {
        let x0 = r.x.round().max(0.0) as i64;
        let y0 = r.y.round().max(0.0) as i64;
        let x1 = r.right().round().min(self.width as f64) as i64;
        let y1 = r.bottom().round().min(self.height as f64) as i64;
        for y in y0..y1 {
            for x in x0..x1 {
                self.blend(x, y, c, 1.0);
            }
        }
    }

    /// Stroke the polyline `points` with round joins and caps, clipped to `clip`.
    fn stroke(&mut self, points: &[(f64, f64)], colour: Rgb, width: f64, clip: Rect) {
        if points.is_empty() {
            return;
        }
        let half = width / 2.0;
        let reach = half + 1.0;
        let (mut bx0, mut by0, mut bx1, mut by1) = (f64::MAX, f64::MAX, f64::MIN, f64::MIN);
        for &(x, y) in points {
            bx0 = bx0.min(x - reach);
            by0 = by0.min(y - reach);
            bx1 = bx1.max(x + reach);
            by1 = by1.max(y + reach);
        }
        let cx0 = clip.x.max(0.0);
        let cy0 = clip.y.max(0.0);
        let cx1 = clip.right().min(self.width as f64);
        let cy1 = clip.bottom().min(self.height as f64);
        let x0 = bx0.max(cx0).floor() as i64;
        let y0 = by0.max(cy0).floor() as i64;
        let x1 = bx1.min(cx1).ceil() as i64;
        let y1 = by1.min(cy1).ceil() as i64;
        if x1 <= x0 || y1 <= y0 {
            return;
        }
        let mw = (x1 - x0) as usize;
        let mut mask = vec![0f32; mw * (y1 - y0) as usize];
        let segments: Vec<((f64, f64), (f64, f64))> = if points.len() == 1 {
            vec![(points[0], points[0])]
        } else {
            points.windows(2).map(|w| (w[0], w[1])).collect()
        };
        for (a, b) in segments {
            let sx0 = ((a.0.min(b.0) - reach).floor() as i64).max(x0);
            let sx1 = ((a.0.max(b.0) + reach).ceil() as i64).min(x1);
            let sy0 = ((a.1.min(b.1) - reach).floor() as i64).max(y0);
            let sy1 = ((a.1.max(b.1) + reach).ceil() as i64).min(y1);
            for py in sy0..sy1 {
                for px in sx0..sx1 {
                    let d = distance_to_segment((px as f64 + 0.5, py as f64 + 0.5), a, b);
                    let cov = (half + 0.5 - d).clamp(0.0, 1.0) as f32;
                    let m = &mut mask[(py - y0) as usize * mw + (px - x0) as usize];
                    if cov > *m {
                        *m = cov;
                    }
                }
            }
        }
        for py in y0..y1 {
            for px in x0..x1 {
                let cov = mask[(py - y0) as usize * mw + (px - x0) as usize];
                if cov > 0.0 {
                    self.blend(px, py, colour, cov);
                }
            }
        }
    }

    fn text(&mut self, item: (f64, f64, &str, u32, Anchor, Rgb, bool)) {
        let (x, y, text, scale, anchor, colour, vertical) = item;
        let s = scale.max(1) as i64;
        let w = text_width(text, scale) as i64;
        let start = match anchor {
            Anchor::Start => 0,
            Anchor::Middle => -w / 2,
            Anchor::End => -w,
        };
        let ax = x.round() as i64;
        let ay = y.round() as i64;
        for (ci, ch) in text.chars().enumerate() {
            let rows = glyph(ch);
            for (row, bits) in rows.iter().enumerate() {
                for col in 0..5i64 {
                    if bits & (0x10 >> col) == 0 {
                        continue;
                    }
                    for du in 0..s {
                        for dv in 0..s {
                            // (u, v): along the text and down from the baseline, in pixels.
                            let u = start + (ci as i64 * ADVANCE as i64 + col) * s + du;
                            let v = (row as i64 - ASCENT as i64) * s + dv;
                            let (px, py) = if vertical {
                                (ax + v, ay - u - 1)
                            } else {
                                (ax + u, ay + v)
                            };
                            self.blend(px, py, colour, 1.0);
                        }
                    }
                }
            }
        }
    }
}

/// Draw `scene` into a new canvas.
pub fn render(scene: &Scene) -> Canvas {
    let mut canvas = Canvas::new(scene.width, scene.height, scene.background);
    let full = Rect {
        x: 0.0,
        y: 0.0,
        w: scene.width as f64,
        h: scene.height as f64,
    };
    for item in &scene.items {
        match item {
            Item::Rect { rect, fill, stroke } => {
                if let Some(c) = fill {
                    canvas.fill_rect(*rect, *c);
                }
                if let Some(c) = stroke {
                    let r = *rect;
                    let pts = [
                        (r.x, r.y),
                        (r.right(), r.y),
                        (r.right(), r.bottom()),
                        (r.x, r.bottom()),
                        (r.x, r.y),
                    ];
                    canvas.stroke(&pts, *c, 1.0, full);
                }
            }
            Item::Polyline {
                points,
                colour,
                width,
                style,
                clipped,
            } => {
                let clip = if *clipped { scene.plot } else { full };
                match style.pattern() {
                    None => canvas.stroke(points, *colour, *width, clip),
                    Some((on, off)) => {
                        for piece in dashes(points, on * width, off * width) {
                            canvas.stroke(&piece, *colour, *width, clip);
                        }
                    }
                }
            }
            Item::Text {
                x,
                y,
                text,
                scale,
                anchor,
                colour,
                vertical,
            } => canvas.text((*x, *y, text, *scale, *anchor, *colour, *vertical)),
        }
    }
    canvas
}

/// Encode `canvas` as an 8-bit RGB PNG.
pub fn encode_png(canvas: &Canvas) -> io::Result<Vec<u8>> {
    let mut out = Vec::new();
    {
        let mut encoder = png::Encoder::new(&mut out, canvas.width, canvas.height);
        encoder.set_color(png::ColorType::Rgb);
        encoder.set_depth(png::BitDepth::Eight);
        let mut writer = encoder.write_header().map_err(io::Error::other)?;
        writer
            .write_image_data(&canvas.data)
            .map_err(io::Error::other)?;
        writer.finish().map_err(io::Error::other)?;
    }
    Ok(out)
}

/// Distance from `p` to the segment `a`–`b`.
fn distance_to_segment(p: (f64, f64), a: (f64, f64), b: (f64, f64)) -> f64 {
    let (dx, dy) = (b.0 - a.0, b.1 - a.1);
    let len2 = dx * dx + dy * dy;
    let t = if len2 > 0.0 {
        (((p.0 - a.0) * dx + (p.1 - a.1) * dy) / len2).clamp(0.0, 1.0)
    } else {
        0.0
    };
    let (qx, qy) = (a.0 + t * dx, a.1 + t * dy);
    ((p.0 - qx).powi(2) + (p.1 - qy).powi(2)).sqrt()
}

/// Cut a polyline into its "on" pieces for a dash pattern of `on` then `off` pixels.
fn dashes(points: &[(f64, f64)], on: f64, off: f64) -> Vec<Vec<(f64, f64)>> {
    let mut pieces = Vec::new();
    if points.len() < 2 || on <= 0.0 {
        return pieces;
    }
    let off = off.max(0.0);
    let mut drawing = true;
    let mut left = on;
    let mut current = vec![points[0]];
    for w in points.windows(2) {
        let (a, b) = (w[0], w[1]);
        let len = ((b.0 - a.0).powi(2) + (b.1 - a.1).powi(2)).sqrt();
        let mut pos = 0.0;
        while len - pos > left {
            pos += left;
            let t = pos / len;
            let p = (a.0 + t * (b.0 - a.0), a.1 + t * (b.1 - a.1));
            if drawing {
                push_distinct(&mut current, p);
                pieces.push(std::mem::take(&mut current));
                left = off;
            } else {
                current = vec![p];
                left = on;
            }
            drawing = !drawing;
            if left <= 0.0 {
                // A zero-length gap: the next dash starts right here.
                left = if drawing { on } else { off.max(1e-9) };
            }
        }
        left -= len - pos;
        if drawing {
            push_distinct(&mut current, b);
        }
    }
    if drawing && current.len() >= 2 {
        pieces.push(current);
    }
    pieces
}

fn push_distinct(points: &mut Vec<(f64, f64)>, p: (f64, f64)) {
    if points.last() != Some(&p) {
        points.push(p);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crisp_one_pixel_line_covers_one_row() {
        let mut c = Canvas::new(10, 10, Rgb::WHITE);
        let full = Rect {
            x: 0.0,
            y: 0.0,
            w: 10.0,
            h: 10.0,
        };
        c.stroke(&[(0.0, 4.5), (10.0, 4.5)], Rgb(0, 0, 0), 1.0, full);
        assert_eq!(c.pixel(5, 4), Some(Rgb(0, 0, 0)));
        assert_eq!(c.pixel(5, 3), Some(Rgb::WHITE));
        assert_eq!(c.pixel(5, 5), Some(Rgb::WHITE));
    }

    #[test]
    fn clipping_keeps_lines_inside() {
        let mut c = Canvas::new(20, 20, Rgb::WHITE);
        let clip = Rect {
            x: 5.0,
            y: 5.0,
            w: 10.0,
            h: 10.0,
        };
        c.stroke(&[(0.0, 10.5), (20.0, 10.5)], Rgb(0, 0, 0), 3.0, clip);
        assert_eq!(c.pixel(2, 10), Some(Rgb::WHITE));
        assert_eq!(c.pixel(10, 10), Some(Rgb(0, 0, 0)));
    }

    #[test]
    fn dash_pattern_alternates() {
        let pieces = dashes(&[(0.0, 0.0), (10.0, 0.0), (10.0, 10.0)], 4.0, 2.0);
        // 20 px of path, period 6: dashes at [0,4], [6,10], [12,16], [18,20].
        assert_eq!(pieces.len(), 4);
        assert_eq!(pieces[0], vec![(0.0, 0.0), (4.0, 0.0)]);
        assert_eq!(pieces[1], vec![(6.0, 0.0), (10.0, 0.0)]);
        assert_eq!(pieces[2], vec![(10.0, 2.0), (10.0, 6.0)]);
        assert_eq!(pieces[3], vec![(10.0, 8.0), (10.0, 10.0)]);
    }

    #[test]
    fn text_draws_pixels_where_the_layout_expects() {
        let mut c = Canvas::new(40, 20, Rgb::WHITE);
        c.text((2.0, 12.0, "I", 1, Anchor::Start, Rgb(0, 0, 0), false));
        // 'I' row 0 is 0x0E: columns 1..=3 at the top row (baseline 12 − 7 = 5).
        assert_eq!(c.pixel(3, 5), Some(Rgb(0, 0, 0)));
        assert_eq!(c.pixel(2, 5), Some(Rgb::WHITE));
        assert_eq!(
            c.pixel(3, 12),
            Some(Rgb::WHITE),
            "nothing below the baseline"
        );
    }
}
