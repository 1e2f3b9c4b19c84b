//! Grouped bar charts as SVG, written by hand (no plotting dependency).
//!
//! One group of bars per category (a method, a workload), one bar per series (accuracy and
//! well-formed rate, or one bar per method), a labelled y axis from 0, an optional dashed
//! reference line (1.0× for throughput ratios), the value printed above each bar, optional
//! min–max error bars (the spread over repetitions behind a median), and a legend.
//! Missing values leave a gap. Text is XML-escaped. The output is deterministic.

use std::fmt::Write;

/// Colours of successive series (colour-blind-safe Okabe–Ito palette).
const PALETTE: [&str; 8] = [
    "#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000",
];

/// A grouped bar chart.
#[derive(Clone, Debug, Default)]
pub struct BarChart {
    pub title: String,
    pub y_label: String,
    pub categories: Vec<String>,
    /// (series name, one value per category).
    pub series: Vec<(String, Vec<Option<f64>>)>,
    /// Top of the y axis; None = from the data.
    pub y_max: Option<f64>,
    /// A dashed horizontal line, e.g. 1.0 for "as fast as unconstrained".
    pub reference_line: Option<f64>,
    /// Format of the value labels: decimals shown.
    pub decimals: usize,
    /// Optional error bars: per series (same order as `series`), per category, the (min, max)
    /// around the bar's value. Empty or `None` = no bar.
    pub ranges: Vec<Vec<Option<(f64, f64)>>>,
}

/// A model's display name: its file name without the `.gguf` extension
/// (`SmolLM2-135M-Instruct.Q4_1.gguf` → `SmolLM2-135M-Instruct.Q4_1`).
pub fn model_label(name: &str) -> &str {
    let cut = name.len().saturating_sub(".gguf".len());
    match name.get(cut..) {
        Some(ext) if cut > 0 && ext.eq_ignore_ascii_case(".gguf") => &name[..cut],
        _ => name,
    }
}

/// Escape text for SVG content and attributes.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

/// A "nice" axis maximum at or above `x` (1, 2, 2.5, 5 × 10^n).
fn nice_ceiling(x: f64) -> f64 {
    if x <= 0.0 || !x.is_finite() {
        return 1.0;
    }
    let magnitude = 10f64.powf(x.log10().floor());
    for step in [1.0, 2.0, 2.5, 5.0, 10.0] {
        if step * magnitude >= x - 1e-12 {
            return step * magnitude;
        }
    }
    10.0 * magnitude
}

impl BarChart {
    /// Render the chart as a standalone SVG document.
    pub fn render(&self) -> String {
        let group_count = self.categories.len().max(1);
        let series_count = self.series.len().max(1);
        let bar_width = 22.0;
        let group_gap = 28.0;
        let group_width = bar_width * series_count as f64 + group_gap;
        let (left, right, top, bottom) = (70.0, 20.0, 50.0, 90.0);
        // Wide enough for the bars and for the title: at 15 px a sans-serif character averages
        // under 9 px (capitals and wide glyphs included), plus a margin on each side.
        let title_width = self.title.chars().count() as f64 * 9.0 + 40.0;
        let plot_width = (group_width * group_count as f64)
            .max(300.0)
            .max(title_width - left - right);
        let plot_height = 260.0;
        let width = left + plot_width + right;
        let legend_height = 18.0 * series_count as f64;
        let height = top + plot_height + bottom + legend_height;

        let range = |si: usize, ci: usize| -> Option<(f64, f64)> {
            self.ranges
                .get(si)
                .and_then(|r| r.get(ci))
                .copied()
                .flatten()
        };
        let range_max = self
            .ranges
            .iter()
            .flat_map(|r| r.iter().flatten().map(|&(_, hi)| hi))
            .fold(0.0f64, f64::max);
        let data_max = self
            .series
            .iter()
            .flat_map(|(_, v)| v.iter().flatten().copied())
            .fold(range_max, f64::max);
        let y_max = self.y_max.unwrap_or_else(|| {
            nice_ceiling(data_max.max(self.reference_line.unwrap_or(0.0)) * 1.1)
        });
        let y_of = |v: f64| top + plot_height - (v / y_max).clamp(0.0, 1.0) * plot_height;

        let mut s = String::new();
        let _ = writeln!(
            s,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{height:.0}" viewBox="0 0 {width:.0} {height:.0}" font-family="sans-serif" font-size="12">"#
        );
        let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="24" font-size="15" text-anchor="middle">{}</text>"#,
            width / 2.0,
            escape(&self.title)
        );
        // Y axis with five ticks.
        for i in 0..=5 {
            let v = y_max * i as f64 / 5.0;
            let y = y_of(v);
            let _ = writeln!(
                s,
                r##"<line x1="{left}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#ddd"/>"##,
                left + plot_width
            );
            let _ = writeln!(
                s,
                r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
                left - 6.0,
                y + 4.0,
                trim_number(v)
            );
        }
        let _ = writeln!(
            s,
            r#"<text x="16" y="{:.1}" text-anchor="middle" transform="rotate(-90 16 {:.1})">{}</text>"#,
            top + plot_height / 2.0,
            top + plot_height / 2.0,
            escape(&self.y_label)
        );
        let _ = writeln!(
            s,
            r##"<line x1="{left}" y1="{top}" x2="{left}" y2="{:.1}" stroke="#333"/>"##,
            top + plot_height
        );
        let _ = writeln!(
            s,
            r##"<line x1="{left}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#333"/>"##,
            top + plot_height,
            left + plot_width,
            top + plot_height
        );
        // Bars.
        let used_width = group_width * group_count as f64;
        let offset = left + (plot_width - used_width) / 2.0 + group_gap / 2.0;
        for (ci, category) in self.categories.iter().enumerate() {
            let gx = offset + ci as f64 * group_width;
            for (si, (series_name, values)) in self.series.iter().enumerate() {
                let Some(Some(v)) = values.get(ci) else {
                    continue;
                };
                let x = gx + si as f64 * bar_width;
                let y = y_of(*v);
                let h = top + plot_height - y;
                let _ = writeln!(
                    s,
                    r#"<rect x="{x:.1}" y="{y:.1}" width="{:.1}" height="{h:.1}" fill="{}"><title>{}</title></rect>"#,
                    bar_width - 2.0,
                    PALETTE[si % PALETTE.len()],
                    escape(&format!(
                        "{category} — {series_name}: {}",
                        format_value(*v, self.decimals)
                    ))
                );
                let mid = x + (bar_width - 2.0) / 2.0;
                let mut label_y = y;
                if let Some((lo, hi)) = range(si, ci) {
                    let (y_lo, y_hi) = (y_of(lo), y_of(hi));
                    label_y = label_y.min(y_hi);
                    let _ = writeln!(
                        s,
                        r##"<g stroke="#333"><title>{}</title><line x1="{mid:.1}" y1="{y_lo:.1}" x2="{mid:.1}" y2="{y_hi:.1}"/><line x1="{:.1}" y1="{y_lo:.1}" x2="{:.1}" y2="{y_lo:.1}"/><line x1="{:.1}" y1="{y_hi:.1}" x2="{:.1}" y2="{y_hi:.1}"/></g>"##,
                        escape(&format!(
                            "{category} — {series_name}: min {}, max {}",
                            format_value(lo, self.decimals),
                            format_value(hi, self.decimals)
                        )),
                        mid - 4.0,
                        mid + 4.0,
                        mid - 4.0,
                        mid + 4.0
                    );
                }
                let _ = writeln!(
                    s,
                    r#"<text x="{mid:.1}" y="{:.1}" font-size="9" text-anchor="middle">{}</text>"#,
                    label_y - 3.0,
                    format_value(*v, self.decimals)
                );
            }
            let cx = gx + bar_width * series_count as f64 / 2.0;
            let _ = writeln!(
                s,
                r#"<text x="{cx:.1}" y="{:.1}" text-anchor="end" transform="rotate(-30 {cx:.1} {:.1})">{}</text>"#,
                top + plot_height + 16.0,
                top + plot_height + 16.0,
                escape(category)
            );
        }
        if let Some(r) = self.reference_line {
            let y = y_of(r);
            let _ = writeln!(
                s,
                r##"<line x1="{left}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#c00" stroke-dasharray="5,4"/>"##,
                left + plot_width
            );
        }
        // Legend.
        for (si, (name, _)) in self.series.iter().enumerate() {
            let y = top + plot_height + bottom + 18.0 * si as f64;
            let _ = writeln!(
                s,
                r#"<rect x="{left}" y="{:.1}" width="12" height="12" fill="{}"/>"#,
                y - 10.0,
                PALETTE[si % PALETTE.len()]
            );
            let _ = writeln!(
                s,
                r#"<text x="{:.1}" y="{y:.1}">{}</text>"#,
                left + 18.0,
                escape(name)
            );
        }
        s.push_str("</svg>\n");
        s
    }
}

fn format_value(v: f64, decimals: usize) -> String {
    format!("{v:.decimals$}")
}

fn trim_number(v: f64) -> String {
    let s = format!("{v:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s.is_empty() {
        "0".into()
    } else {
        s.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_bars_are_drawn_and_raise_the_axis() {
        let chart = BarChart {
            title: "t".into(),
            categories: vec!["json".into(), "xml".into()],
            series: vec![("domino".into(), vec![Some(1.0), Some(0.9)])],
            ranges: vec![vec![Some((0.8, 2.4)), None]],
            reference_line: Some(1.0),
            decimals: 2,
            ..BarChart::default()
        };
        let svg = chart.render();
        assert!(svg.contains("json — domino: min 0.80, max 2.40"), "{svg}");
        assert_eq!(svg.matches("min ").count(), 1, "one error bar: {svg}");
        // The axis reaches past the whisker (2.4 * 1.1 rounded up to a nice number).
        assert!(svg.contains(">3<") || svg.contains(">2.5<"), "{svg}");
    }

    #[test]
    fn model_labels_drop_the_gguf_extension() {
        assert_eq!(
            model_label("SmolLM2-135M-Instruct.Q4_1.gguf"),
            "SmolLM2-135M-Instruct.Q4_1"
        );
        assert_eq!(model_label("gemma.GGUF"), "gemma");
        assert_eq!(model_label("fake-model"), "fake-model");
        assert_eq!(model_label(".gguf"), ".gguf");
    }

    #[test]
    fn long_titles_widen_the_chart() {
        let title = "Throughput relative to unconstrained — a model with a long name".repeat(2);
        let chart = BarChart {
            title: title.clone(),
            categories: vec!["a".into()],
            series: vec![("s".into(), vec![Some(1.0)])],
            ..BarChart::default()
        };
        let svg = chart.render();
        let width: f64 = svg
            .split("width=\"")
            .nth(1)
            .and_then(|w| w.split('"').next())
            .and_then(|w| w.parse().ok())
            .unwrap();
        assert!(width >= title.chars().count() as f64 * 9.0, "{width}");
    }

    #[test]
    fn renders_bars_legend_and_escapes() {
        let chart = BarChart {
            title: "A & B".into(),
            y_label: "rate".into(),
            categories: vec!["none".into(), "<domino>".into()],
            series: vec![
                ("accuracy".into(), vec![Some(0.5), None]),
                ("well-formed".into(), vec![Some(1.0), Some(0.25)]),
            ],
            y_max: Some(1.0),
            reference_line: Some(1.0),
            decimals: 2,
            ranges: Vec::new(),
        };
        let svg = chart.render();
        assert!(svg.starts_with("<svg"));
        assert!(svg.contains("A &amp; B") && svg.contains("&lt;domino&gt;"));
        assert_eq!(
            svg.matches("<rect x=").count(),
            3 + 2,
            "3 bars + 2 legend boxes"
        );
        assert!(svg.contains("stroke-dasharray"));
        assert_eq!(nice_ceiling(1.3), 2.0);
        assert_eq!(nice_ceiling(0.77), 1.0);
    }
}
