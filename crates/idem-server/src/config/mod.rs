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

use clap::CommandFactory;
use idem_core::{Policy, Scope};

mod auth;
mod cli;
pub mod cluster;
mod file;
mod limits;
mod sources;
mod telemetry;
#[cfg(test)]
mod tests;
mod tls;
pub(crate) mod values;

pub use auth::AuthConfig;
pub use cli::Cli;
pub use cluster::{ClusterConfig, InitialMember};
pub use telemetry::TelemetryConfig;
pub use tls::{ClientAuth, PeerTlsConfig, TlsConfig};
pub use values::format_duration;

use file::read_file;
use sources::*;
use values::*;

use crate::limits::LimitsConfig;
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
    /// The file of the secret that keys the key hashes in logs (`None`: a random one per
    /// process).
    pub log_key_file: Option<PathBuf>,
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
    /// Whether claims warn about keys that look weak (advisory, never a refusal).
    pub key_warnings: bool,
    /// Raft timing and compaction.
    pub raft: RaftConfig,
    /// Default and per-endpoint policies.
    pub policies: Policies,
    /// TLS on the API port (`[tls]`); `None`: plaintext.
    pub tls: Option<TlsConfig>,
    /// Mutual TLS on the Raft port and to peers (`[peer_tls]`); `None`: plaintext.
    pub peer_tls: Option<PeerTlsConfig>,
    /// Rates, quotas, concurrency, HTTP/2 and snapshot bounds (`[limits]`).
    pub limits: LimitsConfig,
    /// Initial members and bootstrap mode (`[cluster]`).
    pub cluster: ClusterConfig,
    /// Authentication of API calls (`[auth]`).
    pub auth: AuthConfig,
    /// Trace export (`[telemetry]`); off by default.
    pub telemetry: TelemetryConfig,
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
            log_key_file: None,
            write_timeout: Duration::from_secs(5),
            read_timeout: Duration::from_secs(5),
            sweep_interval: Duration::from_secs(10),
            sweep_batch: 1000,
            max_request_bytes: 2 << 20,
            max_body_bytes: 1 << 20,
            shutdown_grace: Duration::from_secs(10),
            key_warnings: true,
            raft: RaftConfig::default(),
            policies: Policies::default(),
            tls: None,
            peer_tls: None,
            limits: LimitsConfig::default(),
            cluster: ClusterConfig::default(),
            auth: AuthConfig::default(),
            telemetry: TelemetryConfig::default(),
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
        if let Some(path) = &self.log_key_file {
            root.insert("log_key_file".into(), string(&path.to_string_lossy()));
        }
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
        let key_warnings = if self.key_warnings { "on" } else { "off" };
        root.insert("key_warnings".into(), string(key_warnings));

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
        root.insert("auth".into(), toml::Value::Table(self.auth.to_toml()));
        root.insert(
            "telemetry".into(),
            toml::Value::Table(self.telemetry.to_toml()),
        );

        let default = &self.policies.default;
        let mut policy = toml::Table::new();
        policy.insert("lease".into(), duration(default.lease));
        policy.insert("retention".into(), duration(default.retention));
        policy.insert("risk".into(), string(default.risk.name()));
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
                table.insert("risk".into(), string(risk.name()));
            }
            if let Some(bytes) = custom.max_result_bytes {
                table.insert("max_result_bytes".into(), int(bytes.into()));
            }
            if let Some(lease) = custom.lease_ceiling {
                table.insert("lease_ceiling".into(), duration(lease));
            }
            if let Some(retention) = custom.retention_ceiling {
                table.insert("retention_ceiling".into(), duration(retention));
            }
            if let Some(bytes) = custom.max_result_bytes_ceiling {
                table.insert("max_result_bytes_ceiling".into(), int(bytes.into()));
            }
            if let Some(after) = custom.stuck_after {
                table.insert("stuck_after".into(), duration(after));
            }
            if let Some(after) = custom.abandon_after {
                table.insert("abandon_after".into(), duration(after));
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
        root.insert("limits".into(), limits::limits_toml(&self.limits));
        if let Some(api) = &self.tls {
            root.insert("tls".into(), tls::tls_toml(api));
        }
        if let Some(peer) = &self.peer_tls {
            root.insert("peer_tls".into(), tls::peer_tls_toml(peer));
        }
        toml::to_string(&root).unwrap_or_else(|e| format!("# cannot render: {e}\n"))
    }
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
    let log_key_file = sources.get(LOG_KEY_FILE, None, |s| path(s).map(Some), &mut p);
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
    let key_warnings = sources.get(KEY_WARNINGS, d.key_warnings, switch, &mut p);
    let tls = tls::build_tls(sources, &mut p);
    let peer_tls = tls::build_peer_tls(sources, &mut p);
    let raft = build_raft(sources, &mut p);
    let policies = build_policies(sources, &mut p);
    let cluster = build_cluster(sources, &mut p);
    let auth = auth::build(sources, &mut p);
    let telemetry = telemetry::build(sources, &mut p);
    let limits = limits::build_limits(sources, &mut p);
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
        log_key_file,
        write_timeout,
        read_timeout,
        sweep_interval,
        sweep_batch,
        max_request_bytes,
        max_body_bytes,
        shutdown_grace,
        key_warnings,
        tls,
        peer_tls,
        raft,
        policies,
        limits,
        cluster,
        auth,
        telemetry,
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
        p.extend(ceiling_problems(&name, path, &parsed, &policies.default));
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
        lease_ceiling: endpoint_field(name, table, "lease_ceiling", path, lease_ceiling, p),
        retention_ceiling: endpoint_field(
            name,
            table,
            "retention_ceiling",
            path,
            retention_ceiling,
            p,
        ),
        max_result_bytes_ceiling: endpoint_field(
            name,
            table,
            "max_result_bytes_ceiling",
            path,
            result_bytes,
            p,
        ),
        stuck_after: endpoint_field(name, table, "stuck_after", path, stuck_after, p),
        abandon_after: endpoint_field(name, table, "abandon_after", path, abandon_after, p),
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

/// An endpoint whose own values exceed its ceilings.
fn ceiling_problems(
    name: &str,
    path: &Path,
    custom: &EndpointPolicy,
    default: &Policy,
) -> Vec<String> {
    let mut problems = Vec::new();
    let mut check = |key: &str, value: String, ceiling: String, above: bool| {
        if above {
            problems.push(format!(
                "{name}.{key}_ceiling = {ceiling:?} (in file {}): below the endpoint's own {key} ({value})",
                path.display()
            ));
        }
    };
    let lease = custom.lease.unwrap_or(default.lease);
    if let Some(ceiling) = custom.lease_ceiling {
        check(
            "lease",
            format_duration(lease),
            format_duration(ceiling),
            lease > ceiling,
        );
    }
    let retention = custom.retention.unwrap_or(default.retention);
    if let Some(ceiling) = custom.retention_ceiling {
        let (v, c) = (format_duration(retention), format_duration(ceiling));
        check("retention", v, c, retention > ceiling);
    }
    let bytes = custom.max_result_bytes.unwrap_or(default.max_result_bytes);
    if let Some(ceiling) = custom.max_result_bytes_ceiling {
        check(
            "max_result_bytes",
            bytes.to_string(),
            ceiling.to_string(),
            bytes > ceiling,
        );
    }
    problems
}

fn lease_ceiling(text: &str) -> Result<Duration, String> {
    duration_in(
        text,
        idem_core::policy::MIN_LEASE,
        idem_core::policy::MAX_LEASE,
    )
}

fn retention_ceiling(text: &str) -> Result<Duration, String> {
    duration_in(
        text,
        idem_core::policy::MIN_RETENTION,
        idem_core::policy::MAX_RETENTION,
    )
}

/// An endpoint's `stuck_after`: at least a second, at most the longest retention.
fn stuck_after(text: &str) -> Result<Duration, String> {
    duration_in(
        text,
        Duration::from_secs(1),
        idem_core::policy::MAX_RETENTION,
    )
}

/// An endpoint's `abandon_after`, in the range the `Abandon` command accepts.
fn abandon_after(text: &str) -> Result<Duration, String> {
    duration_in(
        text,
        idem_core::policy::MIN_ABANDON_AFTER,
        idem_core::policy::MAX_ABANDON_AFTER,
    )
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
