//! idemctl: the operator CLI of idem, in the spirit of etcdctl.
//!
//! `main` only parses, runs and prints: the command line is in [`cli`], execution in
//! [`commands`] (one SDK call per command, answering a [`output::Doc`]), rendering and exit
//! codes in [`output`] and [`error`]. `idemctl --help` documents every command.

mod cli;
mod commands;
mod error;
mod output;

use std::process::ExitCode;

use clap::error::ErrorKind;
use clap::Parser;

use crate::cli::{Cli, Format};
use crate::error::CliError;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let cli = match Cli::try_parse_from(&args) {
        Ok(cli) => cli,
        Err(e) => return usage_error(e, wants_json(&args)),
    };
    let format = match &cli.command {
        cli::Command::Audit(cli::AuditCommand::List(list)) if list.json => Format::Json,
        _ => cli.write_out,
    };
    let result = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::Usage(format!("cannot start the async runtime: {e}")))
        .and_then(|runtime| runtime.block_on(commands::run(cli)));
    ExitCode::from(output::emit(format, &result))
}

/// Prints a command-line error: clap's own text, or `{"error": "USAGE", ...}` when JSON
/// output was asked for. Help and version requests are not errors.
fn usage_error(error: clap::Error, json: bool) -> ExitCode {
    let informational = matches!(
        error.kind(),
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion
    );
    if informational || !json {
        error.exit();
    }
    let result = Err(CliError::Usage(usage_message(&error.render().to_string())));
    ExitCode::from(output::emit(Format::Json, &result))
}

/// clap's error text up to the usage lines, on one line, without the `error: ` prefix.
fn usage_message(rendered: &str) -> String {
    let lines: Vec<&str> = rendered
        .lines()
        .take_while(|line| !line.trim().is_empty())
        .map(str::trim)
        .collect();
    let text = lines.join(" ");
    text.strip_prefix("error: ").unwrap_or(&text).to_owned()
}

/// True when the raw arguments ask for `-w json` (checked when clap itself failed).
fn wants_json(args: &[String]) -> bool {
    let mut previous = "";
    for arg in args {
        let value = match arg.as_str() {
            "-wjson" | "--write-out=json" | "-w=json" => return true,
            a if previous == "-w" || previous == "--write-out" => a,
            _ => "",
        };
        if value == "json" {
            return true;
        }
        previous = arg;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn usage_message_keeps_the_missing_arguments() {
        let rendered = "error: the following required arguments were not provided:\n  --fence <FENCE>\n\nUsage: idemctl start\n";
        assert_eq!(
            usage_message(rendered),
            "the following required arguments were not provided: --fence <FENCE>"
        );
    }

    #[test]
    fn json_is_detected_in_unparsable_command_lines() {
        assert!(wants_json(&args(&["idemctl", "-w", "json", "claim"])));
        assert!(wants_json(&args(&["idemctl", "claim", "--write-out=json"])));
        assert!(wants_json(&args(&["idemctl", "-wjson"])));
        assert!(!wants_json(&args(&["idemctl", "claim", "--body", "json"])));
        assert!(!wants_json(&args(&["idemctl", "-w", "table"])));
    }
}
