//! Colours, markers and fault shading shared by the plots, after Jepsen's `perf` graphs.
//!
//! Jepsen colours points by completion type (ok blue, info orange, fail pink) and distinguishes
//! operations by marker shape; faults are shaded bands across the whole plot, so a latency spike
//! or a throughput drop can be read against the fault that caused it.

use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

use super::PlotError;
use crate::history::{FaultWindow, OpType};

/// Colour of a completion type (Jepsen's palette).
pub fn type_color(kind: OpType) -> RGBColor {
    match kind {
        OpType::Ok => RGBColor(0x81, 0xBF, 0xFC),
        OpType::Info => RGBColor(0xFF, 0xA4, 0x00),
        OpType::Fail => RGBColor(0xFF, 0x1E, 0x90),
        OpType::Invoke => RGBColor(0x80, 0x80, 0x80),
    }
}

/// Colour of an operation's line in the rate plot.
pub fn f_color(f: &str, i: usize) -> RGBColor {
    match f {
        "claim" => RGBColor(0x1F, 0x77, 0xB4),
        "complete" => RGBColor(0x2C, 0xA0, 0x2C),
        "call" => RGBColor(0xFF, 0x7F, 0x0E),
        "read" => RGBColor(0x94, 0x67, 0xBD),
        _ => {
            let c = Palette99::pick(i + 4).to_rgba();
            RGBColor(c.0, c.1, c.2)
        }
    }
}

/// Colour of a fault family's band.
pub fn fault_color(kind: &str) -> RGBColor {
    match kind {
        "partition" => RGBColor(0x70, 0x70, 0x70),
        "kill" => RGBColor(0xE4, 0x1A, 0x1C),
        "power-loss" => RGBColor(0x8B, 0x00, 0x00),
        "bitflip" => RGBColor(0x8C, 0x51, 0x0A),
        "pause" => RGBColor(0xFF, 0xC0, 0x00),
        k if k.contains("clock") => RGBColor(0x98, 0x4E, 0xA3),
        _ => RGBColor(0x37, 0x7E, 0xB8),
    }
}

/// Marker shapes, one per `:f`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Marker {
    /// Claims.
    Circle,
    /// Completes.
    Triangle,
    /// Calls.
    Cross,
    /// Reads and anything else.
    Square,
}

impl Marker {
    /// The marker of an `:f`.
    pub fn of(f: &str) -> Marker {
        match f {
            "claim" => Marker::Circle,
            "complete" => Marker::Triangle,
            "call" => Marker::Cross,
            _ => Marker::Square,
        }
    }
}

/// Runs `$body` with `$shape` bound to a closure building the marker of `$marker` (centred on
/// (0, 0) in pixels, to be added to an `EmptyElement::at(point)`). A macro rather than a function
/// because each shape is a different type and plotters' legends cannot take boxed elements
/// without a `'static` backend.
macro_rules! with_marker {
    ($marker:expr, $style:expr, |$shape:ident| $body:expr) => {{
        let style: ShapeStyle = $style;
        match $marker {
            Marker::Circle => {
                let $shape = move || Circle::new((0, 0), 3, style);
                $body
            }
            Marker::Triangle => {
                let $shape = move || TriangleMarker::new((0, 0), 4, style);
                $body
            }
            Marker::Cross => {
                let $shape = move || Cross::new((0, 0), 3, style);
                $body
            }
            Marker::Square => {
                let $shape = move || Rectangle::new([(-3, -3), (3, 3)], style);
                $body
            }
        }
    }};
}
pub(crate) use with_marker;

/// A chart whose x axis is seconds and whose y axis is any `f64` scale.
pub type Chart<'a, DB, Y> = ChartContext<'a, DB, Cartesian2d<RangedCoordf64, Y>>;

/// Shades each fault window across the y range `(y0, y1)`; point events become vertical lines.
/// With `legend`, one legend entry per fault family.
pub fn shade_faults<DB: DrawingBackend, Y: Ranged<ValueType = f64>>(
    chart: &mut Chart<'_, DB, Y>,
    windows: &[FaultWindow],
    x_end: f64,
    (y0, y1): (f64, f64),
    legend: bool,
) -> Result<(), PlotError> {
    let mut labelled: Vec<&str> = Vec::new();
    for w in windows {
        let color = fault_color(&w.kind);
        let start = secs(w.start);
        let end = w.end.map_or(x_end, secs).max(start);
        let series = if w.point {
            let line = PathElement::new(vec![(start, y0), (start, y1)], color.stroke_width(2));
            chart.draw_series(std::iter::once(line))
        } else {
            let band = Rectangle::new([(start, y0), (end, y1)], color.mix(0.18).filled());
            chart.draw_series(std::iter::once(band))
        }
        .map_err(PlotError::draw)?;
        if legend && !labelled.contains(&w.kind.as_str()) {
            labelled.push(&w.kind);
            series.label(w.kind.clone()).legend(move |(x, y)| {
                Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.mix(0.4).filled())
            });
        }
    }
    Ok(())
}

/// Nanoseconds to seconds.
pub fn secs(ns: i64) -> f64 {
    ns as f64 / 1e9
}
