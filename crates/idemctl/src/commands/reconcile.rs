//! `idemctl reconcile run`: the SDK's reconciler from the command line, once or as a small
//! daemon.
//!
//! `idemctl op reconcile` is the manual form (a person decides one record); this command
//! asks the downstream and decides every record whose outcome it can establish, through the
//! same version-checked, audited `Admin.Reconcile`. It needs an operator of the tenants to
//! list records and an admin of them to reconcile (docs/security.md), and runs with the
//! caller's credentials.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::{ArgGroup, Args, Subcommand, ValueEnum};
use idem_client::reconcile::{
    json_pointer, serve_metrics, AbsentPolicy, CommandCheck, Counts, HttpCheck, HttpCheckConfig,
    Item, Metrics, PassReport, Reconciler, ReconcilerOptions, RemoteCheck, DEFAULT_MAX_BODY,
    DEFAULT_MAX_OUTPUT,
};
use idem_client::Client;

use super::operator;
use crate::cli::{duration, Format};
use crate::error::CliError;
use crate::output::{emit, Doc, Value};

/// `idemctl reconcile ...`.
#[derive(Debug, Subcommand)]
pub enum ReconcileCommand {
    /// Settle NEEDS_RECONCILIATION and stuck CALLING records by asking the downstream.
    #[command(
        long_about = "Settle the records whose outcome is unknown by asking the downstream \
                      about their operation id (the idempotency key the service gave it): \
                      NEEDS_RECONCILIATION records and PENDING/IN_PROGRESS records at stage \
                      CALLING unchanged for --stuck-after. Found: COMPLETED with the \
                      downstream's reference as resource_id. Definitely absent: \
                      RETRYABLE_FAILURE (--absent retry), CANCELLED (--absent cancel) or \
                      TERMINAL_FAILURE (--absent fail). \
                      Unknown or a failed check: left alone and counted. Every change is \
                      version-checked and audited, so two reconcilers at once settle each \
                      record once (the loser counts a conflict). Needs an operator to list \
                      and an admin to reconcile. One pass, or --watch to repeat every \
                      --interval (one summary per pass; with -w json, one object per line).",
        after_help = "Examples:\n  idemctl reconcile run --tenant acme --endpoint 'POST /v1/charges' \\\n    \
                      --http-template 'https://psp.example/charges?idempotency_key={operation_id}' \\\n    \
                      --json-path '$.data[0].id' --missing-means-absent --dry-run\n  \
                      idemctl reconcile run --command '/usr/local/bin/psp-lookup {operation_id}' \\\n    \
                      --absent fail --watch --interval 1m --metrics-addr 127.0.0.1:9464"
    )]
    Run(RunArgs),
}

/// `idemctl reconcile run`.
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("check").required(true).args(["http_template", "command"])))]
pub struct RunArgs {
    /// Only this tenant's records.
    #[arg(long)]
    pub tenant: Option<String>,
    /// Only records of this endpoint, "METHOD /route".
    #[arg(long, value_name = "METHOD /ROUTE")]
    pub endpoint: Option<String>,
    /// Also examine PENDING/IN_PROGRESS records at stage CALLING unchanged this long (keep it
    /// well above the longest downstream call).
    #[arg(long, value_parser = duration, default_value = "5m")]
    pub stuck_after: Duration,
    /// HTTP check: GET this URL, {operation_id} replaced (http:// or https://).
    #[arg(long, value_name = "URL")]
    pub http_template: Option<String>,
    /// HTTP check: JSON pointer (/data/0/id) or path ($.data[0].id) of the reference
    /// [default: /id].
    #[arg(long)]
    pub json_path: Option<String>,
    /// HTTP check: pointer or path of a status value deciding found/absent.
    #[arg(long)]
    pub status_path: Option<String>,
    /// HTTP check: a value at --status-path meaning found (repeatable).
    #[arg(long = "found-value")]
    pub found_values: Vec<String>,
    /// HTTP check: a value at --status-path meaning definitely absent (repeatable).
    #[arg(long = "absent-value")]
    pub absent_values: Vec<String>,
    /// HTTP check: HTTP statuses meaning definitely absent.
    #[arg(long = "absent-status", value_delimiter = ',', default_value = "404")]
    pub absent_statuses: Vec<u16>,
    /// HTTP check: a 2xx answer with nothing at --json-path is absent (a search answering an
    /// empty list), not unknown.
    #[arg(long)]
    pub missing_means_absent: bool,
    /// HTTP check: an extra request header "name: value" (repeatable).
    #[arg(long = "header", value_name = "NAME: VALUE", value_parser = header)]
    pub headers: Vec<(String, String)>,
    /// HTTP check: CA certificates (PEM) for https:// (default: the system bundle).
    #[arg(long, value_name = "FILE")]
    pub http_cacert: Option<PathBuf>,
    /// Command check: program and arguments split on spaces (no shell), one with
    /// {operation_id}; exit 0 = found (stdout: the reference), 10 = absent, 11 = unknown.
    #[arg(long, value_name = "PROGRAM ARGS")]
    pub command: Option<String>,
    /// Time allowed for one check.
    #[arg(long, value_parser = duration, default_value = "10s")]
    pub check_timeout: Duration,
    /// What a definitely absent operation becomes.
    #[arg(long, value_enum, default_value_t = Absent::Retry)]
    pub absent: Absent,
    /// Downstream checks per second.
    #[arg(long, default_value_t = 5.0)]
    pub rate: f64,
    /// Checks allowed back to back before --rate applies.
    #[arg(long, default_value_t = 1)]
    pub burst: u32,
    /// Status code of the result stored for a found operation.
    #[arg(long, default_value_t = 200)]
    pub completed_status: u16,
    /// Decide and report; write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Repeat passes until interrupted (SIGINT/SIGTERM).
    #[arg(long)]
    pub watch: bool,
    /// Time between the starts of two passes (implies --watch).
    #[arg(long, value_parser = duration)]
    pub interval: Option<Duration>,
    /// Serve Prometheus metrics on this address (GET /metrics) while watching.
    #[arg(long, value_name = "HOST:PORT")]
    pub metrics_addr: Option<SocketAddr>,
    /// Records per listing page (at most 1000).
    #[arg(long, default_value_t = 100)]
    pub page_size: u32,
    /// The start of each audit entry's reason (the downstream's answer is appended).
    #[arg(long, env = "IDEMCTL_REASON", default_value = "idemctl reconcile run")]
    pub reason: String,
    /// Who decides (stored in the audit entries); default $USER.
    #[arg(long, env = "IDEMCTL_OPERATOR")]
    pub operator: Option<String>,
}

/// `--absent`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Absent {
    /// RETRYABLE_FAILURE: the next claim of the key runs again.
    Retry,
    /// TERMINAL_FAILURE: the failure is replayed, like a cancellation.
    Fail,
    /// CANCELLED: nothing happened and the key is closed (needs every node at a release that
    /// has CANCELLED reconcile targets).
    Cancel,
}

/// Default `--json-path`: a lookup answering the charge object itself.
const DEFAULT_JSON_PATH: &str = "/id";

/// Default `--interval` of `--watch`.
const DEFAULT_INTERVAL: Duration = Duration::from_secs(60);

/// The columns of the records table.
const ITEM_COLUMNS: &[&str] = &[
    "operation_id",
    "tenant",
    "endpoint",
    "state",
    "stage",
    "action",
    "detail",
];

/// Parses `name: value`.
fn header(text: &str) -> Result<(String, String), String> {
    match text.split_once(':') {
        Some((name, value)) if !name.trim().is_empty() => {
            Ok((name.trim().to_owned(), value.trim().to_owned()))
        }
        _ => Err(format!("expected \"NAME: VALUE\", got {text:?}")),
    }
}

/// `idemctl reconcile run`.
pub async fn run(client: Client, args: RunArgs, format: Format) -> Result<Doc, CliError> {
    let watch = args.watch || args.interval.is_some();
    if args.metrics_addr.is_some() && !watch {
        return Err(CliError::Usage("--metrics-addr needs --watch".into()));
    }
    let interval = args.interval.unwrap_or(DEFAULT_INTERVAL);
    let metrics_addr = args.metrics_addr;
    let check = check(&args)?;
    let reconciler = Reconciler::new(client, check, options(args), Metrics::new())
        .map_err(|e| CliError::Usage(e.to_string()))?;
    if !watch {
        return Ok(report_doc(&reconciler.run_pass().await?));
    }
    if let Some(addr) = metrics_addr {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| CliError::Usage(format!("cannot listen on {addr}: {e}")))?;
        tokio::spawn(serve_metrics(
            listener,
            reconciler.metrics().clone(),
            shutdown(),
        ));
    }
    let mut totals = Counts::default();
    let mut passes = 0u64;
    reconciler
        .watch(interval, shutdown(), |outcome| {
            if let Ok(report) = &outcome {
                passes += 1;
                add(&mut totals, &report.counts);
            }
            emit(
                format,
                &outcome.map(|r| report_doc(&r)).map_err(CliError::from),
            );
        })
        .await;
    Ok(Doc::new()
        .with("passes", passes)
        .extend(counts_doc(&totals)))
}

/// The check the flags describe.
fn check(args: &RunArgs) -> Result<Arc<dyn RemoteCheck>, CliError> {
    let usage = |e: idem_client::reconcile::ConfigError| CliError::Usage(e.to_string());
    if let Some(line) = &args.command {
        if uses_http_flags(args) {
            return Err(CliError::Usage(
                "the HTTP check's flags need --http-template, not --command".into(),
            ));
        }
        let check =
            CommandCheck::from_line(line, args.check_timeout, DEFAULT_MAX_OUTPUT).map_err(usage)?;
        return Ok(Arc::new(check));
    }
    if args.status_path.is_none()
        && !(args.found_values.is_empty() && args.absent_values.is_empty())
    {
        return Err(CliError::Usage(
            "--found-value and --absent-value need --status-path".into(),
        ));
    }
    let template = args.http_template.clone().unwrap_or_default();
    let reference = args.json_path.as_deref().unwrap_or(DEFAULT_JSON_PATH);
    let config = HttpCheckConfig {
        status_pointer: args
            .status_path
            .as_deref()
            .map(json_pointer)
            .transpose()
            .map_err(usage)?,
        found_values: args.found_values.clone(),
        absent_values: args.absent_values.clone(),
        absent_statuses: args.absent_statuses.clone(),
        missing_means_absent: args.missing_means_absent,
        headers: args.headers.clone(),
        ca_file: args.http_cacert.clone(),
        timeout: args.check_timeout,
        max_body: DEFAULT_MAX_BODY,
        ..HttpCheckConfig::new(template, json_pointer(reference).map_err(usage)?)
    };
    Ok(Arc::new(HttpCheck::new(config).map_err(usage)?))
}

/// True when a flag of the HTTP check is given.
fn uses_http_flags(args: &RunArgs) -> bool {
    args.json_path.is_some()
        || args.status_path.is_some()
        || !args.found_values.is_empty()
        || !args.absent_values.is_empty()
        || args.missing_means_absent
        || !args.headers.is_empty()
        || args.http_cacert.is_some()
}

fn options(args: RunArgs) -> ReconcilerOptions {
    ReconcilerOptions {
        tenant: args.tenant,
        endpoint: args.endpoint,
        stuck_after: args.stuck_after,
        absent: match args.absent {
            Absent::Retry => AbsentPolicy::Retry,
            Absent::Fail => AbsentPolicy::Fail,
            Absent::Cancel => AbsentPolicy::Cancel,
        },
        checks_per_second: args.rate,
        burst: args.burst,
        dry_run: args.dry_run,
        page_size: args.page_size,
        completed_status: args.completed_status,
        operator: operator(args.operator),
        reason: args.reason,
    }
}

/// Completes on SIGINT or SIGTERM.
async fn shutdown() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term => {}
    }
}

fn add(totals: &mut Counts, pass: &Counts) {
    totals.scanned += pass.scanned;
    totals.completed += pass.completed;
    totals.retryable_failure += pass.retryable_failure;
    totals.terminal_failure += pass.terminal_failure;
    totals.cancelled += pass.cancelled;
    totals.unknown += pass.unknown;
    totals.contradictions += pass.contradictions;
    totals.check_errors += pass.check_errors;
    totals.conflicts += pass.conflicts;
    totals.settle_errors += pass.settle_errors;
}

fn counts_doc(counts: &Counts) -> Doc {
    Doc::new()
        .with("scanned", counts.scanned)
        .with("completed", counts.completed)
        .with("retryable_failure", counts.retryable_failure)
        .with("terminal_failure", counts.terminal_failure)
        .with("cancelled", counts.cancelled)
        .with("unknown", counts.unknown)
        .with("contradictions", counts.contradictions)
        .with("check_errors", counts.check_errors)
        .with("conflicts", counts.conflicts)
        .with("settle_errors", counts.settle_errors)
}

fn report_doc(report: &PassReport) -> Doc {
    Doc::new()
        .with("dry_run", report.dry_run)
        .extend(counts_doc(&report.counts))
        .with(
            "records",
            Value::Rows {
                rows: report.items.iter().map(item_doc).collect(),
                columns: ITEM_COLUMNS,
            },
        )
}

fn item_doc(item: &Item) -> Doc {
    Doc::new()
        .with("operation_id", item.operation_id.to_string())
        .with("tenant", item.tenant.as_str())
        .with("endpoint", item.endpoint.as_str())
        .with("state", item.state.name())
        .with("stage", item.stage.name())
        .with("action", item.action.name())
        .with("detail", item.detail.as_str())
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::cli::{Cli, Command};

    fn parse(args: &[&str]) -> Result<RunArgs, clap::Error> {
        let mut argv = vec!["idemctl", "reconcile", "run"];
        argv.extend_from_slice(args);
        match Cli::try_parse_from(argv)?.command {
            Command::Reconcile(ReconcileCommand::Run(args)) => Ok(args),
            _ => unreachable!(),
        }
    }

    #[test]
    fn one_check_kind_is_required() {
        assert!(parse(&[]).is_err());
        let both = [
            "--http-template",
            "http://p/{operation_id}",
            "--command",
            "x {operation_id}",
        ];
        assert!(parse(&both).is_err());
        let mixed = parse(&["--json-path", "/id", "--command", "x {operation_id}"]).unwrap();
        assert!(matches!(check(&mixed), Err(CliError::Usage(_))));
        let orphan = parse(&[
            "--http-template",
            "http://p/{operation_id}",
            "--found-value",
            "ok",
        ]);
        assert!(matches!(check(&orphan.unwrap()), Err(CliError::Usage(_))));
        let args = parse(&["--command", "/bin/check {operation_id}", "--absent", "fail"]).unwrap();
        assert_eq!(options(args).absent, AbsentPolicy::Fail);
        let args = parse(&[
            "--command",
            "/bin/check {operation_id}",
            "--absent",
            "cancel",
        ])
        .unwrap();
        assert_eq!(options(args).absent, AbsentPolicy::Cancel);
    }

    #[test]
    fn http_flags_build_the_check() {
        let args = parse(&[
            "--http-template",
            "http://psp/charges?idempotency_key={operation_id}",
            "--json-path",
            "$.data[0].id",
            "--header",
            "authorization: Bearer t",
            "--dry-run",
        ])
        .unwrap();
        assert_eq!(args.headers, [("authorization".into(), "Bearer t".into())]);
        assert_eq!(check(&args).unwrap().kind(), "http");
        assert!(options(args).dry_run);
        let bad = parse(&["--http-template", "http://psp/charges"]).unwrap();
        assert!(matches!(check(&bad), Err(CliError::Usage(_))));
    }

    #[test]
    fn report_lists_counts_and_records() {
        let report = PassReport {
            dry_run: true,
            counts: Counts {
                scanned: 2,
                completed: 1,
                unknown: 1,
                ..Counts::default()
            },
            items: Vec::new(),
        };
        let doc = report_doc(&report);
        assert_eq!(doc.get("completed"), Some(&Value::Num(1)));
        assert_eq!(doc.get("dry_run"), Some(&Value::Bool(true)));
    }
}
