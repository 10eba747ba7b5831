//! `idemd`: runs one idem node.
//!
//! Thin on purpose: parse and validate the configuration, install logging, start the node,
//! wait for SIGTERM/SIGINT, shut down. Exit codes: 0 after a clean shutdown, 2 for an
//! invalid configuration (every problem printed on its own line), 1 for anything else.

use std::process::ExitCode;

use idem_server::config::{ConfigError, Invocation};
use idem_server::{shutdown, telemetry, Config, Node};

/// mimalloc instead of glibc's malloc: allocation was ~10 % of a leader's CPU under load
/// (docs/performance.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let Invocation {
        config,
        print_config,
    } = match Config::from_env() {
        Ok(invocation) => invocation,
        Err(ConfigError::Cli(error)) => error.exit(),
        Err(error @ ConfigError::Invalid(_)) => {
            for line in error.to_string().lines() {
                eprintln!("idemd: invalid configuration: {line}");
            }
            return ExitCode::from(2);
        }
    };
    if print_config {
        print!("{}", config.to_toml());
        return ExitCode::SUCCESS;
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("idemd")
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("idemd: cannot start the async runtime: {error}");
            return ExitCode::from(1);
        }
    };
    // Inside the runtime: the trace exporter's gRPC channel is spawned on it.
    let telemetry = match runtime.block_on(async {
        telemetry::init(
            config.log_format,
            &config.log_level,
            config.telemetry.otlp_endpoint.as_deref(),
        )
    }) {
        Ok(telemetry) => telemetry,
        Err(error) => {
            eprintln!("idemd: cannot initialise logging: {error}");
            return ExitCode::from(2);
        }
    };
    let code = runtime.block_on(run(config));
    // The last spans, while the runtime that carries the exporter's channel still runs.
    telemetry.shutdown();
    // Do not wait for stray blocking tasks (a stuck scan) once the node has stopped.
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    code
}

async fn run(config: Config) -> ExitCode {
    let signals = shutdown::Signals::install();
    let node = match Node::start(config).await {
        Ok(node) => node,
        Err(error) => {
            tracing::error!(%error, "node failed to start");
            return ExitCode::from(u8::try_from(error.exit_code()).unwrap_or(1));
        }
    };
    tokio::spawn(signals.cancel_on_first(node.shutdown_token()));
    match node.stopped().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!(%error, "node stopped with an error");
            ExitCode::from(1)
        }
    }
}
