//! SVG backend: a [`Scene`] as SVG text.
//!
//! Coordinates are printed with at most two decimals, so the text is deterministic. Text uses a
//! monospace font at 10 px per font-scale unit, whose 0.6 em advance matches the bitmap font's
//! 6-pixel cell the layout measured with. A standalone file carries the SVG namespace; the copy
//! inlined into HTML omits it (HTML5 does not need it), which keeps the page free of URLs.

use std::fmt::Write;

use super::super::numfmt::fixed;
use super::{Anchor, Item, LineStyle, Scene};

/// Render `scene`. `standalone` adds the XML namespace needed by a separate `.svg` file.
pub fn render(scene: &Scene, standalone: bool) -> String {
    let mut out = String::new();
    let id = sanitize_id(&scene.id);
    let ns = if standalone {
        " xmlns=\"http://www.w3.org/2000/svg\""
    } else {
        ""
    };
    let _ = writeln!(
        out,
        "<svg{ns} width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" role=\"img\" \
         aria-labelledby=\"{id}-title\" font-family=\"DejaVu Sans Mono, Menlo, Consolas, monospace\">",
        w = scene.width,
        h = scene.height,
    );
    let _ = writeln!(
        out,
        "<title id=\"{id}-title\">{}</title>",
        escape(&scene.title)
    );
    let p = scene.plot;
    let _ = writeln!(
        out,
        "<defs><clipPath id=\"{id}-clip\"><rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"/></clipPath></defs>",
        n(p.x),
        n(p.y),
        n(p.w),
        n(p.h)
    );
    for item in &scene.items {
        match item {
            Item::Rect { rect, fill, stroke } => {
                let fill = fill.map_or("none".to_string(), |c| c.hex());
                let stroke = stroke.map_or(String::new(), |c| format!(" stroke=\"{}\"", c.hex()));
                let _ = writeln!(
                    out,
                    "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{fill}\"{stroke}/>",
                    n(rect.x),
                    n(rect.y),
                    n(rect.w),
                    n(rect.h)
                );
            }
            Item::Polyline {
                points,
                colour,
                width,
                style,
                clipped,
            } => {
                if points.is_empty() {
                    continue;
                }
                let mut pts = String::with_capacity(points.len() * 14);
                for (k, (x, y)) in points.iter().enumerate() {
                    if k > 0 {
                        pts.push(' ');
                    }
                    pts.push_str(&n(*x));
                    pts.push(',');
                    pts.push_str(&n(*y));
                }
                let dash = match style.pattern() {
                    Some((on, off)) => {
                        format!(" stroke-dasharray=\"{} {}\"", n(on * width), n(off * width))
                    }
                    None => String::new(),
                };
                let cap = if *style == LineStyle::Dotted {
                    "butt"
                } else {
                    "round"
                };
                let clip = if *clipped {
                    format!(" clip-path=\"url(#{id}-clip)\"")
                } else {
                    String::new()
                };
                let _ = writeln!(
                    out,
                    "<polyline points=\"{pts}\" fill=\"none\" stroke=\"{}\" stroke-width=\"{}\" \
                     stroke-linejoin=\"round\" stroke-linecap=\"{cap}\"{dash}{clip}/>",
                    colour.hex(),
                    n(*width)
                );
            }
            Item::Text {
                x,
                y,
                text,
                scale,
                anchor,
                colour,
                vertical,
            } => {
                let anchor = match anchor {
                    Anchor::Start => "start",
                    Anchor::Middle => "middle",
                    Anchor::End => "end",
                };
                let rotate = if *vertical {
                    format!(" transform=\"rotate(-90 {} {})\"", n(*x), n(*y))
                } else {
                    String::new()
                };
                let _ = writeln!(
                    out,
                    "<text x=\"{}\" y=\"{}\" font-size=\"{}\" text-anchor=\"{anchor}\" fill=\"{}\"{rotate}>{}</text>",
                    n(*x),
                    n(*y),
                    10 * scale,
                    colour.hex(),
                    escape(text)
                );
            }
        }
    }
    out.push_str("</svg>\n");
    out
}

/// A coordinate with at most two decimals.
fn n(v: f64) -> String {
    fixed(v, 2)
}

/// Escape text for XML/HTML content and attribute values.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if (c as u32) < 0x20 && c != '\n' && c != '\t' => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// Keep `[A-Za-z0-9_-]` for element ids.
fn sanitize_id(s: &str) -> String {
    let id: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if id.is_empty() {
        "fig".to_string()
    } else {
        id
    }
}

#[cfg(test)]
mod tests {
    use super::super::{layout::layout, Figure, Series};
    use super::*;

    #[test]
    fn svg_is_balanced_and_escaped() {
        let mut fig = Figure::new("a b", "Rates <&>", "time (s)", "rate (Mbit/s)");
        fig.series
            .push(Series::data(0, "x\"&y", vec![(0.0, 1.0), (1.0, 2.0)]));
        fig.series
            .push(Series::reference("link", vec![(0.0, 3.0), (1.0, 3.0)]));
        let svg = render(&layout(&fig), true);
        assert!(svg.starts_with("<svg xmlns="));
        assert!(svg.ends_with("</svg>\n"));
        assert!(svg.contains("Rates &lt;&amp;&gt;"));
        assert!(svg.contains("x&quot;&amp;y"));
        assert!(svg.contains("clip-path=\"url(#a_b-clip)\""));
        assert!(svg.contains("stroke-dasharray"));
        assert_eq!(svg.matches("<text").count(), svg.matches("</text>").count());
        let inline = render(&layout(&fig), false);
        assert!(!inline.contains("http"));
    }
}
