//! A single PostgreSQL server through `tokio-postgres`, with the idempotency protocol written
//! as the obvious SQL a team would run instead of idem: one row per key in a table with a
//! primary key, every statement its own (autocommit) transaction.
//!
//! - claim: `INSERT … ON CONFLICT (key) DO NOTHING RETURNING fence`. A returned row acquires
//!   (the token is the row's fence); otherwise a second statement reads the existing row:
//!   COMPLETED is a replay, PENDING someone else's claim. The fingerprint is checked
//!   client-side, as the etcd backend does.
//! - complete: `UPDATE … SET state = 'COMPLETED', result = … WHERE key = … AND fence = … AND
//!   state = 'PENDING'`, so a worker whose claim was superseded (a takeover would bump the
//!   fence) cannot overwrite the result; no row updated is a stale token.
//!
//! A new row holds fence 1, idem's first fence; the benchmark never takes an expired claim
//! over (neither does the etcd backend), so no statement bumps it. The row keeps the fields
//! etcd's JSON record keeps (state, fence, holder, fingerprint, lease expiry, result) under
//! the same scoped key, so the stores move comparable bytes.
//!
//! One value is one connection, and a Postgres connection is one server process that runs its
//! statements one after another: concurrent calls on one value queue behind each other, so
//! the comparison gives every client its own connection (`--connection-per-client`), as
//! pgbench does.

use tokio_postgres::{Client, Config, NoTls, Statement};

use super::{Backend, CallError, ClaimResult, FINGERPRINT, LEASE_MS, PREFIX};
use crate::cli::TargetArgs;
use crate::error::BenchError;

/// User and database of an endpoint given as `host:port` (`scripts/bench/postgres.sh` makes
/// both).
const DEFAULT_NAME: &str = "idem_bench";

/// The fence of a key's first claim.
const FIRST_FENCE: i64 = 1;

/// The stored result of a completed record: the bytes of the etcd record's `result` field.
const RESULT: &[u8] = br#"{"status_code":201,"resource_id":"ch_bench"}"#;

const CREATE_TABLE: &str = "CREATE TABLE IF NOT EXISTS idem_keys (
    key text PRIMARY KEY,
    state text NOT NULL,
    fence bigint NOT NULL,
    holder text,
    fingerprint text,
    lease_expiry timestamptz,
    result bytea
)";

const READ: &str = "SELECT state, fence, fingerprint FROM idem_keys WHERE key = $1";

const COMPLETE: &str = "UPDATE idem_keys SET state = 'COMPLETED', result = $2 \
     WHERE key = $1 AND fence = $3 AND state = 'PENDING'";

/// The claim's insert; the lease is taken on the server's clock.
fn insert_sql() -> String {
    format!(
        "INSERT INTO idem_keys (key, state, fence, holder, fingerprint, lease_expiry) \
         VALUES ($1, 'PENDING', {FIRST_FENCE}, $2, $3, now() + interval '{LEASE_MS} milliseconds') \
         ON CONFLICT (key) DO NOTHING RETURNING fence"
    )
}

/// One connection (one server backend process) with the protocol's statements prepared.
pub struct PostgresBackend {
    client: Client,
    insert: Statement,
    read: Statement,
    complete: Statement,
}

/// The connection settings of `endpoint`: a `postgresql://` URL or `key=value` string as
/// given, or `host:port` with user and database `idem_bench`.
fn config(endpoint: &str) -> Result<Config, String> {
    if endpoint.contains("://") || endpoint.contains('=') {
        return endpoint.parse().map_err(|e| format!("{e}"));
    }
    let (host, port) = endpoint
        .rsplit_once(':')
        .ok_or_else(|| format!("expected host:port or a postgresql:// URL, got '{endpoint}'"))?;
    let port = port
        .parse()
        .map_err(|e| format!("bad port '{port}': {e}"))?;
    let mut config = Config::new();
    config
        .host(host)
        .port(port)
        .user(DEFAULT_NAME)
        .dbname(DEFAULT_NAME);
    Ok(config)
}

impl PostgresBackend {
    /// Connects to `endpoint`, creates the table when `create`, prepares the statements.
    async fn open(endpoint: &str, create: bool) -> Result<Self, String> {
        let mut config = config(endpoint)?;
        config.application_name("idem-bench");
        let (client, connection) = config.connect(NoTls).await.map_err(|e| e.to_string())?;
        // The connection's I/O runs on its own task; it ends when `client` is dropped.
        tokio::spawn(connection);
        if create {
            client
                .batch_execute(CREATE_TABLE)
                .await
                .map_err(|e| e.to_string())?;
        }
        let insert = client
            .prepare(&insert_sql())
            .await
            .map_err(|e| e.to_string())?;
        let read = client.prepare(READ).await.map_err(|e| e.to_string())?;
        let complete = client.prepare(COMPLETE).await.map_err(|e| e.to_string())?;
        Ok(PostgresBackend {
            client,
            insert,
            read,
            complete,
        })
    }
}

impl Backend for PostgresBackend {
    const NAME: &'static str = "postgres";

    async fn connect(target: &TargetArgs, index: usize) -> Result<Self, BenchError> {
        let endpoints = &target.endpoints();
        let endpoint = endpoints
            .get(index % endpoints.len().max(1))
            .ok_or_else(|| BenchError::Argument("no postgres endpoint".into()))?;
        PostgresBackend::open(endpoint, index == 0)
            .await
            .map_err(|message| BenchError::Connect {
                backend: Self::NAME,
                endpoint: endpoint.clone(),
                message,
            })
    }

    async fn claim(&self, key: &str) -> Result<ClaimResult, CallError> {
        let path = format!("{PREFIX}{key}");
        let holder = format!("{key}-holder");
        let inserted = self
            .client
            .query_opt(&self.insert, &[&path, &holder, &FINGERPRINT])
            .await?;
        if let Some(row) = inserted {
            let fence: i64 = row.try_get(0)?;
            let fence = u64::try_from(fence)
                .map_err(|_| CallError::Record(format!("negative fence {fence}")))?;
            return Ok(ClaimResult::Acquired(fence));
        }
        let row = self
            .client
            .query_opt(&self.read, &[&path])
            .await?
            .ok_or_else(|| CallError::Record("the conflicting row is gone".into()))?;
        let state: &str = row.try_get(0)?;
        let fingerprint: Option<&str> = row.try_get(2)?;
        Ok(match state {
            _ if fingerprint != Some(FINGERPRINT) => ClaimResult::Other,
            "COMPLETED" => ClaimResult::Replayed,
            "PENDING" => ClaimResult::InProgress,
            _ => ClaimResult::Other,
        })
    }

    async fn complete(&self, key: &str, token: u64) -> Result<(), CallError> {
        let path = format!("{PREFIX}{key}");
        let fence = i64::try_from(token)
            .map_err(|_| CallError::Record(format!("fence {token} out of range")))?;
        let updated = self
            .client
            .execute(&self.complete, &[&path, &RESULT, &fence])
            .await?;
        if updated == 1 {
            Ok(())
        } else {
            Err(CallError::StaleToken)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_name_the_bench_database_or_are_used_as_given() {
        let c = config("127.0.0.1:25432").unwrap();
        assert_eq!(c.get_user(), Some(DEFAULT_NAME));
        assert_eq!(c.get_dbname(), Some(DEFAULT_NAME));
        assert_eq!(c.get_ports(), [25432]);
        let c = config("postgresql://me@localhost:5433/other").unwrap();
        assert_eq!((c.get_user(), c.get_dbname()), (Some("me"), Some("other")));
        assert!(config("localhost").is_err());
        assert!(config("localhost:x").is_err());
        assert!(insert_sql().contains("interval '30000 milliseconds'"));
    }
}
