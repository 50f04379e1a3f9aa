//! Hand-written SVG charts: grouped bars and lines, with labelled axes, a legend, one colour per
//! proxy (the same in every chart) and notes for missing data. No plotting crate.

use std::fmt::Write;

pub const WIDTH: f64 = 960.0;
pub const HEIGHT: f64 = 460.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 190.0;
const TOP: f64 = 50.0;
const BOTTOM: f64 = 90.0;
/// Height of the plotting area in pixels.
pub const PLOT_H: f64 = HEIGHT - TOP - BOTTOM;
const PLOT_W: f64 = WIDTH - LEFT - RIGHT;
/// Room above the highest value for its label: the value axis covers at least max x this.
pub const HEADROOM: f64 = 1.1;

/// One proxy's values, one per group (`None`: missing, drawn as "–").
#[derive(Debug, Clone)]
pub struct Series {
    pub name: String,
    pub values: Vec<Option<f64>>,
}

/// Grouped bars: groups along x, one bar per series in each group.
#[derive(Debug, Clone)]
pub struct BarChart {
    pub title: String,
    pub y_label: String,
    pub groups: Vec<String>,
    pub series: Vec<Series>,
    /// A dashed horizontal line at this value, with its label.
    pub reference: Option<(f64, String)>,
    pub value_fmt: fn(f64) -> String,
    pub notes: Vec<String>,
}

/// One proxy's line through (x, y) points.
#[derive(Debug, Clone)]
pub struct Line {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

#[derive(Debug, Clone)]
pub struct LineChart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub lines: Vec<Line>,
    pub x_fmt: fn(f64) -> String,
    pub notes: Vec<String>,
}

/// A linear axis from 0 to `top`, a "nice" value (1, 2 or 5 x 10^k steps) at or above the data.
#[derive(Debug, Clone, PartialEq)]
pub struct Scale {
    pub top: f64,
    pub ticks: Vec<f64>,
}

impl Scale {
    /// A scale from 0 covering `max` in about five steps; `[0, 1]` when `max` is not positive.
    pub fn new(max: f64) -> Self {
        let max = if max.is_finite() && max > 0.0 { max } else { 1.0 };
        let raw = max / 5.0;
        let magnitude = 10f64.powf(raw.log10().floor());
        let step = [1.0, 2.0, 5.0, 10.0].iter().map(|m| m * magnitude).find(|s| *s >= raw).unwrap_or(10.0 * magnitude);
        let steps = (max / step - 1e-9).ceil().max(1.0) as usize;
        Self { top: step * steps as f64, ticks: (0..=steps).map(|i| step * i as f64).collect() }
    }

    /// Pixel offset of `v` from the bottom of an axis `length` pixels long.
    pub fn px(&self, v: f64, length: f64) -> f64 {
        (v / self.top).clamp(0.0, 1.0) * length
    }
}

/// The colour of a proxy, the same in every chart.
pub fn colour(proxy: &str) -> &'static str {
    match proxy {
        "gateway-uring" | "gateway" | "gateway-on" => "#1f77b4",
        "gateway-epoll" => "#17becf",
        "gateway-uring-log" => "#9467bd",
        "gateway-baseline" => "#8c564b",
        "gateway-off" => "#9ecae1",
        "nginx" => "#2ca02c",
        "haproxy" => "#d62728",
        "direct" => "#7f7f7f",
        other => {
            let spare = ["#ff7f0e", "#e377c2", "#bcbd22", "#393b79"];
            let hash = other.bytes().fold(0usize, |h, b| h.wrapping_mul(31).wrapping_add(b as usize));
            spare.get(hash % spare.len()).copied().unwrap_or("#000000")
        }
    }
}

/// A chart holding only its title and why there is nothing to draw.
pub fn no_data(title: &str, why: &str) -> String {
    let mut svg = open(title);
    let _ = writeln!(
        svg,
        r##"<text x="{}" y="{}" text-anchor="middle" font-size="16" fill="#555">No data: {}</text>"##,
        WIDTH / 2.0,
        HEIGHT / 2.0,
        esc(why)
    );
    svg + "</svg>\n"
}

pub fn bar_chart(c: &BarChart) -> String {
    let values = c.series.iter().flat_map(|s| s.values.iter().flatten().copied());
    let max = values.chain(c.reference.as_ref().map(|r| r.0)).fold(0.0, f64::max);
    let scale = Scale::new(max * HEADROOM);
    let mut svg = open(&c.title);
    y_axis(&mut svg, &scale, &c.y_label, c.value_fmt);
    let group_w = PLOT_W / c.groups.len().max(1) as f64;
    let bar_w = (group_w * 0.8 / c.series.len().max(1) as f64).min(60.0);
    let base = TOP + PLOT_H;
    for (g, group) in c.groups.iter().enumerate() {
        let start = LEFT + g as f64 * group_w + (group_w - bar_w * c.series.len() as f64) / 2.0;
        let _ = writeln!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="13">{}</text>"#,
            LEFT + (g as f64 + 0.5) * group_w,
            base + 20.0,
            esc(group)
        );
        for (i, s) in c.series.iter().enumerate() {
            let x = start + i as f64 * bar_w;
            let cx = x + bar_w / 2.0;
            let Some(v) = s.values.get(g).copied().flatten() else {
                let _ = writeln!(
                    svg,
                    r##"<text x="{cx:.1}" y="{:.1}" text-anchor="middle" font-size="11" fill="#888">–</text>"##,
                    base - 4.0
                );
                continue;
            };
            let h = scale.px(v, PLOT_H);
            let _ = writeln!(
                svg,
                r#"<rect x="{x:.1}" y="{:.1}" width="{:.1}" height="{h:.1}" fill="{}"><title>{}: {}</title></rect>"#,
                base - h,
                (bar_w - 2.0).max(1.0),
                colour(&s.name),
                esc(&s.name),
                esc(&(c.value_fmt)(v))
            );
            let label = esc(&(c.value_fmt)(v));
            if bar_w >= 30.0 {
                let _ = writeln!(
                    svg,
                    r#"<text x="{cx:.1}" y="{:.1}" text-anchor="middle" font-size="10">{label}</text>"#,
                    base - h - 3.0
                );
            } else {
                let (tx, ty) = (cx + 3.0, base - h - 3.0);
                let _ = writeln!(
                    svg,
                    r#"<text x="{tx:.1}" y="{ty:.1}" font-size="10" transform="rotate(-90 {tx:.1} {ty:.1})">{label}</text>"#
                );
            }
        }
    }
    if let Some((v, label)) = &c.reference {
        let y = base - scale.px(*v, PLOT_H);
        let _ = writeln!(
            svg,
            r##"<line x1="{LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#333" stroke-width="1.5" stroke-dasharray="6 4"/>"##,
            LEFT + PLOT_W
        );
        let _ = writeln!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" font-size="11">{}</text>"#,
            LEFT + PLOT_W + 4.0,
            y + 4.0,
            esc(label)
        );
    }
    legend(&mut svg, c.series.iter().map(|s| s.name.as_str()));
    notes(&mut svg, &c.notes);
    svg + "</svg>\n"
}

pub fn line_chart(c: &LineChart) -> String {
    let points = || c.lines.iter().flat_map(|l| l.points.iter().copied());
    let y_scale = Scale::new(points().map(|p| p.1).fold(0.0, f64::max) * HEADROOM);
    let x_scale = Scale::new(points().map(|p| p.0).fold(0.0, f64::max));
    let mut svg = open(&c.title);
    y_axis(&mut svg, &y_scale, &c.y_label, super::markdown::fmt_num);
    let base = TOP + PLOT_H;
    for t in &x_scale.ticks {
        let x = LEFT + x_scale.px(*t, PLOT_W);
        let _ = writeln!(svg, r##"<line x1="{x:.1}" y1="{base}" x2="{x:.1}" y2="{:.1}" stroke="#333"/>"##, base + 5.0);
        let _ = writeln!(
            svg,
            r#"<text x="{x:.1}" y="{:.1}" text-anchor="middle" font-size="12">{}</text>"#,
            base + 20.0,
            esc(&(c.x_fmt)(*t))
        );
    }
    let _ = writeln!(
        svg,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="13">{}</text>"#,
        LEFT + PLOT_W / 2.0,
        base + 42.0,
        esc(&c.x_label)
    );
    for l in &c.lines {
        let xy: Vec<(f64, f64)> =
            l.points.iter().map(|(x, y)| (LEFT + x_scale.px(*x, PLOT_W), base - y_scale.px(*y, PLOT_H))).collect();
        let path: Vec<String> = xy.iter().map(|(x, y)| format!("{x:.1},{y:.1}")).collect();
        let colour = colour(&l.name);
        let _ =
            writeln!(svg, r#"<polyline points="{}" fill="none" stroke="{colour}" stroke-width="2"/>"#, path.join(" "));
        for ((x, y), (_, v)) in xy.iter().zip(&l.points) {
            let _ = writeln!(
                svg,
                r#"<circle cx="{x:.1}" cy="{y:.1}" r="3.5" fill="{colour}"><title>{}: {}</title></circle>"#,
                esc(&l.name),
                super::markdown::fmt_num(*v)
            );
            let _ = writeln!(
                svg,
                r#"<text x="{:.1}" y="{:.1}" font-size="10" fill="{colour}">{}</text>"#,
                x + 5.0,
                y - 5.0,
                super::markdown::fmt_num(*v)
            );
        }
    }
    legend(&mut svg, c.lines.iter().map(|l| l.name.as_str()));
    notes(&mut svg, &c.notes);
    svg + "</svg>\n"
}

fn open(title: &str) -> String {
    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif">"#
    );
    let _ = writeln!(svg, r#"<rect x="0" y="0" width="{WIDTH}" height="{HEIGHT}" fill="white"/>"#);
    let _ = writeln!(
        svg,
        r#"<text x="{}" y="28" text-anchor="middle" font-size="18" font-weight="bold">{}</text>"#,
        WIDTH / 2.0,
        esc(title)
    );
    svg
}

fn y_axis(svg: &mut String, scale: &Scale, label: &str, fmt: fn(f64) -> String) {
    let base = TOP + PLOT_H;
    for t in &scale.ticks {
        let y = base - scale.px(*t, PLOT_H);
        let _ = writeln!(
            svg,
            r##"<line x1="{LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#e5e5e5"/>"##,
            LEFT + PLOT_W
        );
        let _ = writeln!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="end" font-size="12">{}</text>"#,
            LEFT - 6.0,
            y + 4.0,
            esc(&fmt(*t))
        );
    }
    let _ = writeln!(svg, r##"<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{base}" stroke="#333"/>"##);
    let _ = writeln!(svg, r##"<line x1="{LEFT}" y1="{base}" x2="{:.1}" y2="{base}" stroke="#333"/>"##, LEFT + PLOT_W);
    let (x, y) = (20.0, TOP + PLOT_H / 2.0);
    let _ = writeln!(
        svg,
        r#"<text x="{x}" y="{y:.1}" text-anchor="middle" font-size="13" transform="rotate(-90 {x} {y:.1})">{}</text>"#,
        esc(label)
    );
}

fn legend<'a>(svg: &mut String, names: impl Iterator<Item = &'a str>) {
    let x = WIDTH - RIGHT + 20.0;
    for (i, name) in names.enumerate() {
        let y = TOP + 10.0 + i as f64 * 22.0;
        let _ = writeln!(svg, r#"<rect x="{x}" y="{y:.1}" width="14" height="14" fill="{}"/>"#, colour(name));
        let _ = writeln!(svg, r#"<text x="{}" y="{:.1}" font-size="13">{}</text>"#, x + 20.0, y + 12.0, esc(name));
    }
}

fn notes(svg: &mut String, notes: &[String]) {
    let shown = notes.len().min(3);
    for (i, note) in notes.iter().take(shown).enumerate() {
        let y = HEIGHT - 10.0 - (shown - 1 - i) as f64 * 14.0;
        let note: String = note.chars().take(150).collect();
        let _ =
            writeln!(svg, r##"<text x="{LEFT}" y="{y:.1}" font-size="11" fill="#a33">Note: {}</text>"##, esc(&note));
    }
}

/// Text and attribute content with `&`, `<`, `>` and `"` escaped.
pub fn esc(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

#[cfg(test)]
#[path = "svg_tests.rs"]
pub(crate) mod tests;
