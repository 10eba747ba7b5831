//! `idem-jepsen`: command line of the fault-injection harness.
//!
//! `check` re-checks a stored history (and its ledger) and prints the results; it is also what a
//! test run does at its end, so a stored run can be re-judged after a checker changes.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Parser, Subcommand};

use idem_jepsen::checker::SearchBudget;
use idem_jepsen::{check_all_with, plot, History, Ledger, Options};

/// Fault-injection harness for idem.
#[derive(Debug, Parser)]
#[command(name = "idem-jepsen", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Check a stored history (history.edn or JSON lines) and print the results as JSON.
    /// Exit status: 0 valid, 1 invalid, 2 error.
    Check(CheckArgs),
}

#[derive(Debug, clap::Args)]
struct CheckArgs {
    /// The history file.
    history: PathBuf,
    /// The side-effect ledger (default: ledger.edn, ledger.jsonl or ledger.json beside the
    /// history, if present).
    #[arg(long)]
    ledger: Option<PathBuf>,
    /// Also write results.json, results.edn, latency.png and rate.png into this directory.
    #[arg(long)]
    out: Option<PathBuf>,
    /// With --out, skip the plots.
    #[arg(long)]
    no_plots: bool,
    /// Linearizability search steps allowed per key.
    #[arg(long, default_value_t = SearchBudget::default().max_steps_per_key)]
    max_steps: u64,
    /// Linearizability search time allowed in total, in seconds.
    #[arg(long, default_value_t = SearchBudget::default().time_limit.as_secs())]
    time_limit: u64,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let outcome = match cli.command {
        Command::Check(args) => check(&args),
    };
    match outcome {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// The ledger given, or one found beside the history.
fn find_ledger(args: &CheckArgs) -> Option<PathBuf> {
    if args.ledger.is_some() {
        return args.ledger.clone();
    }
    let dir = args.history.parent().unwrap_or(Path::new("."));
    ["ledger.edn", "ledger.jsonl", "ledger.json"]
        .iter()
        .map(|name| dir.join(name))
        .find(|p| p.is_file())
}

fn check(args: &CheckArgs) -> anyhow::Result<bool> {
    let history = History::read(&args.history)?;
    let ledger = find_ledger(args)
        .map(|path| Ledger::read(&path))
        .transpose()?;
    let options = Options {
        linearizable: SearchBudget {
            max_steps_per_key: args.max_steps,
            time_limit: Duration::from_secs(args.time_limit),
        },
    };
    let results = check_all_with(&history, ledger.as_ref(), &options);
    if let Some(out) = &args.out {
        std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
        results.write(out)?;
        if !args.no_plots {
            plot::write_plots(&history, out)?;
            if !plot::text_available() {
                eprintln!("note: no font found (install fonts-dejavu-core or set IDEM_JEPSEN_FONT); plots drawn without text");
            }
        }
    }
    println!("{}", results.to_json_pretty());
    eprint!("{}", results.summary());
    Ok(results.valid)
}
