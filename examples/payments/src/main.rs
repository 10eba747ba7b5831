//! `payments`: the example payment service and its fake card provider, in one process.
//!
//! ```sh
//! cargo run --release -p payments -- --idem http://127.0.0.1:7400
//! ```

use std::net::SocketAddr;
use std::sync::Arc;

use clap::Parser;
use idem_client::{Client, ClientOptions};
use payments::provider::Provider;

/// The example payment service behind the idem-http layer.
#[derive(Debug, Parser)]
#[command(version)]
struct Args {
    /// idem API endpoints, comma-separated.
    #[arg(
        long,
        env = "IDEM_ENDPOINTS",
        default_value = "http://127.0.0.1:7400",
        value_delimiter = ','
    )]
    idem: Vec<String>,
    /// Address of the payment service.
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// Address of the fake card provider.
    #[arg(long, default_value = "127.0.0.1:8090")]
    provider_listen: SocketAddr,
    /// Charge through the provider at this URL (e.g. http://127.0.0.1:8090) instead of
    /// starting the fake one in this process; it then outlives this process (a killed worker
    /// leaves its charges behind, as a real provider does).
    #[arg(long, value_name = "URL", conflicts_with = "provider_listen")]
    provider: Option<String>,
    /// The scope environment of the records.
    #[arg(long, default_value = "test")]
    environment: String,
    /// Store each charge answer verbatim (up to this many bytes) and replay it byte for
    /// byte, instead of re-rendering replays from the charge (the default).
    #[arg(long, value_name = "BYTES")]
    store_body: Option<usize>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    let args = Args::parse();
    let idem = Client::connect(args.idem.clone(), ClientOptions::default())?;
    let provider_base = args
        .provider
        .clone()
        .unwrap_or_else(|| format!("http://{}", args.provider_listen));
    let app = payments::app_with(idem, &provider_base, &args.environment, args.store_body);
    tracing::info!(listen = %args.listen, provider = %provider_base, idem = ?args.idem, "payments up");
    if args.provider.is_some() {
        payments::serve(args.listen, app).await?;
        return Ok(());
    }
    let provider = Arc::new(Provider::default()).router();
    tokio::try_join!(
        payments::serve(args.provider_listen, provider),
        payments::serve(args.listen, app),
    )?;
    Ok(())
}
