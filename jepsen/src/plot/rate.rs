//! `rate.png`: completed operations per second, one line per `:f`.
//!
//! Jepsen's "rate" plot: throughput over time, bucketed, with fault windows shaded, so that
//! availability loss during a partition or a leader kill is visible at a glance.

use std::collections::BTreeMap;
use std::path::Path;

use plotters::prelude::*;

use super::style::{f_color, secs, shade_faults};
use super::{end_time, PlotError, HEIGHT, WIDTH};
use crate::history::{History, OpType};
use idem_testkit::font::FAMILY;

/// Most buckets drawn; longer tests get wider buckets.
const MAX_BUCKETS: f64 = 600.0;

/// Bucket width in seconds: 1 s, or wider so a long test has at most [`MAX_BUCKETS`].
fn bucket_width(x_end: f64) -> f64 {
    (x_end / MAX_BUCKETS).ceil().max(1.0)
}

/// Completions per bucket for each `:f`.
fn buckets(history: &History, dt: f64, n: usize) -> BTreeMap<String, Vec<u64>> {
    let mut out: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    let completions = history
        .ops()
        .iter()
        .filter(|op| op.is_client() && op.kind != OpType::Invoke);
    for op in completions {
        let b = ((secs(op.time) / dt).max(0.0) as usize).min(n - 1);
        out.entry(op.f.name().to_string())
            .or_insert_with(|| vec![0; n])[b] += 1;
    }
    out
}

/// Points (bucket middle in s, completions per second) of each `:f`. The last bucket may be cut
/// short by the end of the test, so each is divided by the time it covers; a sliver under a
/// quarter bucket is left out rather than drawn as a spurious spike or drop.
fn rates(
    counts: &BTreeMap<String, Vec<u64>>,
    dt: f64,
    x_end: f64,
) -> BTreeMap<String, Vec<(f64, f64)>> {
    let rate = |b: usize, c: u64| {
        let width = (x_end - b as f64 * dt).min(dt);
        (width >= dt / 4.0).then(|| ((b as f64 + 0.5) * dt, c as f64 / width))
    };
    counts
        .iter()
        .map(|(f, per_bucket)| {
            let points = per_bucket
                .iter()
                .enumerate()
                .filter_map(|(b, &c)| rate(b, c));
            (f.clone(), points.collect())
        })
        .collect()
}

/// Draws the rate plot of `history` to `path`; `text` adds titles, labels and a legend.
pub(super) fn draw(history: &History, path: &Path, text: bool) -> Result<(), PlotError> {
    let x_end = secs(end_time(history)).max(1e-3);
    let dt = bucket_width(x_end);
    let n = (x_end / dt).ceil().max(1.0) as usize;
    let rates = rates(&buckets(history, dt, n), dt, x_end);
    let peak = rates.values().flatten().map(|p| p.1).fold(0.0, f64::max);
    let y1 = (peak * 1.1).max(1.0);
    let root = BitMapBackend::new(path, (WIDTH, HEIGHT)).into_drawing_area();
    root.fill(&WHITE).map_err(PlotError::draw)?;
    let mut builder = ChartBuilder::on(&root);
    builder.margin(20);
    if text {
        builder
            .caption("Throughput", (FAMILY, 24))
            .x_label_area_size(50)
            .y_label_area_size(80);
    }
    let mut chart = builder
        .build_cartesian_2d(0f64..x_end.max(dt * n as f64), 0f64..y1)
        .map_err(PlotError::draw)?;
    let mut mesh = chart.configure_mesh();
    mesh.light_line_style(WHITE);
    if text {
        mesh.x_desc("Time (s)")
            .y_desc(format!("Completions per second ({dt} s buckets)"))
            .label_style((FAMILY, 14));
    }
    mesh.draw().map_err(PlotError::draw)?;
    shade_faults(&mut chart, &history.fault_windows(), x_end, (0.0, y1), text)?;
    for (i, (f, per_bucket)) in rates.iter().enumerate() {
        let color = f_color(f, i);
        let line = per_bucket.iter().copied();
        let series = chart
            .draw_series(LineSeries::new(line, color.stroke_width(2)))
            .map_err(PlotError::draw)?;
        if text {
            series.label(f.clone()).legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 16, y)], color.stroke_width(2))
            });
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_one_second_until_the_test_is_long() {
        assert_eq!(bucket_width(30.0), 1.0);
        assert_eq!(bucket_width(3000.0), 5.0);
    }
}
