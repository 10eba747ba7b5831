//! Where a key's raw text comes from: flag, then `IDEM_*` environment variable, then the
//! file; and the file's own checks (syntax, unknown keys).

use std::path::{Path, PathBuf};

use clap::parser::ValueSource;
use clap::ArgMatches;

/// One scalar key: its dotted name in the file; its flag and environment variable derive
/// from `arg` (the clap id, `raft_heartbeat_interval` → `--raft-heartbeat-interval`,
/// `IDEM_RAFT_HEARTBEAT_INTERVAL`).
#[derive(Clone, Copy)]
pub(super) struct Key {
    pub(super) file: &'static str,
    pub(super) arg: &'static str,
}

macro_rules! key {
    ($file:literal, $arg:literal) => {
        Key {
            file: $file,
            arg: $arg,
        }
    };
}

pub(super) const NODE_ID: Key = key!("node_id", "node_id");
pub(super) const DATA_DIR: Key = key!("data_dir", "data_dir");
pub(super) const API_ADDR: Key = key!("api_addr", "api_addr");
pub(super) const RAFT_ADDR: Key = key!("raft_addr", "raft_addr");
pub(super) const HTTP_ADDR: Key = key!("http_addr", "http_addr");
pub(super) const REGION: Key = key!("region", "region");
pub(super) const ZONE: Key = key!("zone", "zone");
pub(super) const LOG_FORMAT: Key = key!("log_format", "log_format");
pub(super) const LOG_LEVEL: Key = key!("log_level", "log_level");
pub(super) const WRITE_TIMEOUT: Key = key!("write_timeout", "write_timeout");
pub(super) const READ_TIMEOUT: Key = key!("read_timeout", "read_timeout");
pub(super) const SWEEP_INTERVAL: Key = key!("sweep_interval", "sweep_interval");
pub(super) const SWEEP_BATCH: Key = key!("sweep_batch", "sweep_batch");
pub(super) const MAX_REQUEST_BYTES: Key = key!("max_request_bytes", "max_request_bytes");
pub(super) const MAX_BODY_BYTES: Key = key!("max_body_bytes", "max_body_bytes");
pub(super) const SHUTDOWN_GRACE: Key = key!("shutdown_grace", "shutdown_grace");
pub(super) const KEY_WARNINGS: Key = key!("key_warnings", "key_warnings");
pub(super) const RAFT_HEARTBEAT: Key = key!("raft.heartbeat_interval", "raft_heartbeat_interval");
pub(super) const RAFT_ELECTION: Key = key!("raft.election_timeout", "raft_election_timeout");
pub(super) const RAFT_SNAPSHOT_LOGS: Key = key!("raft.snapshot_logs", "raft_snapshot_logs");
pub(super) const TLS_CERT: Key = key!("tls.cert", "tls_cert");
pub(super) const TLS_KEY: Key = key!("tls.key", "tls_key");
pub(super) const TLS_CA: Key = key!("tls.ca", "tls_ca");
pub(super) const TLS_CLIENT_AUTH: Key = key!("tls.client_auth", "tls_client_auth");
pub(super) const PEER_TLS_CERT: Key = key!("peer_tls.cert", "peer_tls_cert");
pub(super) const PEER_TLS_KEY: Key = key!("peer_tls.key", "peer_tls_key");
pub(super) const PEER_TLS_CA: Key = key!("peer_tls.ca", "peer_tls_ca");
pub(super) const POLICY_LEASE: Key = key!("policy.lease", "default_lease");
pub(super) const POLICY_RETENTION: Key = key!("policy.retention", "default_retention");
pub(super) const POLICY_RISK: Key = key!("policy.risk", "default_risk");
pub(super) const POLICY_MAX_RESULT: Key =
    key!("policy.max_result_bytes", "default_max_result_bytes");

pub(super) const AUTH_MODE: Key = key!("auth.mode", "auth");
pub(super) const AUTH_CREDENTIALS: Key = key!("auth.credentials", "auth_credentials");
pub(super) const TELEMETRY_OTLP_ENDPOINT: Key = key!("telemetry.otlp_endpoint", "otlp_endpoint");
pub(super) const LOG_KEY_FILE: Key = key!("log_key_file", "log_key_file");

pub(super) const TOP_LEVEL_KEYS: &[&str] = &[
    "node_id",
    "data_dir",
    "api_addr",
    "raft_addr",
    "http_addr",
    "tls",
    "peer_tls",
    "region",
    "zone",
    "log_format",
    "log_level",
    "log_key_file",
    "write_timeout",
    "read_timeout",
    "sweep_interval",
    "sweep_batch",
    "max_request_bytes",
    "max_body_bytes",
    "shutdown_grace",
    "key_warnings",
    "raft",
    "policy",
    "policies",
    "cluster",
    "auth",
    "limits",
    "telemetry",
];
pub(super) const CLUSTER_KEYS: &[&str] = &["initial_members", "join"];
pub(super) const AUTH_KEYS: &[&str] = &["mode", "credentials"];
pub(super) const TELEMETRY_KEYS: &[&str] = &["otlp_endpoint"];
pub(super) const RAFT_KEYS: &[&str] = &["heartbeat_interval", "election_timeout", "snapshot_logs"];
pub(super) const POLICY_KEYS: &[&str] = &["lease", "retention", "risk", "max_result_bytes"];
pub(super) const ENDPOINT_POLICY_KEYS: &[&str] = &[
    "lease",
    "retention",
    "risk",
    "max_result_bytes",
    "lease_ceiling",
    "retention_ceiling",
    "max_result_bytes_ceiling",
];
pub(super) const TLS_KEYS: &[&str] = &["cert", "key", "ca", "client_auth"];
pub(super) const PEER_TLS_KEYS: &[&str] = &["cert", "key", "ca"];

impl Key {
    pub(super) fn env(self) -> String {
        format!("IDEM_{}", self.arg.to_ascii_uppercase())
    }

    pub(super) fn flag(self) -> String {
        format!("--{}", self.arg.replace('_', "-"))
    }
}

/// A raw value and where it came from.
pub(super) struct Raw {
    pub(super) text: String,
    pub(super) origin: String,
}

/// The layered sources of raw values.
pub(super) struct Sources<'a> {
    pub(super) matches: &'a ArgMatches,
    pub(super) env: &'a dyn Fn(&str) -> Option<String>,
    pub(super) file: Option<(toml::Table, PathBuf)>,
}

impl Sources<'_> {
    pub(super) fn raw(&self, key: Key, problems: &mut Vec<String>) -> Option<Raw> {
        if self.matches.value_source(key.arg) == Some(ValueSource::CommandLine) {
            if let Some(text) = self.matches.get_one::<String>(key.arg) {
                return Some(Raw {
                    text: text.clone(),
                    origin: format!("flag {}", key.flag()),
                });
            }
        }
        let env = key.env();
        if let Some(text) = (self.env)(&env) {
            return Some(Raw {
                text,
                origin: format!("environment {env}"),
            });
        }
        let (table, path) = self.file.as_ref()?;
        let value = lookup(table, key.file)?;
        let origin = format!("file {}", path.display());
        match scalar_text(value) {
            Some(text) => Some(Raw { text, origin }),
            None => {
                problems.push(format!(
                    "{} (from {origin}): expected a string or a number, got a {}",
                    key.file,
                    value.type_str()
                ));
                None
            }
        }
    }

    /// The value of `key`: parsed from the most specific source, else `default`.
    pub(super) fn get<T>(
        &self,
        key: Key,
        default: T,
        parse: impl Fn(&str) -> Result<T, String>,
        problems: &mut Vec<String>,
    ) -> T {
        let Some(raw) = self.raw(key, problems) else {
            return default;
        };
        match parse(raw.text.trim()) {
            Ok(value) => value,
            Err(why) => {
                problems.push(format!(
                    "{} = {:?} (from {}): {why}",
                    key.file, raw.text, raw.origin
                ));
                default
            }
        }
    }
}

pub(super) fn lookup<'t>(table: &'t toml::Table, dotted: &str) -> Option<&'t toml::Value> {
    let mut parts = dotted.split('.');
    let mut value = table.get(parts.next()?)?;
    for part in parts {
        value = value.as_table()?.get(part)?;
    }
    Some(value)
}

pub(super) fn scalar_text(value: &toml::Value) -> Option<String> {
    match value {
        toml::Value::String(s) => Some(s.clone()),
        toml::Value::Integer(i) => Some(i.to_string()),
        toml::Value::Float(f) => Some(f.to_string()),
        toml::Value::Boolean(b) => Some(b.to_string()),
        _ => None,
    }
}

pub(super) fn unknown_keys(table: &toml::Table, path: &Path) -> Vec<String> {
    let mut problems = Vec::new();
    let mut check = |prefix: &str, table: &toml::Table, known: &[&str]| {
        for key in table.keys() {
            if !known.contains(&key.as_str()) {
                problems.push(format!(
                    "{prefix}{key} (in file {}): unknown key; known keys: {}",
                    path.display(),
                    known.join(", ")
                ));
            }
        }
    };
    check("", table, TOP_LEVEL_KEYS);
    if let Some(raft) = table.get("raft").and_then(toml::Value::as_table) {
        check("raft.", raft, RAFT_KEYS);
    }
    for (section, known) in [("tls", TLS_KEYS), ("peer_tls", PEER_TLS_KEYS)] {
        if let Some(keys) = table.get(section).and_then(toml::Value::as_table) {
            check(&format!("{section}."), keys, known);
        }
    }
    if let Some(policy) = table.get("policy").and_then(toml::Value::as_table) {
        check("policy.", policy, POLICY_KEYS);
    }
    if let Some(cluster) = table.get("cluster").and_then(toml::Value::as_table) {
        check("cluster.", cluster, CLUSTER_KEYS);
    }
    if let Some(auth) = table.get("auth").and_then(toml::Value::as_table) {
        check("auth.", auth, AUTH_KEYS);
    }
    if let Some(telemetry) = table.get("telemetry").and_then(toml::Value::as_table) {
        check("telemetry.", telemetry, TELEMETRY_KEYS);
    }
    if let Some(endpoints) = table.get("policies").and_then(toml::Value::as_table) {
        for (endpoint, value) in endpoints {
            if let Some(custom) = value.as_table() {
                check(
                    &format!("policies.{endpoint:?}."),
                    custom,
                    ENDPOINT_POLICY_KEYS,
                );
            }
        }
    }
    for section in ["raft", "policy", "policies", "cluster", "auth", "telemetry"] {
        if let Some(value) = table.get(section).filter(|v| !v.is_table()) {
            problems.push(format!(
                "{section} (in file {}): expected a table, got a {}",
                path.display(),
                value.type_str()
            ));
        }
    }
    for section in ["tls", "peer_tls"] {
        if let Some(value) = table.get(section).filter(|v| !v.is_table()) {
            problems.push(format!(
                "{section} (in file {}): expected a table, got a {}",
                path.display(),
                value.type_str()
            ));
        }
    }
    problems
}
