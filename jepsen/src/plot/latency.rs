//! `latency.png`: every operation's latency against the time it was invoked.
//!
//! Jepsen's "latency-raw" plot: one point per completed operation, y on a log scale, colour by
//! completion type and shape by `:f`, fault windows shaded behind. Timeouts show up as a band of
//! orange points at the client timeout; leader elections as gaps and spikes inside fault bands.

use std::collections::BTreeMap;
use std::path::Path;

use plotters::prelude::*;

use super::style::{secs, shade_faults, type_color, with_marker, Marker};
use super::{end_time, PlotError, HEIGHT, WIDTH};
use crate::history::{History, OpType};
use idem_testkit::font::FAMILY;

/// Points per (`:f`, completion type): (invoke time in s, latency in ms).
type Points = BTreeMap<(String, OpType), Vec<(f64, f64)>>;

/// Smallest latency drawn (ms): the log scale cannot show zero.
const MIN_LATENCY_MS: f64 = 1e-3;

fn collect(history: &History) -> Points {
    let ops = history.ops();
    let mut points = Points::new();
    for op in history.operations().operations {
        let Some(done) = op.completion else { continue };
        let latency = (ops[done].time - op.invoke_time) as f64 / 1e6;
        points
            .entry((op.f.name().to_string(), ops[done].kind))
            .or_default()
            .push((secs(op.invoke_time), latency.max(MIN_LATENCY_MS)));
    }
    points
}

fn y_range(points: &Points) -> (f64, f64) {
    let all = points.values().flatten().map(|p| p.1);
    let (lo, hi) = all.fold((f64::MAX, 0f64), |(lo, hi), y| (lo.min(y), hi.max(y)));
    if hi <= 0.0 {
        return (0.1, 1000.0);
    }
    ((lo * 0.8).max(MIN_LATENCY_MS), (hi * 1.25).max(lo * 10.0))
}

/// Draws the latency plot of `history` to `path`; `text` adds titles, labels and a legend.
pub(super) fn draw(history: &History, path: &Path, text: bool) -> Result<(), PlotError> {
    let points = collect(history);
    let x_end = secs(end_time(history)).max(1e-3);
    let (y0, y1) = y_range(&points);
    let root = BitMapBackend::new(path, (WIDTH, HEIGHT)).into_drawing_area();
    root.fill(&WHITE).map_err(PlotError::draw)?;
    let mut builder = ChartBuilder::on(&root);
    builder.margin(20);
    if text {
        builder
            .caption("Latency (raw)", (FAMILY, 24))
            .x_label_area_size(50)
            .y_label_area_size(80);
    }
    let mut chart = builder
        .build_cartesian_2d(0f64..x_end, (y0..y1).log_scale())
        .map_err(PlotError::draw)?;
    let mut mesh = chart.configure_mesh();
    mesh.light_line_style(WHITE);
    if text {
        mesh.x_desc("Time (s)")
            .y_desc("Latency (ms)")
            .label_style((FAMILY, 14));
    }
    mesh.draw().map_err(PlotError::draw)?;
    shade_faults(&mut chart, &history.fault_windows(), x_end, (y0, y1), text)?;
    for ((f, kind), pts) in &points {
        let label = format!("{f} {}", kind.name());
        with_marker!(Marker::of(f), type_color(*kind).filled(), |shape| {
            let series = chart
                .draw_series(pts.iter().map(|&p| EmptyElement::at(p) + shape()))
                .map_err(PlotError::draw)?;
            if text {
                series
                    .label(label)
                    .legend(move |c| EmptyElement::at(c) + shape());
            }
        });
    }
    if text {
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .label_font((FAMILY, 14))
            .draw()
            .map_err(PlotError::draw)?;
    }
    root.present().map_err(PlotError::draw)
}
