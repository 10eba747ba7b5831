//! The command line of `idemd` (clap), whose flags and `IDEM_*` variables are the config keys.

use std::path::PathBuf;

use clap::Parser;

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
    /// A file holding the cluster's secret for the keyed key hashes in logs (the same file on
    /// every node, so one key has one hash across the cluster; without it each process uses
    /// a random secret) [env: IDEM_LOG_KEY_FILE]
    #[arg(long, value_name = "FILE")]
    log_key_file: Option<String>,
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
    /// Warn in claim answers and idem_key_warnings_total about keys that look sequential,
    /// like a timestamp, short or low in entropy; never refuses [env: IDEM_KEY_WARNINGS]
    /// [default: on]
    #[arg(long, value_name = "on|off")]
    key_warnings: Option<String>,
    /// Authentication of API calls: on (tokens or client certificates required) or off (a
    /// development node only) [env: IDEM_AUTH] [default: on]
    #[arg(long, value_name = "on|off")]
    auth: Option<String>,
    /// The credentials file (token digests and certificate names with their roles and
    /// tenants; re-read when it changes) [env: IDEM_AUTH_CREDENTIALS]
    #[arg(long, value_name = "FILE")]
    auth_credentials: Option<String>,
    /// Export spans as OpenTelemetry traces to this OTLP/gRPC collector
    /// (http://host:4317); off when unset [env: IDEM_OTLP_ENDPOINT]
    #[arg(long, value_name = "URL")]
    otlp_endpoint: Option<String>,
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
    /// API port TLS: PEM certificate chain; enables TLS on the API port [env: IDEM_TLS_CERT]
    #[arg(long, value_name = "FILE")]
    tls_cert: Option<String>,
    /// API port TLS: PEM private key of --tls-cert [env: IDEM_TLS_KEY]
    #[arg(long, value_name = "FILE")]
    tls_key: Option<String>,
    /// API port TLS: PEM CA that client certificates must chain to [env: IDEM_TLS_CA]
    #[arg(long, value_name = "FILE")]
    tls_ca: Option<String>,
    /// API port TLS: require or optional client certificates [env: IDEM_TLS_CLIENT_AUTH] [default: optional]
    #[arg(long, value_name = "MODE")]
    tls_client_auth: Option<String>,
    /// Raft port mutual TLS: this node's PEM certificate chain [env: IDEM_PEER_TLS_CERT]
    #[arg(long, value_name = "FILE")]
    peer_tls_cert: Option<String>,
    /// Raft port mutual TLS: PEM private key of --peer-tls-cert [env: IDEM_PEER_TLS_KEY]
    #[arg(long, value_name = "FILE")]
    peer_tls_key: Option<String>,
    /// Raft port mutual TLS: PEM cluster CA; peers must present a certificate it signed [env: IDEM_PEER_TLS_CA]
    #[arg(long, value_name = "FILE")]
    peer_tls_ca: Option<String>,
    /// An initial cluster member, repeatable; the lowest id bootstraps the cluster
    /// [env: IDEM_INITIAL_MEMBERS, members separated by ;]
    #[arg(long, value_name = "ID=RAFT_ADDR,API_ADDR[,REGION[,ZONE]]")]
    initial_member: Vec<String>,
    /// Start without bootstrapping and wait to be added with `idemctl member add` [env: IDEM_JOIN]
    #[arg(long)]
    join: bool,
}
