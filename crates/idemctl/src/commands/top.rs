//! `idemctl top keys|tenants`: the heaviest keys and tenants of the claims a node answered
//! recently (`Admin.TopKeys`, `TopTenants`).
//!
//! Each node counts the claims it received, so the answer is the view of the node the call
//! reaches; name one node with `--endpoints` to read each in turn. Counts decay (they halve
//! every five minutes without claims) and are rounded to whole claims here.

use clap::{Args, Subcommand};
use idem_client::{Client, HotKey, TenantActivity, Top};

use crate::error::CliError;
use crate::output::{Doc, Value};

/// `idemctl top ...`.
#[derive(Debug, Subcommand)]
pub enum TopCommand {
    /// The keys claimed most often recently (by keyed hash, never the key itself).
    #[command(
        long_about = "The keys claimed most often recently on the node reached, heaviest \
                      first: a key claimed again and again is a retry storm or a caller that \
                      reuses one key for everything. Keys appear as their keyed hash, the \
                      key_hash of the node's log lines (grep the logs for it). claims is an \
                      upper bound; overcount is how much of it may belong to other keys. \
                      Needs an operator of the tenant (of every tenant without --tenant).",
        after_help = "Example:\n  idemctl top keys --tenant acme --limit 10"
    )]
    Keys(TopKeysArgs),
    /// The tenants with the most claims recently, with their retries, mismatches and
    /// in-flight collisions.
    #[command(
        long_about = "The tenants with the most claims recently on the node reached, \
                      heaviest first, with how many were replays (retries of finished work), \
                      fingerprint mismatches (one key reused for another request) and \
                      in-flight collisions (retries while the first attempt ran). Needs an \
                      operator of every tenant.",
        after_help = "Example:\n  idemctl top tenants --limit 5"
    )]
    Tenants(TopTenantsArgs),
}

/// `idemctl top keys`.
#[derive(Debug, Args)]
pub struct TopKeysArgs {
    /// Only this tenant's keys.
    #[arg(long)]
    pub tenant: Option<String>,
    /// At most this many keys (1..=100).
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub limit: u32,
}

/// `idemctl top tenants`.
#[derive(Debug, Args)]
pub struct TopTenantsArgs {
    /// At most this many tenants (1..=100).
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub limit: u32,
}

const KEY_COLUMNS: &[&str] = &["tenant", "endpoint", "key_hash", "claims", "overcount"];
const TENANT_COLUMNS: &[&str] = &["tenant", "claims", "replays", "mismatches", "in_flight"];

/// Runs a `top` command.
pub async fn run(client: &Client, command: TopCommand) -> Result<Doc, CliError> {
    Ok(match command {
        TopCommand::Keys(args) => {
            keys_doc(client.top_keys(args.tenant.as_deref(), args.limit).await?)
        }
        TopCommand::Tenants(args) => tenants_doc(client.top_tenants(args.limit).await?),
    })
}

fn keys_doc(top: Top<HotKey>) -> Doc {
    let rows = top
        .rows
        .iter()
        .map(|k| {
            Doc::new()
                .with("tenant", k.tenant.as_str())
                .with("endpoint", k.endpoint.as_str())
                .with("key_hash", k.key_hash.as_str())
                .with("claims", whole(k.claims))
                .with("overcount", whole(k.overcount))
        })
        .collect();
    with_half_life(rows, KEY_COLUMNS, &top)
}

fn tenants_doc(top: Top<TenantActivity>) -> Doc {
    let rows = top
        .rows
        .iter()
        .map(|t| {
            Doc::new()
                .with("tenant", t.tenant.as_str())
                .with("claims", whole(t.claims))
                .with("replays", whole(t.replays))
                .with("mismatches", whole(t.mismatches))
                .with("in_flight", whole(t.in_flight))
        })
        .collect();
    with_half_life(rows, TENANT_COLUMNS, &top)
}

fn with_half_life<T>(rows: Vec<Doc>, columns: &'static [&'static str], top: &Top<T>) -> Doc {
    let half_life_ms = u64::try_from(top.half_life.as_millis()).unwrap_or(u64::MAX);
    Doc::new()
        .with("rows", Value::Rows { rows, columns })
        .with("half_life_ms", half_life_ms)
}

/// A decayed count rounded to whole claims (never negative).
fn whole(count: f64) -> u64 {
    count.round().max(0.0) as u64
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn counts_are_rounded_and_rows_keep_their_order() {
        let top = Top {
            rows: vec![
                TenantActivity {
                    tenant: "acme".into(),
                    claims: 12.6,
                    replays: 3.2,
                    mismatches: 0.0,
                    in_flight: 0.4,
                },
                TenantActivity {
                    tenant: "globex".into(),
                    claims: 2.0,
                    replays: 0.0,
                    mismatches: 1.0,
                    in_flight: 0.0,
                },
            ],
            half_life: Duration::from_secs(300),
        };
        let text = format!("{:?}", tenants_doc(top));
        let (acme, globex) = (text.find("acme").unwrap(), text.find("globex").unwrap());
        assert!(acme < globex, "{text}");
        assert!(
            text.contains("Num(13)") && text.contains("Num(300000)"),
            "{text}"
        );
        assert_eq!((whole(-0.2), whole(2.5)), (0, 3));
    }
}
