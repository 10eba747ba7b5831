//! PNG plots of a sweep: per workload, latency percentiles and throughput against the number
//! of clients, one line per backend (medians over repetitions, see [`crate::aggregate`]).
//!
//! The ratio at one concurrency says who is faster; the curves say why: a store whose
//! throughput flattens while its latency climbs is saturated (CPU, fsync, a lock), one whose
//! p99 leaves its p50 behind has queueing or stalls.
//!
//! Text is drawn with idem-testkit's font loader (shared with the jepsen harness), from
//! `$IDEM_BENCH_FONT` or Debian's DejaVu Sans.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use idem_testkit::font::{text_available_from, FAMILY};
use plotters::prelude::*;

use crate::aggregate::{headline, Point, PointKey};
use crate::error::BenchError;
use crate::workload::Workload;

/// Environment variable naming a TrueType font file for the plots' text.
pub const FONT_ENV: &str = "IDEM_BENCH_FONT";

const WIDTH: u32 = 1000;
const HEIGHT: u32 = 600;

/// One backend's points of one workload: (clients, point), by clients.
type Series<'a> = Vec<(String, Vec<(f64, &'a Point)>)>;

fn color(backend: &str) -> RGBColor {
    match backend {
        "idem" => RGBColor(0x1F, 0x77, 0xB4),
        "etcd" => RGBColor(0xFF, 0x7F, 0x0E),
        _ => RGBColor(0x2C, 0xA0, 0x2C),
    }
}

fn series(points: &BTreeMap<PointKey, Point>, workload: Workload) -> Series<'_> {
    let mut by_backend: BTreeMap<String, Vec<(f64, &Point)>> = BTreeMap::new();
    for ((backend, w, clients), point) in points {
        if *w == workload {
            by_backend
                .entry(backend.clone())
                .or_default()
                .push((*clients as f64, point));
        }
    }
    by_backend.into_iter().collect()
}

fn plot_error(path: &Path) -> impl Fn(String) -> BenchError + '_ {
    move |message| BenchError::Plot {
        path: path.to_owned(),
        message,
    }
}

/// Draws `<workload>-latency.png` and `<workload>-throughput.png` into `dir` for every
/// workload of `points`; returns the files written.
pub fn draw_all(
    points: &BTreeMap<PointKey, Point>,
    dir: &Path,
) -> Result<Vec<PathBuf>, BenchError> {
    std::fs::create_dir_all(dir).map_err(|e| BenchError::io(dir, e))?;
    let mut workloads: Vec<Workload> = points.keys().map(|k| k.1).collect();
    workloads.sort();
    workloads.dedup();
    let mut written = Vec::new();
    for workload in workloads {
        let s = series(points, workload);
        let latency = dir.join(format!("{}-latency.png", workload.name()));
        draw_latency(&s, workload, &latency).map_err(plot_error(&latency))?;
        written.push(latency);
        let throughput = dir.join(format!("{}-throughput.png", workload.name()));
        draw_throughput(&s, workload, &throughput).map_err(plot_error(&throughput))?;
        written.push(throughput);
    }
    Ok(written)
}

fn x_range(series: &Series<'_>) -> (f64, f64) {
    let max = series
        .iter()
        .flat_map(|(_, pts)| pts.iter().map(|p| p.0))
        .fold(1.0, f64::max);
    (0.8, max * 1.25)
}

/// Ticks at 1, 2 and 5 times each power of ten inside `[lo, hi]`: plotters' own key points
/// on a log axis repeat the decade's label and crowd its light lines together.
fn ticks_1_2_5(lo: f64, hi: f64) -> Vec<f64> {
    let first = lo.log10().floor() as i32;
    let last = hi.log10().ceil() as i32;
    (first..=last)
        .flat_map(|exp| [1.0, 2.0, 5.0].map(|m| m * 10f64.powi(exp)))
        .filter(|tick| (lo..=hi).contains(tick))
        .collect()
}

fn draw_latency(series: &Series<'_>, workload: Workload, path: &Path) -> Result<(), String> {
    let text = text_available_from(FONT_ENV);
    let values = series
        .iter()
        .flat_map(|(_, pts)| pts.iter().flat_map(|(_, p)| [p.p50_ms, p.p99_ms]));
    let (lo, hi) = values.fold((f64::MAX, 0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    let (y0, y1) = if hi > 0.0 {
        ((lo * 0.7).max(0.01), hi * 1.5)
    } else {
        (0.1, 100.0)
    };
    let (x0, x1) = x_range(series);
    let root = BitMapBackend::new(path, (WIDTH, HEIGHT)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let mut builder = ChartBuilder::on(&root);
    builder.margin(20);
    if text {
        builder
            .caption(
                format!(
                    "{}: {} latency vs clients",
                    workload.name(),
                    headline(workload)
                ),
                (FAMILY, 24),
            )
            .x_label_area_size(50)
            .y_label_area_size(70);
    }
    let mut chart = builder
        .build_cartesian_2d(
            (x0..x1).log_scale(),
            (y0..y1).log_scale().with_key_points(ticks_1_2_5(y0, y1)),
        )
        .map_err(|e| e.to_string())?;
    let mut mesh = chart.configure_mesh();
    if text {
        mesh.x_desc("clients (closed loop)")
            .y_desc("latency (ms, log)")
            .x_label_formatter(&|v| format!("{v:.0}"))
            .y_label_formatter(&|v| format!("{v}"))
            .label_style((FAMILY, 14));
    }
    mesh.draw().map_err(|e| e.to_string())?;
    for (backend, pts) in series {
        let c = color(backend);
        for (label, get, marker_size) in [
            ("p50", (|p: &Point| p.p50_ms) as fn(&Point) -> f64, 4),
            ("p99", |p: &Point| p.p99_ms, 6),
        ] {
            let line: Vec<(f64, f64)> = pts.iter().map(|(x, p)| (*x, get(p))).collect();
            let style = if label == "p50" {
                c.stroke_width(3)
            } else {
                c.mix(0.6).stroke_width(2)
            };
            let s = chart
                .draw_series(LineSeries::new(line.clone(), style))
                .map_err(|e| e.to_string())?;
            if text {
                s.label(format!("{backend} {label}"))
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
            }
            chart
                .draw_series(line.iter().map(|&(x, y)| {
                    if label == "p50" {
                        Circle::new((x, y), marker_size, c.filled()).into_dyn()
                    } else {
                        TriangleMarker::new((x, y), marker_size, c.mix(0.6).filled()).into_dyn()
                    }
                }))
                .map_err(|e| e.to_string())?;
        }
    }
    if text {
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .label_font((FAMILY, 14))
            .draw()
            .map_err(|e| e.to_string())?;
    }
    root.present().map_err(|e| e.to_string())
}

fn draw_throughput(series: &Series<'_>, workload: Workload, path: &Path) -> Result<(), String> {
    let text = text_available_from(FONT_ENV);
    let hi = series
        .iter()
        .flat_map(|(_, pts)| pts.iter().map(|(_, p)| p.throughput))
        .fold(0.0, f64::max);
    let y1 = if hi > 0.0 { hi * 1.2 } else { 1.0 };
    let (x0, x1) = x_range(series);
    let root = BitMapBackend::new(path, (WIDTH, HEIGHT)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let mut builder = ChartBuilder::on(&root);
    builder.margin(20);
    if text {
        builder
            .caption(
                format!("{}: throughput vs clients", workload.name()),
                (FAMILY, 24),
            )
            .x_label_area_size(50)
            .y_label_area_size(80);
    }
    let mut chart = builder
        .build_cartesian_2d((x0..x1).log_scale(), 0f64..y1)
        .map_err(|e| e.to_string())?;
    let mut mesh = chart.configure_mesh();
    if text {
        mesh.x_desc("clients (closed loop)")
            .y_desc("operations / s")
            .x_label_formatter(&|v| format!("{v:.0}"))
            .y_label_formatter(&|v| format!("{v:.0}"))
            .label_style((FAMILY, 14));
    }
    mesh.draw().map_err(|e| e.to_string())?;
    for (backend, pts) in series {
        let c = color(backend);
        let line: Vec<(f64, f64)> = pts.iter().map(|(x, p)| (*x, p.throughput)).collect();
        let s = chart
            .draw_series(LineSeries::new(line.clone(), c.stroke_width(3)))
            .map_err(|e| e.to_string())?;
        if text {
            s.label(backend.clone()).legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(3))
            });
        }
        chart
            .draw_series(line.iter().map(|&p| Circle::new(p, 4, c.filled())))
            .map_err(|e| e.to_string())?;
    }
    if text {
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .label_font((FAMILY, 14))
            .draw()
            .map_err(|e| e.to_string())?;
    }
    root.present().map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_pngs_for_every_workload() {
        let point = Point {
            reps: 1,
            throughput: 100.0,
            p50_ms: 1.0,
            p99_ms: 3.0,
            cpu_us_per_op: 0.0,
            switches_per_op: 0.0,
            load_generator_us_per_op: 0.0,
            rss_mib: 0.0,
            errors: 0,
            other_cores: 0.0,
        };
        let mut points = BTreeMap::new();
        for backend in ["idem", "etcd"] {
            for clients in [1, 8, 64] {
                points.insert(
                    (backend.to_owned(), Workload::Claim, clients),
                    point.clone(),
                );
            }
        }
        let dir = tempfile::tempdir().unwrap();
        let files = draw_all(&points, dir.path()).unwrap();
        assert_eq!(files.len(), 2);
        for f in files {
            assert!(std::fs::read(&f).unwrap().starts_with(b"\x89PNG"));
        }
    }

    #[test]
    fn latency_ticks_are_1_2_5_per_decade_inside_the_range() {
        assert_eq!(ticks_1_2_5(0.45, 45.0), [0.5, 1.0, 2.0, 5.0, 10.0, 20.0]);
        assert_eq!(ticks_1_2_5(1.0, 1.0), [1.0]);
    }
}
