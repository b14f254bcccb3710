//! SVG line plots of benchmark results: one line per DUT, the median of the repetitions as a
//! marked point and their min–max as an error bar, y from 0 (the style of seed 000's Figures 5
//! and 6: throughput against frame size, throughput against worker cores).
//!
//! Text is written as SVG `<text>` elements and laid out by the viewer's fonts: without font
//! libraries, plotters estimates a label's width from its byte length, which is only used to
//! place the axis areas and the legend box.

use std::path::Path;

use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint};
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// One line of a plot.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Legend entry (the DUT, e.g. `veclane/single`).
    pub name: String,
    pub points: Vec<Point>,
}

/// One measured point: the median of the repetitions and their range.
///
/// A point whose `x` or `y` is not finite is left out; a point whose `y_min` or `y_max` is not
/// finite is drawn without an error bar.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    pub x: f64,
    pub y: f64,
    pub y_min: f64,
    pub y_max: f64,
}

/// What to draw.
#[derive(Debug, Clone, Copy)]
pub struct Plot<'a> {
    pub title: &'a str,
    /// The configuration the numbers depend on (core map, placement), under the title.
    pub subtitle: &'a str,
    pub x_label: &'a str,
    pub y_label: &'a str,
    /// Where the x axis is labelled (e.g. the frame sizes); `None` labels every x that occurs.
    pub x_ticks: Option<&'a [f64]>,
    pub series: &'a [Series],
}

const WIDTH: u32 = 800;
const HEIGHT: u32 = 500;
const HEAD: u32 = 60;
const X_LABEL_AREA: u32 = 45;
const MARGIN: u32 = 12;
/// Pixels per legend row, to leave room above the data for the legend.
const LEGEND_ROW: f64 = 20.0;
const FONT: &str = "sans-serif";

/// Tableau 10: ten colours that stay apart on white and for most colour-vision deficiencies.
const PALETTE: [RGBColor; 10] = [
    RGBColor(0x4e, 0x79, 0xa7),
    RGBColor(0xf2, 0x8e, 0x2b),
    RGBColor(0xe1, 0x57, 0x59),
    RGBColor(0x76, 0xb7, 0xb2),
    RGBColor(0x59, 0xa1, 0x4f),
    RGBColor(0xed, 0xc9, 0x48),
    RGBColor(0xb0, 0x7a, 0xa1),
    RGBColor(0xff, 0x9d, 0xa7),
    RGBColor(0x9c, 0x75, 0x5f),
    RGBColor(0xba, 0xb0, 0xac),
];

fn finite(p: &Point) -> bool {
    p.x.is_finite() && p.y.is_finite()
}

/// The plot as an SVG document. The same input gives the same bytes.
///
/// Fails when there is no series, more series than distinct colours (10), or no point with a
/// finite x and y. Values below 0 fall outside the y axis, which starts at 0.
pub fn svg(plot: &Plot<'_>) -> Result<String, PlotError> {
    let title = || plot.title.to_string();
    if plot.series.is_empty() {
        return Err(PlotError::NoSeries { title: title() });
    }
    if plot.series.len() > PALETTE.len() {
        return Err(PlotError::TooManySeries {
            title: title(),
            series: plot.series.len(),
        });
    }
    let points = || {
        plot.series
            .iter()
            .flat_map(|s| &s.points)
            .filter(|p| finite(p))
    };
    let xs: Vec<f64> = points().map(|p| p.x).collect();
    if xs.is_empty() {
        return Err(PlotError::NoPoints { title: title() });
    }
    let mut ticks: Vec<f64> = match plot.x_ticks {
        Some(t) => t.iter().copied().filter(|x| x.is_finite()).collect(),
        None => xs.clone(),
    };
    ticks.sort_by(f64::total_cmp);
    ticks.dedup();

    let lo = xs
        .iter()
        .chain(&ticks)
        .copied()
        .fold(f64::INFINITY, f64::min);
    let hi = xs
        .iter()
        .chain(&ticks)
        .copied()
        .fold(f64::NEG_INFINITY, f64::max);
    let pad = if hi > lo { (hi - lo) * 0.05 } else { 0.5 };
    let x_range = TickedAxis {
        inner: ((lo - pad)..(hi + pad)).into(),
        ticks: ticks.clone(),
    };

    let data_top = points()
        .flat_map(|p| [p.y, p.y_min, p.y_max])
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max);
    let data_top = if data_top > 0.0 { data_top } else { 1.0 };
    // Keep the legend (upper right) above the highest point.
    let plot_height = f64::from(HEIGHT - HEAD - X_LABEL_AREA - 2 * MARGIN);
    let legend =
        ((plot.series.len() as f64 * LEGEND_ROW + 2.0 * MARGIN as f64) / plot_height).min(0.5);
    let y_range = 0.0..data_top / (1.0 - legend) * 1.02;

    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (WIDTH, HEIGHT)).into_drawing_area();
        let e = |e: DrawingAreaErrorKind<_>| PlotError::Draw {
            title: title(),
            reason: e.to_string(),
        };
        root.fill(&WHITE).map_err(e)?;
        let (head, body) = root.split_vertically(HEAD);
        let centre = Pos::new(HPos::Center, VPos::Top);
        let mid = (WIDTH / 2) as i32;
        head.draw(&Text::new(
            plot.title,
            (mid, 8),
            TextStyle::from((FONT, 24).into_font()).pos(centre),
        ))
        .map_err(e)?;
        head.draw(&Text::new(
            plot.subtitle,
            (mid, 36),
            TextStyle::from((FONT, 16).into_font())
                .color(&RGBColor(0x55, 0x55, 0x55))
                .pos(centre),
        ))
        .map_err(e)?;

        let mut chart = ChartBuilder::on(&body)
            .margin(MARGIN)
            .x_label_area_size(X_LABEL_AREA)
            .y_label_area_size(65)
            .build_cartesian_2d(x_range, y_range)
            .map_err(e)?;
        let tick_label = |v: &f64| format!("{v}");
        chart
            .configure_mesh()
            .x_desc(plot.x_label)
            .y_desc(plot.y_label)
            .x_labels(ticks.len())
            .x_label_formatter(&tick_label)
            .y_labels(8)
            .axis_desc_style((FONT, 18))
            .label_style((FONT, 15))
            .bold_line_style(BLACK.mix(0.12))
            .light_line_style(TRANSPARENT)
            .draw()
            .map_err(e)?;

        for (series, colour) in plot.series.iter().zip(PALETTE) {
            let style = colour.filled().stroke_width(2);
            let line = series
                .points
                .iter()
                .filter(|p| finite(p))
                .map(|p| (p.x, p.y));
            chart
                .draw_series(LineSeries::new(line, style))
                .map_err(e)?
                .label(series.name.as_str())
                .legend(move |(x, y)| {
                    EmptyElement::at((x, y))
                        + Rectangle::new([(0, -1), (18, 1)], style)
                        + Circle::new((9, 0), 4, style)
                });
            for p in series.points.iter().filter(|p| finite(p)) {
                if p.y_min.is_finite() && p.y_max.is_finite() {
                    let (lo, hi) = (p.y_min.min(p.y_max), p.y_min.max(p.y_max));
                    // Draws the bar, its caps and a marker (radius width / 2) at the median.
                    chart
                        .draw_series([ErrorBar::new_vertical(p.x, lo, p.y, hi, style, 8)])
                        .map_err(e)?;
                } else {
                    chart
                        .draw_series([Circle::new((p.x, p.y), 4, style)])
                        .map_err(e)?;
                }
            }
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .margin(MARGIN)
            .label_font((FONT, 16))
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.3))
            .draw()
            .map_err(e)?;
        root.present().map_err(e)?;
    }
    Ok(out)
}

/// A linear axis labelled at given values only (plotters' `WithKeyPoints` has no default
/// formatter, so the mesh could not be configured with it).
struct TickedAxis {
    inner: RangedCoordf64,
    ticks: Vec<f64>,
}

impl Ranged for TickedAxis {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        self.inner.map(value, limit)
    }

    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            Vec::new()
        } else {
            self.ticks.clone()
        }
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.inner.range()
    }
}

/// [`svg`], written to `path`.
pub fn write_svg(path: &Path, plot: &Plot<'_>) -> Result<(), PlotError> {
    let doc = svg(plot)?;
    std::fs::write(path, doc).map_err(|source| PlotError::Write {
        path: path.display().to_string(),
        source,
    })
}

/// A plot that cannot be drawn or written.
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    #[error("plot '{title}': the series list is empty")]
    NoSeries { title: String },
    #[error("plot '{title}': {series} series, at most {} have distinct colours", PALETTE.len())]
    TooManySeries { title: String, series: usize },
    #[error("plot '{title}': no point has a finite x and y")]
    NoPoints { title: String },
    #[error("plot '{title}': {reason}")]
    Draw { title: String, reason: String },
    #[error("writing {path}: {source}")]
    Write {
        path: String,
        source: std::io::Error,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pt(x: f64, y: f64) -> Point {
        Point {
            x,
            y,
            y_min: y * 0.9,
            y_max: y * 1.1,
        }
    }

    fn series(name: &str, points: Vec<Point>) -> Series {
        Series {
            name: name.into(),
            points,
        }
    }

    fn plot<'a>(series: &'a [Series], ticks: Option<&'a [f64]>) -> Plot<'a> {
        Plot {
            title: "l3fwd, one worker",
            subtitle: "gen on cpu 0, DUT on cpu 1",
            x_label: "frame size (B)",
            y_label: "Mpps",
            x_ticks: ticks,
            series,
        }
    }

    /// `points` attributes of the polylines drawn in `colour` (`#RRGGBB`).
    fn polylines<'s>(svg: &'s str, colour: &str) -> Vec<&'s str> {
        svg.split("<polyline")
            .skip(1)
            .filter(|t| t.contains(&format!("stroke=\"{colour}\"")))
            .filter_map(|t| t.split("points=\"").nth(1)?.split('"').next())
            .collect()
    }

    #[test]
    fn one_line_per_series_with_names_and_labels_as_text() {
        let sizes = [64.0, 128.0, 256.0, 512.0, 1024.0, 1500.0];
        let s = [
            series(
                "veclane/single",
                sizes.iter().map(|&x| pt(x, 3.0)).collect(),
            ),
            series("testpmd", sizes.iter().map(|&x| pt(x, 2.0)).collect()),
        ];
        let doc = svg(&plot(&s, Some(&sizes))).unwrap();
        assert!(doc.starts_with("<svg"), "{}", &doc[..40]);
        assert!(doc.trim_end().ends_with("</svg>"));
        // Besides the axes and their ticks (black), one polyline per series.
        let coloured = doc.matches("<polyline").count()
            - doc
                .matches("stroke=\"#000000\" stroke-width=\"1\" points")
                .count();
        assert_eq!(coloured, 2);
        assert_eq!(polylines(&doc, "#4E79A7").len(), 1);
        assert_eq!(polylines(&doc, "#F28E2B").len(), 1);
        assert_eq!(polylines(&doc, "#4E79A7")[0].split_whitespace().count(), 6);
        for text in [
            "veclane/single",
            "testpmd",
            "frame size (B)",
            "Mpps",
            "l3fwd, one worker",
            "gen on cpu 0, DUT on cpu 1",
            "64",
            "1500",
        ] {
            assert!(
                doc.contains(&format!(">\n{text}\n</text>")),
                "no <text> {text}"
            );
        }
        // 6 error bars of 3 lines each per series, and a marker each.
        assert_eq!(doc.matches("<circle").count(), 2 * 6 + 2);
        assert_eq!(doc, svg(&plot(&s, Some(&sizes))).unwrap(), "deterministic");
    }

    #[test]
    fn empty_series_list_is_refused() {
        let err = svg(&plot(&[], None)).unwrap_err().to_string();
        assert!(err.contains("series list is empty"), "{err}");
    }

    #[test]
    fn single_point_works() {
        let s = [series("veclane", vec![pt(1.0, 4.2)])];
        let doc = svg(&plot(&s, None)).unwrap();
        assert_eq!(polylines(&doc, "#4E79A7").len(), 1);
        assert!(doc.contains(">\n1\n</text>"));
    }

    #[test]
    fn nan_points_are_skipped() {
        let mut bad = pt(128.0, f64::NAN);
        bad.y_min = 1.0;
        let no_range = Point {
            x: 256.0,
            y: 2.0,
            y_min: f64::NAN,
            y_max: 3.0,
        };
        let s = [series(
            "veclane",
            vec![pt(64.0, 3.0), bad, no_range, pt(f64::INFINITY, 1.0)],
        )];
        let doc = svg(&plot(&s, None)).unwrap();
        let lines = polylines(&doc, "#4E79A7");
        assert_eq!(lines.len(), 1);
        assert_eq!(lines[0].split_whitespace().count(), 2);
        assert!(!doc.contains("NaN") && !doc.contains("inf"));
        // one error bar with its marker, one bare marker, one legend marker
        assert_eq!(doc.matches("<circle").count(), 3);

        let all_bad = [series("x", vec![bad])];
        assert!(
            svg(&plot(&all_bad, None))
                .unwrap_err()
                .to_string()
                .contains("no point")
        );
    }

    #[test]
    fn too_many_series_for_distinct_colours_is_refused() {
        let s: Vec<Series> = (0..11)
            .map(|i| series(&format!("s{i}"), vec![pt(1.0, 1.0)]))
            .collect();
        assert!(
            svg(&plot(&s, None))
                .unwrap_err()
                .to_string()
                .contains("at most 10")
        );
    }

    #[test]
    fn text_is_escaped() {
        let s = [series("a<b & c", vec![pt(1.0, 1.0)])];
        let doc = svg(&plot(&s, None)).unwrap();
        assert!(doc.contains("a&lt;b &amp; c"));
    }
}
