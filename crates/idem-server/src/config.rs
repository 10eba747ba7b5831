//! Configuration of `idemd`: a TOML file, overridden by `IDEM_*` environment variables,
//! overridden by command-line flags.
//!
//! Every key is resolved through the same path whatever its source: the raw text is taken
//! from the most specific source that sets it and parsed and range-checked here, so an error
//! always names the key, the offending value and where it came from, on one line:
//!
//! ```text
//! write_timeout = "soon" (from environment IDEM_WRITE_TIMEOUT): expected a duration such as 5s, 250ms or 24h
//! ```
//!
//! All problems are reported at once (one line each) and `idemd` exits with code 2, so an
//! operator fixes a broken file in one round trip. `idemd --print-config` prints the
//! effective configuration as TOML, which is also a valid configuration file.
//!
//! Per-endpoint policies (`[policies."POST /v1/charges"]`) only exist in the file: they are
//! tables, not scalars, and would be unreadable as flags.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::parser::ValueSource;
use clap::{ArgMatches, CommandFactory, Parser};
use idem_core::{Policy, Risk, Scope};

use crate::cluster::{ClusterConfig, InitialMember};
use crate::policy::{EndpointPolicy, Policies};

/// Default public gRPC API address.
pub const DEFAULT_API_ADDR: &str = "127.0.0.1:7400";
/// Default node-to-node Raft address.
pub const DEFAULT_RAFT_ADDR: &str = "127.0.0.1:7410";
/// Default HTTP address (`/metrics`, `/healthz`).
pub const DEFAULT_HTTP_ADDR: &str = "127.0.0.1:7480";

/// The format of log lines on stderr.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LogFormat {
    /// Human-readable lines with span fields in the prefix.
    #[default]
    Text,
    /// One JSON object per line, for log shippers.
    Json,
}

impl LogFormat {
    /// The configuration spelling (`text`, `json`).
    pub fn name(self) -> &'static str {
        match self {
            LogFormat::Text => "text",
            LogFormat::Json => "json",
        }
    }
}

/// Raft timing and log-compaction settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RaftConfig {
    /// Interval between leader heartbeats.
    pub heartbeat_interval: Duration,
    /// Minimum election timeout; the maximum is twice this.
    pub election_timeout: Duration,
    /// Build a snapshot (and allow purging the log behind it) after at least this many log
    /// entries, and at least half as many entries as there are records (see
    /// `docs/operations.md`, "Snapshots and compaction").
    pub snapshot_logs: u64,
}

impl Default for RaftConfig {
    fn default() -> Self {
        RaftConfig {
            heartbeat_interval: Duration::from_millis(250),
            election_timeout: Duration::from_millis(1000),
            snapshot_logs: idem_raft::LogPolicy::default().snapshot_logs_since_last,
        }
    }
}

/// The effective configuration of a node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// Raft node id (≥ 1), stable for the life of the data directory.
    pub node_id: u64,
    /// Directory holding the node's store and identity file.
    pub data_dir: PathBuf,
    /// Public gRPC API listen address (port 0 picks a free port).
    pub api_addr: SocketAddr,
    /// Node-to-node Raft address, recorded in the membership.
    pub raft_addr: SocketAddr,
    /// HTTP listen address for `/metrics` and `/healthz` (port 0 picks a free port).
    pub http_addr: SocketAddr,
    /// Region of this node.
    pub region: String,
    /// Availability zone of this node within its region.
    pub zone: String,
    /// Log line format.
    pub log_format: LogFormat,
    /// Log filter in `RUST_LOG` syntax, e.g. `info,idem_server=debug`.
    pub log_level: String,
    /// Bound on every Raft write; past it the answer is `UNAVAILABLE_OUTCOME_UNKNOWN`.
    pub write_timeout: Duration,
    /// Bound on every read-index barrier.
    pub read_timeout: Duration,
    /// How often the leader proposes expiry batches.
    pub sweep_interval: Duration,
    /// Records deleted per expiry batch.
    pub sweep_batch: u32,
    /// Largest accepted gRPC request message, in bytes.
    pub max_request_bytes: usize,
    /// Largest canonical request body the server fingerprints, in bytes.
    pub max_body_bytes: usize,
    /// How long shutdown waits for in-flight requests before cutting them off.
    pub shutdown_grace: Duration,
    /// Raft timing and compaction.
    pub raft: RaftConfig,
    /// Default and per-endpoint policies.
    pub policies: Policies,
    /// Initial members and bootstrap mode (`[cluster]`).
    pub cluster: ClusterConfig,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            node_id: 1,
            data_dir: PathBuf::from("./data"),
            api_addr: parse_addr(DEFAULT_API_ADDR),
            raft_addr: parse_addr(DEFAULT_RAFT_ADDR),
            http_addr: parse_addr(DEFAULT_HTTP_ADDR),
            region: "local".to_owned(),
            zone: "local-a".to_owned(),
            log_format: LogFormat::Text,
            log_level: "info".to_owned(),
            write_timeout: Duration::from_secs(5),
            read_timeout: Duration::from_secs(5),
            sweep_interval: Duration::from_secs(10),
            sweep_batch: 1000,
            max_request_bytes: 2 << 20,
            max_body_bytes: 1 << 20,
            shutdown_grace: Duration::from_secs(10),
            raft: RaftConfig::default(),
            policies: Policies::default(),
            cluster: ClusterConfig::default(),
        }
    }
}

fn parse_addr(text: &str) -> SocketAddr {
    text.parse()
        .unwrap_or_else(|_| unreachable!("{text} is a literal address"))
}

/// What the command line asked for.
#[derive(Debug)]
pub struct Invocation {
    /// The effective configuration.
    pub config: Config,
    /// `--print-config`: print the configuration as TOML and exit.
    pub print_config: bool,
}

/// Why the configuration could not be built.
#[derive(Debug)]
pub enum ConfigError {
    /// Command-line syntax, `--help` or `--version` (clap prints and exits with its own code).
    Cli(clap::Error),
    /// One line per problem, each naming its key.
    Invalid(Vec<String>),
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::Cli(e) => write!(f, "{e}"),
            ConfigError::Invalid(problems) => f.write_str(&problems.join("\n")),
        }
    }
}

impl std::error::Error for ConfigError {}

/// idemd runs one node of idem, a Raft-replicated idempotency-key store.
///
/// Configuration comes from a TOML file (--config), overridden by IDEM_* environment
/// variables, overridden by these flags. Durations are human-readable (250ms, 5s, 24h, 7d).
/// Per-endpoint policies are set in the file only: [policies."POST /v1/charges"].
#[derive(Parser, Debug)]
#[command(name = "idemd", version, max_term_width = 100)]
pub struct Cli {
    /// TOML configuration file [env: IDEM_CONFIG]
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Print the effective configuration as TOML and exit
    #[arg(long)]
    print_config: bool,
    /// Raft node id, ≥ 1, fixed for the life of the data directory [env: IDEM_NODE_ID] [default: 1]
    #[arg(long, value_name = "ID")]
    node_id: Option<String>,
    /// Data directory (store and node identity) [env: IDEM_DATA_DIR] [default: ./data]
    #[arg(long, value_name = "DIR")]
    data_dir: Option<String>,
    /// Public gRPC API address [env: IDEM_API_ADDR] [default: 127.0.0.1:7400]
    #[arg(long, value_name = "HOST:PORT")]
    api_addr: Option<String>,
    /// Node-to-node Raft address [env: IDEM_RAFT_ADDR] [default: 127.0.0.1:7410]
    #[arg(long, value_name = "HOST:PORT")]
    raft_addr: Option<String>,
    /// HTTP address for /metrics and /healthz [env: IDEM_HTTP_ADDR] [default: 127.0.0.1:7480]
    #[arg(long, value_name = "HOST:PORT")]
    http_addr: Option<String>,
    /// Region of this node [env: IDEM_REGION] [default: local]
    #[arg(long, value_name = "NAME")]
    region: Option<String>,
    /// Availability zone of this node [env: IDEM_ZONE] [default: local-a]
    #[arg(long, value_name = "NAME")]
    zone: Option<String>,
    /// Log format: text or json [env: IDEM_LOG_FORMAT] [default: text]
    #[arg(long, value_name = "FORMAT")]
    log_format: Option<String>,
    /// Log filter in RUST_LOG syntax, e.g. info,idem_server=debug [env: IDEM_LOG_LEVEL] [default: info]
    #[arg(long, value_name = "FILTER")]
    log_level: Option<String>,
    /// Bound on each Raft write; past it: UNAVAILABLE_OUTCOME_UNKNOWN [env: IDEM_WRITE_TIMEOUT] [default: 5s]
    #[arg(long, value_name = "DURATION")]
    write_timeout: Option<String>,
    /// Bound on each linearizable read barrier [env: IDEM_READ_TIMEOUT] [default: 5s]
    #[arg(long, value_name = "DURATION")]
    read_timeout: Option<String>,
    /// How often the leader deletes expired records [env: IDEM_SWEEP_INTERVAL] [default: 10s]
    #[arg(long, value_name = "DURATION")]
    sweep_interval: Option<String>,
    /// Records deleted per expiry batch, 1..=10000 [env: IDEM_SWEEP_BATCH] [default: 1000]
    #[arg(long, value_name = "N")]
    sweep_batch: Option<String>,
    /// Largest gRPC request message in bytes [env: IDEM_MAX_REQUEST_BYTES] [default: 2097152]
    #[arg(long, value_name = "BYTES")]
    max_request_bytes: Option<String>,
    /// Largest canonical request body in bytes [env: IDEM_MAX_BODY_BYTES] [default: 1048576]
    #[arg(long, value_name = "BYTES")]
    max_body_bytes: Option<String>,
    /// How long shutdown drains in-flight requests [env: IDEM_SHUTDOWN_GRACE] [default: 10s]
    #[arg(long, value_name = "DURATION")]
    shutdown_grace: Option<String>,
    /// Raft leader heartbeat interval [env: IDEM_RAFT_HEARTBEAT_INTERVAL] [default: 250ms]
    #[arg(long, value_name = "DURATION")]
    raft_heartbeat_interval: Option<String>,
    /// Raft minimum election timeout (max is twice it) [env: IDEM_RAFT_ELECTION_TIMEOUT] [default: 1s]
    #[arg(long, value_name = "DURATION")]
    raft_election_timeout: Option<String>,
    /// Snapshot the state after at least N Raft log entries (and half the record count) [env: IDEM_RAFT_SNAPSHOT_LOGS] [default: 100000]
    #[arg(long, value_name = "N")]
    raft_snapshot_logs: Option<String>,
    /// Default lease of new records [env: IDEM_DEFAULT_LEASE] [default: 30s]
    #[arg(long, value_name = "DURATION")]
    default_lease: Option<String>,
    /// Default retention after a terminal state [env: IDEM_DEFAULT_RETENTION] [default: 24h]
    #[arg(long, value_name = "DURATION")]
    default_retention: Option<String>,
    /// Default risk: LOW, NORMAL or HIGH [env: IDEM_DEFAULT_RISK] [default: NORMAL]
    #[arg(long, value_name = "RISK")]
    default_risk: Option<String>,
    /// Default limit of a stored result in bytes [env: IDEM_DEFAULT_MAX_RESULT_BYTES] [default: 16384]
    #[arg(long, value_name = "BYTES")]
    default_max_result_bytes: Option<String>,
    /// An initial cluster member, repeatable; the lowest id bootstraps the cluster
    /// [env: IDEM_INITIAL_MEMBERS, members separated by ;]
    #[arg(long, value_name = "ID=RAFT_ADDR,API_ADDR[,REGION[,ZONE]]")]
    initial_member: Vec<String>,
    /// Start without bootstrapping and wait to be added with `idemctl member add` [env: IDEM_JOIN]
    #[arg(long)]
    join: bool,
}

/// One scalar key: its dotted name in the file; its flag and environment variable derive
/// from `arg` (the clap id, `raft_heartbeat_interval` → `--raft-heartbeat-interval`,
/// `IDEM_RAFT_HEARTBEAT_INTERVAL`).
#[derive(Clone, Copy)]
struct Key {
    file: &'static str,
    arg: &'static str,
}

macro_rules! key {
    ($file:literal, $arg:literal) => {
        Key {
            file: $file,
            arg: $arg,
        }
    };
}

const NODE_ID: Key = key!("node_id", "node_id");
const DATA_DIR: Key = key!("data_dir", "data_dir");
const API_ADDR: Key = key!("api_addr", "api_addr");
const RAFT_ADDR: Key = key!("raft_addr", "raft_addr");
const HTTP_ADDR: Key = key!("http_addr", "http_addr");
const REGION: Key = key!("region", "region");
const ZONE: Key = key!("zone", "zone");
const LOG_FORMAT: Key = key!("log_format", "log_format");
const LOG_LEVEL: Key = key!("log_level", "log_level");
const WRITE_TIMEOUT: Key = key!("write_timeout", "write_timeout");
const READ_TIMEOUT: Key = key!("read_timeout", "read_timeout");
const SWEEP_INTERVAL: Key = key!("sweep_interval", "sweep_interval");
const SWEEP_BATCH: Key = key!("sweep_batch", "sweep_batch");
const MAX_REQUEST_BYTES: Key = key!("max_request_bytes", "max_request_bytes");
const MAX_BODY_BYTES: Key = key!("max_body_bytes", "max_body_bytes");
const SHUTDOWN_GRACE: Key = key!("shutdown_grace", "shutdown_grace");
const RAFT_HEARTBEAT: Key = key!("raft.heartbeat_interval", "raft_heartbeat_interval");
const RAFT_ELECTION: Key = key!("raft.election_timeout", "raft_election_timeout");
const RAFT_SNAPSHOT_LOGS: Key = key!("raft.snapshot_logs", "raft_snapshot_logs");
const POLICY_LEASE: Key = key!("policy.lease", "default_lease");
const POLICY_RETENTION: Key = key!("policy.retention", "default_retention");
const POLICY_RISK: Key = key!("policy.risk", "default_risk");
const POLICY_MAX_RESULT: Key = key!("policy.max_result_bytes", "default_max_result_bytes");

const TOP_LEVEL_KEYS: &[&str] = &[
    "node_id",
    "data_dir",
    "api_addr",
    "raft_addr",
    "http_addr",
    "region",
    "zone",
    "log_format",
    "log_level",
    "write_timeout",
    "read_timeout",
    "sweep_interval",
    "sweep_batch",
    "max_request_bytes",
    "max_body_bytes",
    "shutdown_grace",
    "raft",
    "policy",
    "policies",
    "cluster",
];
const CLUSTER_KEYS: &[&str] = &["initial_members", "join"];
const RAFT_KEYS: &[&str] = &["heartbeat_interval", "election_timeout", "snapshot_logs"];
const POLICY_KEYS: &[&str] = &["lease", "retention", "risk", "max_result_bytes"];

impl Key {
    fn env(self) -> String {
        format!("IDEM_{}", self.arg.to_ascii_uppercase())
    }

    fn flag(self) -> String {
        format!("--{}", self.arg.replace('_', "-"))
    }
}

/// A raw value and where it came from.
struct Raw {
    text: String,
    origin: String,
}

/// The layered sources of raw values.
struct Sources<'a> {
    matches: &'a ArgMatches,
    env: &'a dyn Fn(&str) -> Option<String>,
    file: Option<(toml::Table, PathBuf)>,
}

impl Sources<'_> {
    fn raw(&self, key: Key, problems: &mut Vec<String>) -> Option<Raw> {
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
    fn get<T>(
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

fn lookup<'t>(table: &'t toml::Table, dotted: &str) -> Option<&'t toml::Value> {
    let mut parts = dotted.split('.');
    let mut value = table.get(parts.next()?)?;
    for part in parts {
        value = value.as_table()?.get(part)?;
    }
    Some(value)
}

fn scalar_text(value: &toml::Value) -> Option<String> {
    match value {
        toml::Value::String(s) => Some(s.clone()),
        toml::Value::Integer(i) => Some(i.to_string()),
        toml::Value::Float(f) => Some(f.to_string()),
        toml::Value::Boolean(b) => Some(b.to_string()),
        _ => None,
    }
}

impl Config {
    /// Parses the process's arguments and environment (and the file they name).
    pub fn from_env() -> Result<Invocation, ConfigError> {
        Self::load(std::env::args_os(), &|name| std::env::var(name).ok())
    }

    /// Parses `args` (the first is the program name), looking variables up with `env`.
    pub fn load(
        args: impl IntoIterator<Item = impl Into<OsString> + Clone>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Invocation, ConfigError> {
        let matches = Cli::command()
            .try_get_matches_from(args)
            .map_err(ConfigError::Cli)?;
        let print_config = matches.get_flag("print_config");
        let file_path = matches
            .get_one::<PathBuf>("config")
            .cloned()
            .or_else(|| env("IDEM_CONFIG").map(PathBuf::from));
        let file = match file_path {
            Some(path) => Some((read_file(&path)?, path)),
            None => None,
        };
        let sources = Sources {
            matches: &matches,
            env,
            file,
        };
        let config = build(&sources)?;
        Ok(Invocation {
            config,
            print_config,
        })
    }

    /// The Raft configuration this node runs with (validated): Pre-Vote on, election
    /// timeout between `raft.election_timeout` and twice it, a snapshot after at least
    /// `raft.snapshot_logs` entries (a floor; the store waits for half the record count) with
    /// a tail of a tenth of that (at least 100 entries) kept so a briefly lagging follower
    /// catches up by replication, not by a snapshot.
    pub fn raft_config(&self) -> Result<openraft::Config, openraft::ConfigError> {
        let election = self.raft.election_timeout;
        let timeouts = idem_raft::RaftTimeouts {
            heartbeat_interval: self.raft.heartbeat_interval,
            election_timeout_min: election,
            election_timeout_max: election * 2,
            install_snapshot_timeout: Duration::from_secs(10),
            pre_vote: true,
        };
        let log = idem_raft::LogPolicy {
            snapshot_logs_since_last: self.raft.snapshot_logs,
            max_in_snapshot_log_to_keep: (self.raft.snapshot_logs / 10).max(100),
            ..idem_raft::LogPolicy::default()
        };
        timeouts.config_with("idem", &log)
    }

    /// The effective configuration as TOML (a valid configuration file).
    pub fn to_toml(&self) -> String {
        let duration = |d: Duration| toml::Value::String(format_duration(d));
        let int = |n: u64| toml::Value::Integer(i64::try_from(n).unwrap_or(i64::MAX));
        let string = |s: &str| toml::Value::String(s.to_owned());

        let mut root = toml::Table::new();
        root.insert("node_id".into(), int(self.node_id));
        root.insert("data_dir".into(), string(&self.data_dir.to_string_lossy()));
        root.insert("api_addr".into(), string(&self.api_addr.to_string()));
        root.insert("raft_addr".into(), string(&self.raft_addr.to_string()));
        root.insert("http_addr".into(), string(&self.http_addr.to_string()));
        root.insert("region".into(), string(&self.region));
        root.insert("zone".into(), string(&self.zone));
        root.insert("log_format".into(), string(self.log_format.name()));
        root.insert("log_level".into(), string(&self.log_level));
        root.insert("write_timeout".into(), duration(self.write_timeout));
        root.insert("read_timeout".into(), duration(self.read_timeout));
        root.insert("sweep_interval".into(), duration(self.sweep_interval));
        root.insert("sweep_batch".into(), int(self.sweep_batch.into()));
        root.insert(
            "max_request_bytes".into(),
            int(self.max_request_bytes as u64),
        );
        root.insert("max_body_bytes".into(), int(self.max_body_bytes as u64));
        root.insert("shutdown_grace".into(), duration(self.shutdown_grace));

        let mut raft = toml::Table::new();
        raft.insert(
            "heartbeat_interval".into(),
            duration(self.raft.heartbeat_interval),
        );
        raft.insert(
            "election_timeout".into(),
            duration(self.raft.election_timeout),
        );
        raft.insert("snapshot_logs".into(), int(self.raft.snapshot_logs));
        root.insert("raft".into(), toml::Value::Table(raft));

        let default = &self.policies.default;
        let mut policy = toml::Table::new();
        policy.insert("lease".into(), duration(default.lease));
        policy.insert("retention".into(), duration(default.retention));
        policy.insert("risk".into(), string(risk_name(default.risk)));
        policy.insert(
            "max_result_bytes".into(),
            int(default.max_result_bytes.into()),
        );
        root.insert("policy".into(), toml::Value::Table(policy));

        let mut endpoints = toml::Table::new();
        for (endpoint, custom) in &self.policies.endpoints {
            let mut table = toml::Table::new();
            if let Some(lease) = custom.lease {
                table.insert("lease".into(), duration(lease));
            }
            if let Some(retention) = custom.retention {
                table.insert("retention".into(), duration(retention));
            }
            if let Some(risk) = custom.risk {
                table.insert("risk".into(), string(risk_name(risk)));
            }
            if let Some(bytes) = custom.max_result_bytes {
                table.insert("max_result_bytes".into(), int(bytes.into()));
            }
            endpoints.insert(endpoint.clone(), toml::Value::Table(table));
        }
        root.insert("policies".into(), toml::Value::Table(endpoints));

        let mut cluster = toml::Table::new();
        let members = self.cluster.initial_members.iter();
        cluster.insert(
            "initial_members".into(),
            toml::Value::Array(members.map(InitialMember::to_toml).collect()),
        );
        cluster.insert("join".into(), toml::Value::Boolean(self.cluster.join));
        root.insert("cluster".into(), toml::Value::Table(cluster));
        toml::to_string(&root).unwrap_or_else(|e| format!("# cannot render: {e}\n"))
    }
}

fn read_file(path: &Path) -> Result<toml::Table, ConfigError> {
    let one = |why: String| ConfigError::Invalid(vec![why]);
    let text = std::fs::read_to_string(path)
        .map_err(|e| one(format!("config file {}: {e}", path.display())))?;
    let table: toml::Table = text.parse().map_err(|e: toml::de::Error| {
        let position = e
            .span()
            .map(|span| {
                let before = &text[..span.start.min(text.len())];
                let line = before.matches('\n').count() + 1;
                let column = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
                format!(":{line}:{column}")
            })
            .unwrap_or_default();
        one(format!(
            "config file {}{position}: {}",
            path.display(),
            e.message().trim().replace('\n', " ")
        ))
    })?;
    let mut problems = unknown_keys(&table, path);
    if problems.is_empty() {
        Ok(table)
    } else {
        problems.sort();
        Err(ConfigError::Invalid(problems))
    }
}

fn unknown_keys(table: &toml::Table, path: &Path) -> Vec<String> {
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
    if let Some(policy) = table.get("policy").and_then(toml::Value::as_table) {
        check("policy.", policy, POLICY_KEYS);
    }
    if let Some(cluster) = table.get("cluster").and_then(toml::Value::as_table) {
        check("cluster.", cluster, CLUSTER_KEYS);
    }
    if let Some(endpoints) = table.get("policies").and_then(toml::Value::as_table) {
        for (endpoint, value) in endpoints {
            if let Some(custom) = value.as_table() {
                check(&format!("policies.{endpoint:?}."), custom, POLICY_KEYS);
            }
        }
    }
    for section in ["raft", "policy", "policies", "cluster"] {
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

fn build(sources: &Sources<'_>) -> Result<Config, ConfigError> {
    let d = Config::default();
    let mut p = Vec::new();
    let node_id = sources.get(NODE_ID, d.node_id, |s| ranged(s, 1, u64::MAX), &mut p);
    let data_dir = sources.get(DATA_DIR, d.data_dir, path, &mut p);
    let api_addr = sources.get(API_ADDR, d.api_addr, address, &mut p);
    let raft_addr = sources.get(RAFT_ADDR, d.raft_addr, address, &mut p);
    let http_addr = sources.get(HTTP_ADDR, d.http_addr, address, &mut p);
    let region = sources.get(REGION, d.region, location, &mut p);
    let zone = sources.get(ZONE, d.zone, location, &mut p);
    let log_format = sources.get(LOG_FORMAT, d.log_format, log_format, &mut p);
    let log_level = sources.get(LOG_LEVEL, d.log_level, log_filter, &mut p);
    let timeout = |s: &str| duration_in(s, Duration::from_millis(100), Duration::from_secs(300));
    let write_timeout = sources.get(WRITE_TIMEOUT, d.write_timeout, timeout, &mut p);
    let read_timeout = sources.get(READ_TIMEOUT, d.read_timeout, timeout, &mut p);
    let sweep_interval = sources.get(
        SWEEP_INTERVAL,
        d.sweep_interval,
        |s| duration_in(s, Duration::from_millis(100), Duration::from_secs(86_400)),
        &mut p,
    );
    let sweep_batch = sources.get(
        SWEEP_BATCH,
        d.sweep_batch,
        |s| ranged(s, 1, u64::from(idem_core::command::MAX_EXPIRE_BATCH)).map(|n| n as u32),
        &mut p,
    );
    let max_request_bytes = sources.get(
        MAX_REQUEST_BYTES,
        d.max_request_bytes,
        |s| ranged(s, 4096, 64 << 20).map(|n| n as usize),
        &mut p,
    );
    let max_body_bytes = sources.get(
        MAX_BODY_BYTES,
        d.max_body_bytes,
        |s| ranged(s, 1, 64 << 20).map(|n| n as usize),
        &mut p,
    );
    if max_body_bytes > max_request_bytes {
        p.push(format!(
            "max_body_bytes = {max_body_bytes}: must not exceed max_request_bytes ({max_request_bytes}): the body travels inside the request"
        ));
    }
    let shutdown_grace = sources.get(
        SHUTDOWN_GRACE,
        d.shutdown_grace,
        |s| duration_in(s, Duration::ZERO, Duration::from_secs(300)),
        &mut p,
    );
    let raft = build_raft(sources, &mut p);
    let policies = build_policies(sources, &mut p);
    let cluster = build_cluster(sources, &mut p);
    p.extend(cluster.problems(node_id, raft_addr, api_addr));
    if !p.is_empty() {
        return Err(ConfigError::Invalid(p));
    }
    Ok(Config {
        node_id,
        data_dir,
        api_addr,
        raft_addr,
        http_addr,
        region,
        zone,
        log_format,
        log_level,
        write_timeout,
        read_timeout,
        sweep_interval,
        sweep_batch,
        max_request_bytes,
        max_body_bytes,
        shutdown_grace,
        raft,
        policies,
        cluster,
    })
}

/// `[cluster]`: `initial_members` from `--initial-member` flags, else `IDEM_INITIAL_MEMBERS`
/// (`;`-separated), else the file; `join` from `--join`, else `IDEM_JOIN`, else the file.
fn build_cluster(sources: &Sources<'_>, p: &mut Vec<String>) -> ClusterConfig {
    let file = sources
        .file
        .as_ref()
        .and_then(|(t, path)| Some((t.get("cluster")?.as_table()?, path)));
    let flags: Vec<String> = sources
        .matches
        .get_many::<String>("initial_member")
        .map(|v| v.cloned().collect())
        .unwrap_or_default();
    let mut initial_members = Vec::new();
    let mut flag_form = |texts: Vec<String>, origin: &str, p: &mut Vec<String>| {
        for text in texts.iter().filter(|t| !t.trim().is_empty()) {
            match InitialMember::parse_flag(text) {
                Ok(member) => initial_members.push(member),
                Err(why) => p.push(format!(
                    "cluster.initial_members = {text:?} (from {origin}): {why}"
                )),
            }
        }
    };
    if !flags.is_empty() {
        flag_form(flags, "flag --initial-member", p);
    } else if let Some(env) = (sources.env)("IDEM_INITIAL_MEMBERS") {
        let texts = env.split(';').map(str::to_owned).collect();
        flag_form(texts, "environment IDEM_INITIAL_MEMBERS", p);
    } else if let Some((table, path)) = file {
        match table.get("initial_members").map(|v| (v, v.as_array())) {
            None => {}
            Some((_, Some(members))) => {
                for (i, value) in members.iter().enumerate() {
                    match InitialMember::from_toml(value) {
                        Ok(member) => initial_members.push(member),
                        Err(why) => p.push(format!(
                            "cluster.initial_members[{i}] (in file {}): {why}",
                            path.display()
                        )),
                    }
                }
            }
            Some((value, None)) => p.push(format!(
                "cluster.initial_members (in file {}): expected an array of tables, got a {}",
                path.display(),
                value.type_str()
            )),
        }
    }
    let join = cluster_join(sources, file, p);
    ClusterConfig {
        initial_members,
        join,
    }
}

fn cluster_join(
    sources: &Sources<'_>,
    file: Option<(&toml::Table, &PathBuf)>,
    p: &mut Vec<String>,
) -> bool {
    if sources.matches.get_flag("join") {
        return true;
    }
    let (text, origin) = if let Some(env) = (sources.env)("IDEM_JOIN") {
        (env, "environment IDEM_JOIN".to_owned())
    } else if let Some(value) = file.and_then(|(t, path)| Some((t.get("join")?, path))) {
        let origin = format!("file {}", value.1.display());
        match value.0 {
            toml::Value::Boolean(b) => return *b,
            other => (other.to_string(), origin),
        }
    } else {
        return false;
    };
    match text.trim().to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" => true,
        "false" | "0" | "no" | "" => false,
        _ => {
            p.push(format!(
                "cluster.join = {text:?} (from {origin}): expected true or false"
            ));
            false
        }
    }
}

fn build_raft(sources: &Sources<'_>, p: &mut Vec<String>) -> RaftConfig {
    let d = RaftConfig::default();
    let heartbeat_interval = sources.get(
        RAFT_HEARTBEAT,
        d.heartbeat_interval,
        |s| duration_in(s, Duration::from_millis(10), Duration::from_secs(10)),
        p,
    );
    let election_timeout = sources.get(
        RAFT_ELECTION,
        d.election_timeout,
        |s| duration_in(s, Duration::from_millis(50), Duration::from_secs(60)),
        p,
    );
    if election_timeout < heartbeat_interval * 3 {
        p.push(format!(
            "raft.election_timeout = {:?}: must be at least 3 × raft.heartbeat_interval ({}), or followers start elections against a live leader",
            format_duration(election_timeout),
            format_duration(heartbeat_interval)
        ));
    }
    let snapshot_logs = sources.get(
        RAFT_SNAPSHOT_LOGS,
        d.snapshot_logs,
        |s| ranged(s, 100, 100_000_000),
        p,
    );
    RaftConfig {
        heartbeat_interval,
        election_timeout,
        snapshot_logs,
    }
}

fn build_policies(sources: &Sources<'_>, p: &mut Vec<String>) -> Policies {
    let d = Policy::default();
    let lease = |s: &str| duration_in(s, Duration::ZERO, Duration::MAX);
    let default = Policy {
        lease: sources.get(POLICY_LEASE, d.lease, lease, p),
        retention: sources.get(POLICY_RETENTION, d.retention, lease, p),
        risk: sources.get(POLICY_RISK, d.risk, risk, p),
        max_result_bytes: sources.get(POLICY_MAX_RESULT, d.max_result_bytes, result_bytes, p),
    };
    if let Err(e) = default.validate() {
        p.push(format!("policy: {}", policy_problem(&e)));
    }
    let mut policies = Policies {
        default,
        endpoints: BTreeMap::new(),
    };
    let Some((table, path)) = &sources.file else {
        return policies;
    };
    let Some(endpoints) = table.get("policies").and_then(toml::Value::as_table) else {
        return policies;
    };
    for (endpoint, value) in endpoints {
        let Some(custom) = value.as_table() else {
            p.push(format!(
                "policies.{endpoint:?} (in file {}): expected a table such as {{ risk = \"HIGH\" }}",
                path.display()
            ));
            continue;
        };
        let name = format!("policies.{endpoint:?}");
        if let Err(e) = Scope::new("t", "e", "a", endpoint.as_str()) {
            p.push(format!("{name} (in file {}): {e}", path.display()));
            continue;
        }
        let parsed = endpoint_policy(&name, custom, path, p);
        policies.endpoints.insert(endpoint.clone(), parsed);
        if let Err(e) = policies
            .resolve(endpoint, &crate::policy::Overrides::default())
            .map(drop)
        {
            p.push(format!(
                "{name} (in file {}): {}",
                path.display(),
                policy_problem(&e)
            ));
        }
    }
    policies
}

fn endpoint_policy(
    name: &str,
    table: &toml::Table,
    path: &Path,
    p: &mut Vec<String>,
) -> EndpointPolicy {
    let any_duration = |s: &str| duration_in(s, Duration::ZERO, Duration::MAX);
    EndpointPolicy {
        lease: endpoint_field(name, table, "lease", path, any_duration, p),
        retention: endpoint_field(name, table, "retention", path, any_duration, p),
        risk: endpoint_field(name, table, "risk", path, risk, p),
        max_result_bytes: endpoint_field(name, table, "max_result_bytes", path, result_bytes, p),
    }
}

fn endpoint_field<T>(
    name: &str,
    table: &toml::Table,
    key: &str,
    path: &Path,
    parse: impl Fn(&str) -> Result<T, String>,
    p: &mut Vec<String>,
) -> Option<T> {
    let value = table.get(key)?;
    let Some(text) = scalar_text(value) else {
        p.push(format!(
            "{name}.{key} (in file {}): expected a string or a number, got a {}",
            path.display(),
            value.type_str()
        ));
        return None;
    };
    match parse(text.trim()) {
        Ok(parsed) => Some(parsed),
        Err(why) => {
            p.push(format!(
                "{name}.{key} = {text:?} (in file {}): {why}",
                path.display()
            ));
            None
        }
    }
}

/// A validation error of a policy, with the configuration key of its field.
fn policy_problem(error: &idem_core::ValidationError) -> String {
    let key = match error.field() {
        idem_core::Field::Lease => "lease",
        idem_core::Field::Retention => "retention",
        idem_core::Field::MaxResultBytes => "max_result_bytes",
        other => other.name(),
    };
    let why = match error {
        idem_core::ValidationError::Range { min, max, .. }
            if matches!(
                error.field(),
                idem_core::Field::Lease | idem_core::Field::Retention
            ) =>
        {
            format!(
                "must be between {} and {}",
                format_duration(Duration::from_millis(*min)),
                format_duration(Duration::from_millis(*max))
            )
        }
        other => other.to_string(),
    };
    format!("{key}: {why}")
}

fn ranged(text: &str, min: u64, max: u64) -> Result<u64, String> {
    let value: u64 = text
        .replace('_', "")
        .parse()
        .map_err(|_| "expected a whole number".to_owned())?;
    if value < min || value > max {
        return Err(format!("must be between {min} and {max}"));
    }
    Ok(value)
}

fn path(text: &str) -> Result<PathBuf, String> {
    if text.is_empty() {
        return Err("must not be empty".to_owned());
    }
    Ok(PathBuf::from(text))
}

fn address(text: &str) -> Result<SocketAddr, String> {
    text.parse()
        .map_err(|_| "expected an IP address and port such as 127.0.0.1:7400".to_owned())
}

fn location(text: &str) -> Result<String, String> {
    let ok = (1..=64).contains(&text.len())
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
    if ok {
        Ok(text.to_owned())
    } else {
        Err("expected 1 to 64 characters of A-Z a-z 0-9 . _ -".to_owned())
    }
}

fn log_format(text: &str) -> Result<LogFormat, String> {
    match text.to_ascii_lowercase().as_str() {
        "text" => Ok(LogFormat::Text),
        "json" => Ok(LogFormat::Json),
        _ => Err("expected text or json".to_owned()),
    }
}

fn log_filter(text: &str) -> Result<String, String> {
    tracing_subscriber::EnvFilter::builder()
        .parse(text)
        .map(|_| text.to_owned())
        .map_err(|e| format!("not a log filter ({e}); example: info,idem_server=debug"))
}

fn risk(text: &str) -> Result<Risk, String> {
    match text.to_ascii_uppercase().trim_start_matches("RISK_") {
        "LOW" => Ok(Risk::Low),
        "NORMAL" => Ok(Risk::Normal),
        "HIGH" => Ok(Risk::High),
        _ => Err("expected LOW, NORMAL or HIGH".to_owned()),
    }
}

fn result_bytes(text: &str) -> Result<u32, String> {
    ranged(
        text,
        idem_core::policy::MIN_RESULT_BYTES.into(),
        idem_core::policy::MAX_RESULT_BYTES.into(),
    )
    .map(|n| n as u32)
}

/// The configuration name of a risk class.
pub fn risk_name(risk: Risk) -> &'static str {
    match risk {
        Risk::Low => "LOW",
        Risk::Normal => "NORMAL",
        Risk::High => "HIGH",
    }
}

fn duration_in(text: &str, min: Duration, max: Duration) -> Result<Duration, String> {
    let value = humantime::parse_duration(text)
        .map_err(|_| "expected a duration such as 5s, 250ms or 24h".to_owned())?;
    if value < min || value > max {
        return Err(if max == Duration::MAX {
            format!("must be at least {}", format_duration(min))
        } else {
            format!(
                "must be between {} and {}",
                format_duration(min),
                format_duration(max)
            )
        });
    }
    Ok(value)
}

/// A duration in the configuration's spelling (`250ms`, `5s`, `1day`).
pub fn format_duration(duration: Duration) -> String {
    if duration.is_zero() {
        return "0s".to_owned();
    }
    humantime::format_duration(duration).to_string()
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::io::Write;

    use super::*;

    fn load(args: &[&str], env: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let env: HashMap<String, String> = env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        let argv = std::iter::once("idemd").chain(args.iter().copied());
        Config::load(argv, &|name| env.get(name).cloned()).map(|i| i.config)
    }

    fn problems(result: Result<Config, ConfigError>) -> Vec<String> {
        match result {
            Err(ConfigError::Invalid(problems)) => problems,
            other => panic!("expected invalid configuration, got {other:?}"),
        }
    }

    fn file(text: &str) -> tempfile::NamedTempFile {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        file.write_all(text.as_bytes()).unwrap();
        file
    }

    #[test]
    fn defaults_match_the_design() {
        let config = load(&[], &[]).unwrap();
        assert_eq!(config, Config::default());
        assert_eq!(config.api_addr.to_string(), "127.0.0.1:7400");
        assert_eq!(config.raft_addr.to_string(), "127.0.0.1:7410");
        assert_eq!(config.http_addr.to_string(), "127.0.0.1:7480");
        assert_eq!(config.write_timeout, Duration::from_secs(5));
        assert_eq!(config.sweep_interval, Duration::from_secs(10));
        assert_eq!(config.sweep_batch, 1000);
        assert_eq!(config.max_request_bytes, 2 * 1024 * 1024);
        assert_eq!(config.max_body_bytes, 1024 * 1024);
        assert_eq!(config.policies.default, Policy::default());
    }

    #[test]
    fn flags_beat_environment_beat_file() {
        let f = file(
            "node_id = 7\nsweep_batch = 10\nregion = \"eu-west\"\n[raft]\nsnapshot_logs = 500\n",
        );
        let path = f.path().to_str().unwrap();

        let config = load(&["--config", path], &[]).unwrap();
        assert_eq!(
            (config.node_id, config.sweep_batch, config.region.as_str()),
            (7, 10, "eu-west")
        );
        assert_eq!(config.raft.snapshot_logs, 500);

        let env = [("IDEM_NODE_ID", "8"), ("IDEM_SWEEP_BATCH", "20")];
        let config = load(&["--config", path], &env).unwrap();
        assert_eq!((config.node_id, config.sweep_batch), (8, 20));
        assert_eq!(config.region, "eu-west", "file value still used");

        let config = load(&["--config", path, "--node-id", "9"], &env).unwrap();
        assert_eq!((config.node_id, config.sweep_batch), (9, 20));

        // The file may also be named by the environment.
        let config = load(&[], &[("IDEM_CONFIG", path)]).unwrap();
        assert_eq!(config.node_id, 7);
    }

    #[test]
    fn durations_are_human_readable() {
        let f = file("write_timeout = \"1500ms\"\n[policy]\nretention = \"7d\"\nlease = \"2m\"\n");
        let config = load(
            &[
                "--config",
                f.path().to_str().unwrap(),
                "--read-timeout",
                "2s",
            ],
            &[("IDEM_SWEEP_INTERVAL", "1m")],
        )
        .unwrap();
        assert_eq!(config.write_timeout, Duration::from_millis(1500));
        assert_eq!(config.read_timeout, Duration::from_secs(2));
        assert_eq!(config.sweep_interval, Duration::from_secs(60));
        assert_eq!(
            config.policies.default.retention,
            Duration::from_secs(7 * 86_400)
        );
        assert_eq!(config.policies.default.lease, Duration::from_secs(120));
    }

    #[test]
    fn every_problem_is_one_line_naming_key_value_and_source() {
        let f = file("sweep_batch = 0\nlog_format = \"xml\"\n");
        let lines = problems(load(
            &[
                "--config",
                f.path().to_str().unwrap(),
                "--write-timeout",
                "soon",
            ],
            &[("IDEM_API_ADDR", "localhost")],
        ));
        assert_eq!(lines.len(), 4, "{lines:#?}");
        for line in &lines {
            assert!(!line.contains('\n'), "{line}");
        }
        let find = |key: &str| lines.iter().find(|l| l.starts_with(key)).unwrap();
        assert!(find("write_timeout").contains("flag --write-timeout"));
        assert!(find("write_timeout").contains("\"soon\""));
        assert!(find("api_addr").contains("environment IDEM_API_ADDR"));
        assert!(find("sweep_batch").contains("must be between 1 and 10000"));
        assert!(find("log_format").contains("expected text or json"));
    }

    #[test]
    fn cross_field_rules() {
        let lines = problems(load(
            &[
                "--max-request-bytes",
                "65536",
                "--max-body-bytes",
                "100000",
                "--raft-heartbeat-interval",
                "500ms",
                "--raft-election-timeout",
                "1s",
            ],
            &[],
        ));
        assert_eq!(lines.len(), 2, "{lines:#?}");
        assert!(lines[0].starts_with("max_body_bytes"));
        assert!(lines[1].starts_with("raft.election_timeout"));
    }

    #[test]
    fn unknown_keys_and_bad_syntax_are_reported() {
        let f = file("node_idd = 3\n[raft]\nheartbeat = \"1s\"\n");
        let lines = problems(load(&["--config", f.path().to_str().unwrap()], &[]));
        assert_eq!(lines.len(), 2, "{lines:#?}");
        assert!(lines.iter().any(|l| l.starts_with("node_idd")));
        assert!(lines.iter().any(|l| l.starts_with("raft.heartbeat")));

        let f = file("node_id = \n");
        let lines = problems(load(&["--config", f.path().to_str().unwrap()], &[]));
        assert_eq!(lines.len(), 1);
        assert!(lines[0].contains(":1:"), "{}", lines[0]);

        let lines = problems(load(&["--config", "/nonexistent/idem.toml"], &[]));
        assert!(lines[0].starts_with("config file /nonexistent/idem.toml"));
    }

    #[test]
    fn endpoint_policies_come_from_the_file() {
        let f = file(
            r#"
[policy]
risk = "normal"

[policies."POST /v1/charges"]
risk = "HIGH"
retention = "7d"

[policies."POST /v1/exports"]
lease = "5m"
max_result_bytes = 1024
"#,
        );
        let config = load(&["--config", f.path().to_str().unwrap()], &[]).unwrap();
        let charges = config.policies.for_endpoint("POST /v1/charges");
        assert_eq!(charges.risk, Risk::High);
        assert_eq!(charges.retention, Duration::from_secs(7 * 86_400));
        assert_eq!(charges.lease, Duration::from_secs(30));
        let exports = config.policies.for_endpoint("POST /v1/exports");
        assert_eq!(exports.lease, Duration::from_secs(300));
        assert_eq!(exports.max_result_bytes, 1024);
    }

    #[test]
    fn bad_endpoint_policies_name_the_endpoint() {
        let f = file(
            r#"
[policies."charges"]
risk = "HIGH"

[policies."POST /v1/x"]
lease = "2h"
risk = "EXTREME"
"#,
        );
        let lines = problems(load(&["--config", f.path().to_str().unwrap()], &[]));
        assert_eq!(lines.len(), 3, "{lines:#?}");
        assert!(lines.iter().any(|l| l.starts_with("policies.\"charges\"")));
        assert!(lines
            .iter()
            .any(|l| l.starts_with("policies.\"POST /v1/x\".risk")));
        assert!(lines
            .iter()
            .any(|l| l.starts_with("policies.\"POST /v1/x\"")
                && l.contains("lease: must be between")));
    }

    #[test]
    fn printed_config_loads_back_identically() {
        let f = file(
            "node_id = 3\nlog_format = \"json\"\n[policies.\"POST /v1/charges\"]\nrisk = \"HIGH\"\nretention = \"7d\"\n",
        );
        let config = load(
            &[
                "--config",
                f.path().to_str().unwrap(),
                "--sweep-interval",
                "90s",
            ],
            &[],
        )
        .unwrap();
        let printed = config.to_toml();
        let again = file(&printed);
        let reloaded = load(&["--config", again.path().to_str().unwrap()], &[]).unwrap();
        assert_eq!(reloaded, config, "{printed}");
    }

    #[test]
    fn help_and_version_are_cli_errors_for_clap_to_print() {
        assert!(matches!(
            Config::load(["idemd", "--help"], &|_| None),
            Err(ConfigError::Cli(_))
        ));
        assert!(matches!(
            Config::load(["idemd", "--no-such-flag"], &|_| None),
            Err(ConfigError::Cli(_))
        ));
    }

    #[test]
    fn cluster_members_come_from_file_env_or_flags() {
        let f = file(
            r#"
node_id = 2
raft_addr = "127.0.0.1:7411"
api_addr = "127.0.0.1:7401"
[cluster]
initial_members = [
  { id = 1, raft_addr = "127.0.0.1:7410", api_addr = "127.0.0.1:7400", region = "r1", zone = "r1-a" },
  { id = 2, raft_addr = "127.0.0.1:7411", api_addr = "127.0.0.1:7401" },
]
"#,
        );
        let path = f.path().to_str().unwrap();
        let config = load(&["--config", path], &[]).unwrap();
        assert_eq!(config.cluster.initial_members.len(), 2);
        assert!(!config.cluster.join);
        let again = file(&config.to_toml());
        let reloaded = load(&["--config", again.path().to_str().unwrap()], &[]).unwrap();
        assert_eq!(reloaded.cluster, config.cluster);

        let env = [(
            "IDEM_INITIAL_MEMBERS",
            "2=127.0.0.1:7411,127.0.0.1:7401;3=127.0.0.1:7412,127.0.0.1:7402,r3",
        )];
        let config = load(&["--config", path], &env).unwrap();
        let ids: Vec<u64> = config
            .cluster
            .initial_members
            .iter()
            .map(|m| m.id)
            .collect();
        assert_eq!(ids, vec![2, 3]);

        let lines = problems(load(
            &[
                "--config",
                path,
                "--initial-member",
                "1=127.0.0.1:7410,127.0.0.1:7400",
            ],
            &[],
        ));
        assert_eq!(lines.len(), 1, "{lines:#?}");
        assert!(
            lines[0].contains("node_id = 2) is not listed"),
            "{}",
            lines[0]
        );
        let config = load(
            &[
                "--config",
                path,
                "--initial-member",
                "1=127.0.0.1:7410,127.0.0.1:7400",
                "--join",
            ],
            &[],
        )
        .unwrap();
        assert!(config.cluster.join);
    }

    #[test]
    fn raft_config_is_valid() {
        let raft = Config::default().raft_config().unwrap();
        assert_eq!(raft.enable_pre_vote, Some(true));
        assert_eq!(raft.heartbeat_interval, 250);
        assert_eq!(raft.election_timeout_min, 1000);
        assert_eq!(raft.election_timeout_max, 2000);
    }
}
