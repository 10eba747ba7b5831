//! The command line, as clap derive types.
//!
//! Arguments shared by many commands are structs flattened into each command (scope, key,
//! fence, result, error), so a flag means the same thing everywhere and is parsed in one
//! place. Scope flags and the endpoint list also come from `IDEMCTL_*` environment variables,
//! which keeps an interactive session short: export the scope once, then type only
//! `idemctl claim --key k1 --body '{}'`.

use std::path::PathBuf;
use std::time::Duration;

use clap::{ArgGroup, Args, Parser, Subcommand, ValueEnum};

/// Parses a duration such as `30s`, `5m`, `1h 30m`, `250ms`.
pub fn duration(text: &str) -> Result<Duration, humantime::DurationError> {
    humantime::parse_duration(text)
}

/// Parses `name=value` (the value may itself contain `=`).
pub fn key_value(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((name, value)) if !name.is_empty() => Ok((name.to_owned(), value.to_owned())),
        _ => Err(format!("expected NAME=VALUE, got {text:?}")),
    }
}

const ABOUT: &str = "Operator CLI of idem, the replicated idempotency-key store";

const LONG_ABOUT: &str = "\
Operator CLI of idem, the replicated idempotency-key store.

idemctl speaks the public gRPC API (idem.v1) of an idemd cluster: it claims keys and drives a
record through its lifecycle as a worker would (start, call, renew, complete, fail, release,
cancel), reads records (get, wait, op show, op list) and performs the audited admin actions
(op reconcile, purge). Transport failures are retried with the same request (same key,
holder and fence), and writes follow the leader.

Operators manage the cluster with it too: membership (member, leader), status of every node
and Raft group (status, cluster status), and regions: the placement mode (cluster mode),
regions (region add), tenant homes (tenant bind/unbind/list) and region failover (failover
status, failover confirm).

Scope flags (--tenant, --env, --actor, --endpoint) can be set once through IDEMCTL_TENANT,
IDEMCTL_ENV, IDEMCTL_ACTOR and IDEMCTL_ENDPOINT.";

const AFTER_HELP: &str = "\
Examples:
  export IDEMCTL_TENANT=acme IDEMCTL_ENV=prod IDEMCTL_ACTOR=user-42
  export IDEMCTL_ENDPOINT='POST /v1/charges'
  idemctl claim --key order-7f3a --body '{\"amount\":100}'
  idemctl complete --key order-7f3a --fence 1 --status 201 --resource-id ch_1
  idemctl -w json get --key order-7f3a
  idemctl op list --state PENDING,IN_PROGRESS --older-than 5m
  idemctl cluster mode region-affinity && idemctl region add eu-west
  idemctl tenant bind acme --home eu-west
  idemctl cluster status; idemctl failover status

Output: -w table (default) prints aligned key/value lines; -w json prints exactly one JSON
object on stdout, errors included ({\"error\": REASON, \"message\": ...}).

Exit codes:
  0  the call succeeded (a claim outcome such as IN_PROGRESS or FINGERPRINT_MISMATCH is an
     answer, not an error: read `outcome`)
  1  the server refused the call (STALE_FENCE, WRONG_STATE, NOT_FOUND, VERSION_MISMATCH, ...)
  2  usage error or invalid input (INVALID_KEY, INVALID_SCOPE, bad JSON body, ...)
  3  unavailable or outcome unknown: re-run the same command (same key, holder, fence)";

/// `idemctl [GLOBAL OPTIONS] COMMAND`.
#[derive(Debug, Parser)]
#[command(name = "idemctl", version, about = ABOUT, long_about = LONG_ABOUT, after_help = AFTER_HELP)]
pub struct Cli {
    /// Comma-separated idemd API addresses (HOST:PORT); writes follow the leader.
    #[arg(
        long,
        global = true,
        env = "IDEMCTL_ENDPOINTS",
        value_delimiter = ',',
        default_value = "127.0.0.1:7400"
    )]
    pub endpoints: Vec<String>,

    /// Output format.
    #[arg(short = 'w', long = "write-out", global = true, value_enum, default_value_t = Format::Table)]
    pub write_out: Format,

    /// Time allowed for one attempt of a call (e.g. 10s, 500ms).
    #[arg(long, global = true, value_parser = duration, default_value = "10s")]
    pub request_timeout: Duration,

    /// Most attempts of one call (1 = no retry).
    #[arg(long, global = true, default_value_t = 8)]
    pub max_attempts: u32,

    /// TLS and credentials (before the command: --key of a command is the idempotency key).
    #[command(flatten)]
    pub security: SecurityArgs,

    /// The command.
    #[command(subcommand)]
    pub command: Command,
}

/// How idemctl reaches a secure cluster (etcdctl's flag names).
#[derive(Debug, Default, Args)]
pub struct SecurityArgs {
    /// CA certificate (PEM) to verify the nodes with; switches to https://.
    #[arg(long, env = "IDEMCTL_CACERT", value_name = "FILE")]
    pub cacert: Option<PathBuf>,
    /// Client certificate (PEM) to authenticate with (with --key).
    #[arg(long, env = "IDEMCTL_CERT", value_name = "FILE", requires = "key")]
    pub cert: Option<PathBuf>,
    /// Private key (PEM) of --cert.
    #[arg(long, env = "IDEMCTL_KEY", value_name = "FILE", requires = "cert")]
    pub key: Option<PathBuf>,
    /// Name the nodes' certificates must carry, instead of each endpoint's host.
    #[arg(long, env = "IDEMCTL_SERVER_NAME", value_name = "NAME")]
    pub server_name: Option<String>,
    /// Bearer token sent with every call (prefer the environment to the command line).
    #[arg(
        long,
        env = "IDEMCTL_TOKEN",
        value_name = "TOKEN",
        hide_env_values = true
    )]
    pub token: Option<String>,
}

/// Output formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Aligned key/value lines and tables, for people.
    Table,
    /// Exactly one JSON object on stdout, for scripts.
    Json,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Claim a key: ACQUIRED / TAKEN_OVER (you own it: fence), IN_PROGRESS, COMPLETED, ...
    #[command(
        long_about = "Claim (scope, key) for one attempt.\n\nThe body is fingerprinted here \
                      with jcs-sha256/v1 over the canonical request {method, route, \
                      path_params, query, body}, method and route taken from --endpoint. \
                      A retry with the same key and the same request gets the stored answer; \
                      a different body gets FINGERPRINT_MISMATCH.",
        after_help = "Examples:\n  idemctl claim --key order-7f3a --body '{\"amount\":100}' \
                      --risk HIGH --lease 30s\n  idemctl claim --key k2 --endpoint 'POST \
                      /v1/accounts/{id}/charges' --path-param id=42 --query expand=customer \
                      --body-file req.json"
    )]
    Claim(ClaimArgs),

    /// Owner: PENDING -> IN_PROGRESS.
    #[command(after_help = "Example:\n  idemctl start --key order-7f3a --fence 1")]
    Start(FencedArgs),

    /// Owner: record the external call (--calling before, --confirmed REF after).
    #[command(
        long_about = "Owner: write the external-call ledger. Record --calling before calling \
                      a downstream (pass the operation id as its idempotency key), and \
                      --confirmed REMOTE_REF once it answered.",
        after_help = "Examples:\n  idemctl call --key order-7f3a --fence 1 --calling\n  \
                      idemctl call --key order-7f3a --fence 1 --confirmed ch_123"
    )]
    Call(CallArgs),

    /// Owner: extend the lease.
    #[command(after_help = "Example:\n  idemctl renew --key order-7f3a --fence 1 --lease 60s")]
    Renew(RenewArgs),

    /// Owner: store the result; the record becomes COMPLETED and is replayed.
    #[command(
        mut_arg("status", |a| a.required(true)),
        after_help = "Example:\n  idemctl complete --key order-7f3a --fence 1 --status 201 \
                      --resource-id ch_123 --field amount=100"
    )]
    Complete(CompleteArgs),

    /// Owner: record a failure, --retryable (next claim takes over) or --terminal (replayed).
    #[command(
        mut_arg("error", |a| a.required(true)),
        after_help = "Examples:\n  idemctl fail --key order-7f3a --fence 1 --terminal --code \
                      card_declined --error 'card declined'\n  idemctl fail --key order-7f3a \
                      --fence 1 --retryable --code upstream_503 --error 'try later'"
    )]
    Fail(FailArgs),

    /// Owner: give the record up (back to PENDING); only before any external call.
    #[command(after_help = "Example:\n  idemctl release --key order-7f3a --fence 1")]
    Release(FencedArgs),

    /// Owner: cancel (CANCELLED, terminal); only before any external call.
    #[command(after_help = "Example:\n  idemctl cancel --key order-7f3a --fence 1")]
    Cancel(FencedArgs),

    /// Read a record and what a matching claim would get now.
    #[command(after_help = "Example:\n  idemctl -w json get --key order-7f3a")]
    Get(KeyArgs),

    /// Wait (at most 30s) until the record is settled, then print it.
    #[command(after_help = "Example:\n  idemctl wait --key order-7f3a --timeout 10s")]
    Wait(WaitArgs),

    /// Operations by id: show, list, reconcile.
    #[command(subcommand)]
    Op(OpCommand),

    /// Automatic reconciliation: ask the downstream, settle records of unknown outcome.
    #[command(subcommand)]
    Reconcile(crate::commands::reconcile::ReconcileCommand),

    /// The heaviest keys and tenants of a node's recent claims (misuse signals).
    #[command(subcommand)]
    Top(crate::commands::top::TopCommand),

    /// Scrub a subject's stored result fields, keeping the anti-duplicate tombstones.
    #[command(
        long_about = "Scrub the stored result fields and error messages of every record of \
                      (tenant, actor), e.g. for a data-deletion request. The records stay as \
                      tombstones: a retry is still answered COMPLETED (purged) and never \
                      runs again. Audited.",
        after_help = "Example:\n  idemctl purge --tenant acme --actor user-42 --reason 'GDPR-123'"
    )]
    Purge(PurgeArgs),

    /// Throwaway certificates (a CA, node and client certificates) for tests and local clusters.
    #[command(subcommand)]
    Cert(CertCommand),

    /// Authentication: the bearer tokens of a credentials file (create, revoke, list).
    #[command(subcommand)]
    Auth(AuthCommand),

    /// Status of every endpoint: node, leader, term, indexes, records by state.
    #[command(after_help = "Example:\n  idemctl --endpoints n1:7400,n2:7400,n3:7400 status")]
    Status,

    /// Cluster membership: list, add (as a learner), promote, remove.
    #[command(subcommand)]
    Member(MemberCommand),

    /// Raft leadership: transfer (of the global group or a region group).
    #[command(subcommand)]
    Leader(LeaderCommand),

    /// The whole cluster: status of every member and group, configuration, placement mode.
    #[command(subcommand)]
    Cluster(ClusterCommand),

    /// Regions: define one (it gets a Raft group whose leader is kept there).
    #[command(subcommand)]
    Region(RegionCommand),

    /// Tenant homes (region-affinity mode): bind, unbind, list.
    #[command(subcommand)]
    Tenant(TenantCommand),

    /// Region failover of the region groups: status, confirm a new home.
    #[command(subcommand)]
    Failover(FailoverCommand),

    /// Backups: save a live node's state to a file, restore a file into a new data directory.
    #[command(subcommand)]
    Snapshot(SnapshotCommand),

    /// The audit log of administrative changes: who changed what, when and why.
    #[command(subcommand)]
    Audit(AuditCommand),
}

/// `idemctl audit ...`.
#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// List audit entries, oldest first (admins see all; operators their tenants' only).
    #[command(
        long_about = "List the audit log of one group, oldest first: every reconcile, purge, \
                      mode, region, tenant-home and membership change with the authenticated \
                      principal who made it and the reason it gave, and the automatic \
                      failover changes (as node:<id>). Without --limit every page is read; \
                      with it, one page and its next_seq (continue with --from).",
        after_help = "Examples:\n  idemctl audit list --since 2026-12-01T00:00:00Z --kind \
                      bind_tenant,unbind_tenant\n  idemctl -w json audit list --tenant acme"
    )]
    List(AuditListArgs),
}

/// `idemctl audit list`.
#[derive(Debug, Args)]
pub struct AuditListArgs {
    /// Only entries at or after this time (RFC 3339, e.g. 2026-12-01T00:00:00Z).
    #[arg(long, value_parser = rfc3339_millis)]
    pub since: Option<i64>,
    /// Only entries before this time (RFC 3339).
    #[arg(long, value_parser = rfc3339_millis)]
    pub until: Option<i64>,
    /// Only entries about this tenant.
    #[arg(long)]
    pub tenant: Option<String>,
    /// Only these kinds (repeatable or comma-separated): reconcile, purge_subject,
    /// confirm_home, set_mode, add_region, bind_tenant, unbind_tenant, enter_failover,
    /// end_failover, membership.
    #[arg(long = "kind", value_delimiter = ',')]
    pub kinds: Vec<String>,
    /// One page of at most this many entries (at most 1000); default: every entry.
    #[arg(long)]
    pub limit: Option<u32>,
    /// First sequence number (a previous page's next_seq).
    #[arg(long = "from", default_value_t = 0)]
    pub from_seq: u64,
    /// The group whose log is read (0: the global group; see `cluster status`).
    #[arg(long, default_value_t = 0)]
    pub group: u64,
    /// Print JSON (same as the global `-w json`).
    #[arg(long)]
    pub json: bool,
}

/// Milliseconds since the Unix epoch of an RFC 3339 time.
fn rfc3339_millis(text: &str) -> Result<i64, String> {
    let time = humantime::parse_rfc3339_weak(text)
        .map_err(|e| format!("{e}: expected RFC 3339 such as 2026-12-01T00:00:00Z"))?;
    let since_epoch = time
        .duration_since(std::time::UNIX_EPOCH)
        .map_err(|_| "before 1970".to_owned())?;
    i64::try_from(since_epoch.as_millis()).map_err(|_| "too far in the future".to_owned())
}

/// `idemctl snapshot ...`.
#[derive(Debug, Subcommand)]
pub enum SnapshotCommand {
    /// Stream a consistent, digest-checked backup from a live node (admin role) to FILE.
    #[command(
        long_about = "Stream a backup of the cluster's state to FILE from the first reachable \
                      endpoint: every Raft group (the global group and each region group), \
                      every record with its result and fence, as of a read barrier of each \
                      group taken when the call starts (so it holds every write acknowledged \
                      before it). Any node can serve it. The file is written next to FILE, its \
                      SHA-256 checked, then renamed into place; prints the applied index each \
                      group reflects (groups: group@index).",
        after_help = "Example:\n  idemctl --endpoints n2:7400 snapshot save /backups/idem-$(date +%F).idembk"
    )]
    Save(SnapshotSaveArgs),
    /// Seed a new, empty data directory from a backup: a single node with the backup's state.
    #[command(
        long_about = "Seed DIR from a backup FILE (its digest is checked first; a non-empty DIR \
                      is refused). Every group of the backup is seeded (region group N under \
                      DIR/groups/N). Start idemd on DIR with the same node id and addresses: \
                      it starts as a cluster of one holding every record, result and fence of \
                      the backup; add more nodes with `idemctl member add` (started with \
                      --join): they join every group. Talks to no node.",
        after_help = "Example:\n  idemctl snapshot restore /backups/idem-2026-12-03.idembk --data-dir /var/lib/idem \\\n    --node-id 1 --raft-addr 10.0.0.1:7410 --api-addr 10.0.0.1:7400 --region eu-west --zone eu-west-a"
    )]
    Restore(SnapshotRestoreArgs),
}

/// `idemctl snapshot save`.
#[derive(Debug, Args)]
pub struct SnapshotSaveArgs {
    /// Where to write the backup (replaced atomically).
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
}

/// `idemctl snapshot restore`.
#[derive(Debug, Args)]
pub struct SnapshotRestoreArgs {
    /// The backup file.
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// The new node's data directory (missing or empty).
    #[arg(long, value_name = "DIR")]
    pub data_dir: PathBuf,
    /// The new node's id (idemd's --node-id).
    #[arg(long, default_value_t = 1)]
    pub node_id: u64,
    /// The new node's Raft address, as its peers reach it (idemd's --raft-addr).
    #[arg(long, default_value = "127.0.0.1:7410")]
    pub raft_addr: std::net::SocketAddr,
    /// The new node's API address (idemd's --api-addr).
    #[arg(long, default_value = "127.0.0.1:7400")]
    pub api_addr: std::net::SocketAddr,
    /// The new node's region (idemd's --region).
    #[arg(long, default_value = "local")]
    pub region: String,
    /// The new node's zone (idemd's --zone).
    #[arg(long, default_value = "local-a")]
    pub zone: String,
}

/// `idemctl auth ...`.
#[derive(Debug, Subcommand)]
pub enum AuthCommand {
    /// Bearer tokens: replicated in the cluster (the default), or in a credentials file
    /// (`--file`, for bootstrapping).
    #[command(subcommand)]
    Token(TokenCommand),
}

/// `idemctl auth token ...`: the cluster's replicated tokens (Admin.CreateToken,
/// RevokeToken, ListTokens, as an admin of every tenant), or with `--file` the tokens of a
/// credentials file (edited in place, no node involved).
#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Create a token: a random secret, printed once; only its SHA-256 is stored.
    #[command(
        long_about = "Create a token: a random secret (idem_ + 64 hex digits), printed once; \
                      only its SHA-256 digest is stored. By default the cluster stores it in \
                      its replicated configuration (audited as create_token; every node \
                      accepts it once it has applied the change). With --file it is written \
                      to that credentials file instead (bootstrapping the first admin).",
        after_help = "Examples:\n  idemctl auth token create --name payments-eu --role worker \
                      --tenant acme --reason CHG-12\n  idemctl auth token create --file \
                      /etc/idem/credentials.toml --name ops --role admin --tenant '*'"
    )]
    Create(TokenCreateArgs),
    /// Revoke a token by name: every node refuses it within a second.
    #[command(
        long_about = "Revoke a token by name. A replicated token (the default) is refused by \
                      every node once it has applied the revocation, within a second \
                      (audited as revoke_token). With --file the entry is deleted from that \
                      file; nodes stop accepting it within a second of reading it.",
        after_help = "Examples:\n  idemctl auth token revoke --name payments-eu --reason \
                      INC-3\n  idemctl auth token revoke --file /etc/idem/credentials.toml \
                      --name payments-eu"
    )]
    Revoke(TokenRevokeArgs),
    /// List the tokens: name, role, tenants, and who created them when (never a secret).
    List(TokenFileArgs),
}

/// `idemctl auth token create`.
#[derive(Debug, Args)]
pub struct TokenCreateArgs {
    /// Edit this credentials file (created when missing) instead of the cluster.
    #[arg(long, alias = "credentials", value_name = "FILE")]
    pub file: Option<PathBuf>,
    /// The principal's name: audited for its changes, unique.
    #[arg(long)]
    pub name: String,
    /// worker, operator or admin.
    #[arg(long, default_value = "worker")]
    pub role: String,
    /// A tenant the token acts for (repeat it; '*' for every tenant).
    #[arg(long = "tenant", value_name = "TENANT")]
    pub tenants: Vec<String>,
    /// Why (audited with the change).
    #[command(flatten)]
    pub audit: AuditReasonArgs,
}

/// `idemctl auth token revoke`.
#[derive(Debug, Args)]
pub struct TokenRevokeArgs {
    /// Edit this credentials file instead of the cluster.
    #[arg(long, alias = "credentials", value_name = "FILE")]
    pub file: Option<PathBuf>,
    /// The token's name.
    #[arg(long)]
    pub name: String,
    /// Why (audited with the change).
    #[command(flatten)]
    pub audit: AuditReasonArgs,
}

/// `idemctl auth token list`.
#[derive(Debug, Args)]
pub struct TokenFileArgs {
    /// List this credentials file's principals instead of the cluster's tokens.
    #[arg(long, alias = "credentials", value_name = "FILE")]
    pub file: Option<PathBuf>,
}

/// `idemctl cert ...`.
#[derive(Debug, Subcommand)]
pub enum CertCommand {
    /// Create a self-signed CA: DIR/ca.pem and DIR/ca-key.pem.
    #[command(after_help = "Example:\n  idemctl cert create-ca --dir ./certs")]
    CreateCa(CertNameArgs),
    /// Issue a node certificate (server and peer client) signed by DIR's CA: DIR/NAME.pem and
    /// DIR/NAME-key.pem, naming the given DNS names and IP addresses.
    #[command(
        after_help = "Example:\n  idemctl cert node --dir ./certs --name node1 --dns localhost --ip 127.0.0.1"
    )]
    Node(CertNodeArgs),
    /// Issue a client certificate (CN = NAME, the identity the node sees) signed by DIR's CA.
    #[command(after_help = "Example:\n  idemctl cert client --dir ./certs --name admin")]
    Client(CertClientArgs),
}

/// `idemctl cert create-ca`.
#[derive(Debug, Args)]
pub struct CertNameArgs {
    /// Directory of the CA files and of the files written.
    #[arg(long, default_value = ".")]
    pub dir: PathBuf,
    /// The certificate's common name (and file name).
    #[arg(long, default_value = "idem-ca")]
    pub name: String,
}

/// `idemctl cert client`.
#[derive(Debug, Args)]
pub struct CertClientArgs {
    /// Directory of the CA files and of the files written.
    #[arg(long, default_value = ".")]
    pub dir: PathBuf,
    /// The certificate's common name (the client's identity) and file name, e.g. admin.
    #[arg(long)]
    pub name: String,
}

/// `idemctl cert node`.
#[derive(Debug, Args)]
pub struct CertNodeArgs {
    /// Directory of the CA files and of the files written.
    #[arg(long, default_value = ".")]
    pub dir: PathBuf,
    /// The certificate's common name (and file name), e.g. node1.
    #[arg(long)]
    pub name: String,
    /// A DNS name of the node (repeatable).
    #[arg(long)]
    pub dns: Vec<String>,
    /// An IP address of the node (repeatable).
    #[arg(long)]
    pub ip: Vec<std::net::IpAddr>,
}

/// `idemctl member ...`.
#[derive(Debug, Subcommand)]
pub enum MemberCommand {
    /// Members with the leader's view of their replication (matched index, lag).
    #[command(after_help = "Example:\n  idemctl member list")]
    List,

    /// Add a node as a learner; returns once it caught up with the leader's log.
    #[command(
        long_about = "Add a started node (idemd --join) as a learner. The command returns \
                      once the learner caught up with the leader's log (caught_up = true), \
                      or when the server's bound passed (caught_up = false: check its lag \
                      with `member list`). Then promote it to a voter.",
        after_help = "Example:\n  idemctl member add --id 4 --raft-addr 10.0.1.14:7410 \
                      --api-addr 10.0.1.14:7400 --region eu-west --zone eu-west-1b"
    )]
    Add(MemberAddArgs),

    /// Turn a learner into a voter.
    #[command(after_help = "Example:\n  idemctl member promote 4")]
    Promote(MemberIdArgs),

    /// Remove a voter or a learner (never the last voter).
    #[command(after_help = "Example:\n  idemctl member remove 4")]
    Remove(MemberIdArgs),
}

/// `idemctl leader ...`.
#[derive(Debug, Subcommand)]
pub enum LeaderCommand {
    /// Hand leadership of a group to a voter and wait until it leads.
    #[command(
        long_about = "Hand leadership of a Raft group to voter ID and wait until it leads. \
                      Without --group: the global group. With --group: a region group, by \
                      id or by region name (see `idemctl cluster status`), e.g. to bring a \
                      group's leader back to its home region.",
        after_help = "Examples:\n  idemctl leader transfer 2\n  idemctl leader transfer 4 \
                      --group eu-west\n  idemctl leader transfer 4 --group 1"
    )]
    Transfer(LeaderTransferArgs),
}

/// `idemctl leader transfer`.
#[derive(Debug, Args)]
pub struct LeaderTransferArgs {
    /// The voter that should lead.
    pub id: u64,
    /// The group: 0 (the global group, the default), a region group's id, or its region's
    /// name.
    #[arg(long, value_name = "GROUP", default_value = "0")]
    pub group: GroupArg,
}

/// A Raft group named on the command line: its id or its region's name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GroupArg {
    /// A group id (0 is the global group).
    Id(u64),
    /// The name of the region whose group is meant.
    Region(String),
}

impl std::str::FromStr for GroupArg {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let text = text.trim();
        if text.is_empty() {
            return Err("expected a group id or a region name".into());
        }
        Ok(match text.parse::<u64>() {
            Ok(id) => GroupArg::Id(id),
            Err(_) => GroupArg::Region(text.to_owned()),
        })
    }
}

/// `idemctl cluster ...`.
#[derive(Debug, Subcommand)]
pub enum ClusterCommand {
    /// Every member's own status, and every Raft group: leader, its region, home or not.
    #[command(
        long_about = "Ask every member (at its api_addr, one attempt each) for its status: \
                      id, region, role (leader, follower, learner), the leader it knows, \
                      term, commit and applied index, lag (the leader's commit index minus \
                      the node's applied index) and whether it answered.\n\nThen one row per \
                      Raft group as one node sees it (Admin.ListGroups): the group id, the \
                      region it was created for and its home region, the leader id and the \
                      leader's region, HOME (yes when the leader is in the home region), term, \
                      commit index and whether the group is in region failover.",
        after_help = "Example:\n  idemctl --endpoints n1:7400 cluster status"
    )]
    Status,

    /// Show the cluster configuration: mode, regions with their groups, tenant homes.
    #[command(
        long_about = "Show the replicated cluster configuration, read linearizably from the \
                      global group: the placement mode (global or region-affinity), every \
                      region with the id of its Raft group, every tenant's home region and \
                      the configuration version.",
        after_help = "Example:\n  idemctl -w json cluster config"
    )]
    Config,

    /// Switch the placement mode: global | region-affinity.
    #[command(
        long_about = "Switch the placement mode. In global mode (the default) one Raft group \
                      spanning all nodes decides every key. In region-affinity mode tenants \
                      bound to a home region (`idemctl tenant bind`) are decided by that \
                      region's group, whose leader is kept in the region; the others by the \
                      global group. Back to global is refused (PLACEMENT_CONFLICT) while \
                      tenants have homes. Setting the current mode is a no-op.",
        after_help = "Examples:\n  idemctl cluster mode region-affinity\n  idemctl cluster \
                      mode global"
    )]
    Mode(ModeArgs),
}

/// `idemctl cluster mode`.
#[derive(Debug, Args)]
pub struct ModeArgs {
    /// The mode.
    #[arg(value_enum)]
    pub mode: ModeArg,
    /// Why (audited with the change).
    #[command(flatten)]
    pub audit: AuditReasonArgs,
}

/// Placement modes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ModeArg {
    /// One group decides every key (the default).
    Global,
    /// Tenants with a home region are decided by that region's group.
    RegionAffinity,
}

/// `idemctl region ...`.
#[derive(Debug, Subcommand)]
pub enum RegionCommand {
    /// Define a region: it gets the next group id and a Raft group homed there.
    #[command(
        long_about = "Define a region (1-64 of A-Z a-z 0-9 . _ -, as in the nodes' `region` \
                      setting). It gets the next group id and a Raft group replicated on \
                      every node, whose leader is kept in that region whenever a healthy, \
                      caught-up voter exists there. Defining an existing region is a no-op; \
                      at most 16 regions (PLACEMENT_CONFLICT).",
        after_help = "Example:\n  idemctl region add eu-west"
    )]
    Add(RegionAddArgs),
}

/// `idemctl region add`.
#[derive(Debug, Args)]
pub struct RegionAddArgs {
    /// The region's name.
    pub name: String,
    /// Why (audited with the change).
    #[command(flatten)]
    pub audit: AuditReasonArgs,
}

/// `idemctl tenant ...`.
#[derive(Debug, Subcommand)]
pub enum TenantCommand {
    /// Make a region the home of a tenant (region-affinity mode).
    #[command(
        long_about = "Make REGION the home of TENANT: its keys are decided by that region's \
                      group from then on, so claims from the region do not cross regions. \
                      Needs region-affinity mode (PLACEMENT_CONFLICT otherwise) and a defined \
                      region (UNKNOWN_REGION). A tenant's home is immutable once it has \
                      records, so that a key is always decided in exactly one log: the change \
                      is then refused with TENANT_HOME_IMMUTABLE and nothing changes. \
                      Repeating a bind is a no-op.",
        after_help = "Example:\n  idemctl tenant bind acme --home eu-west"
    )]
    Bind(TenantBindArgs),

    /// Give a tenant back to the global group.
    #[command(
        long_about = "Give TENANT back to the global group. Refused with \
                      TENANT_HOME_IMMUTABLE once it has records in its region group. \
                      Unbinding an unbound tenant is a no-op.",
        after_help = "Example:\n  idemctl tenant unbind acme"
    )]
    Unbind(TenantArgs),

    /// List tenants with a home region (all others are decided by the global group).
    #[command(after_help = "Example:\n  idemctl tenant list")]
    List,
}

/// `idemctl tenant bind`.
#[derive(Debug, Args)]
pub struct TenantBindArgs {
    /// The tenant.
    pub tenant: String,
    /// Its home region (see `idemctl cluster config`).
    #[arg(long, value_name = "REGION")]
    pub home: String,
    /// Why (audited with the change).
    #[command(flatten)]
    pub audit: AuditReasonArgs,
}

/// A tenant.
#[derive(Debug, Args)]
pub struct TenantArgs {
    /// The tenant.
    pub tenant: String,
    /// Why (audited with the change).
    #[command(flatten)]
    pub audit: AuditReasonArgs,
}

/// `idemctl failover ...`.
#[derive(Debug, Subcommand)]
pub enum FailoverCommand {
    /// Each region group's failover state: active, epoch, since, leader region, duration.
    #[command(
        long_about = "Show each region group's failover state as one node sees it. A group \
                      whose leader is outside its home region is in failover (recorded in its \
                      log with a new epoch): HIGH-risk claims and takeovers of its tenants get \
                      REGION_FAILOVER, LOW and NORMAL risk continue. Columns: group, region, \
                      home, active, epoch, since (replicated time), the leader and its region, \
                      and the time in failover (now minus since, by this machine's clock).",
        after_help = "Example:\n  idemctl failover status"
    )]
    Status,

    /// Declare a new home region for a group in failover, ending the failover (audited).
    #[command(
        long_about = "Declare NEW_HOME the home region of region group GROUP, which must be in \
                      failover (NOT_IN_FAILOVER otherwise), ending the failover with a new \
                      epoch; HIGH-risk claims are accepted again, and the group's leader is \
                      kept in the new home from then on. Use it when the old home region is \
                      lost for good, normally naming the region where the leader now is. \
                      Written to the audit log with --reason and --admin.\n\nCareful: a \
                      worker cut off in the old home may still be running a HIGH-risk \
                      operation, and after the confirmation its expired lease may be taken \
                      over: first check the group's HIGH-risk records in PENDING or \
                      IN_PROGRESS (`idemctl op list --state PENDING,IN_PROGRESS --tenant T`) \
                      against their downstream, by operation id. A retry after an unknown outcome may \
                      answer NOT_IN_FAILOVER when the first attempt did apply: check with \
                      `idemctl failover status`.",
        after_help = "Example:\n  idemctl failover confirm --group eu-west --new-home us-east \
                      --reason 'INC-42: eu-west lost' --admin alice"
    )]
    Confirm(FailoverConfirmArgs),
}

/// `idemctl failover confirm`.
#[derive(Debug, Args)]
pub struct FailoverConfirmArgs {
    /// The region group: its id or its region's name.
    #[arg(long, value_name = "GROUP")]
    pub group: GroupArg,
    /// The region to make its home (normally where its leader now is).
    #[arg(long, value_name = "REGION")]
    pub new_home: String,
    /// Why (stored in the audit entry), e.g. an incident reference.
    #[arg(long)]
    pub reason: String,
    /// Who decides (stored in the audit entry); default $USER.
    #[arg(
        long,
        visible_alias = "operator",
        env = "IDEMCTL_OPERATOR",
        value_name = "NAME"
    )]
    pub admin: Option<String>,
}

/// `idemctl member add`.
#[derive(Debug, Args)]
pub struct MemberAddArgs {
    /// The new node's id (≥ 1, unused in the cluster).
    #[arg(long)]
    pub id: u64,
    /// Its node-to-node Raft address.
    #[arg(long, value_name = "HOST:PORT")]
    pub raft_addr: String,
    /// Its public API address.
    #[arg(long, value_name = "HOST:PORT")]
    pub api_addr: String,
    /// Its region.
    #[arg(long, default_value = "local")]
    pub region: String,
    /// Its availability zone.
    #[arg(long, default_value = "local-a")]
    pub zone: String,
    /// Why (audited with the change).
    #[command(flatten)]
    pub audit: AuditReasonArgs,
}

/// A member id.
#[derive(Debug, Args)]
pub struct MemberIdArgs {
    /// The member's node id.
    pub id: u64,
    /// Why (audited with the change).
    #[command(flatten)]
    pub audit: AuditReasonArgs,
}

/// The reason audited for an admin change (sent as the `idem-audit-reason` metadata).
#[derive(Debug, Default, Args)]
pub struct AuditReasonArgs {
    /// Why: written to the audit log with the change (printable ASCII, at most 1024 bytes).
    #[arg(long, env = "IDEMCTL_REASON", value_name = "TEXT")]
    pub reason: Option<String>,
}

impl Command {
    /// The `--reason` of an admin change audited from the request metadata (membership,
    /// mode, regions, tenant homes, replicated tokens); `None` for every other command.
    pub fn audit_reason(&self) -> Option<&str> {
        let audit = match self {
            Command::Member(MemberCommand::Add(args)) => &args.audit,
            Command::Member(MemberCommand::Promote(args) | MemberCommand::Remove(args)) => {
                &args.audit
            }
            Command::Cluster(ClusterCommand::Mode(args)) => &args.audit,
            Command::Region(RegionCommand::Add(args)) => &args.audit,
            Command::Tenant(TenantCommand::Bind(args)) => &args.audit,
            Command::Tenant(TenantCommand::Unbind(args)) => &args.audit,
            Command::Auth(AuthCommand::Token(TokenCommand::Create(args))) => &args.audit,
            Command::Auth(AuthCommand::Token(TokenCommand::Revoke(args))) => &args.audit,
            _ => return None,
        };
        audit.reason.as_deref()
    }
}

/// `idemctl op ...`.
#[derive(Debug, Subcommand)]
pub enum OpCommand {
    /// Show a record by operation id.
    #[command(after_help = "Example:\n  idemctl op show 0190f1c2-7d3e-7a4b-9c1d-2e3f4a5b6c7d")]
    Show(ShowArgs),

    /// List records by state and age (e.g. stuck PENDING / IN_PROGRESS).
    #[command(
        after_help = "Examples:\n  idemctl op list --state PENDING,IN_PROGRESS --older-than 5m\n  \
                      idemctl op list --state NEEDS_RECONCILIATION --tenant acme --limit 20"
    )]
    List(ListArgs),

    /// Decide a non-terminal record (typically NEEDS_RECONCILIATION); audited.
    #[command(
        long_about = "Decide the outcome of a non-terminal record, typically one in \
                      NEEDS_RECONCILIATION after checking the downstream by operation id. \
                      --expected-version is the version you looked at (VERSION_MISMATCH if \
                      it moved). The current holder is revoked (its fence goes stale).",
        after_help = "Examples:\n  idemctl op reconcile OPID --expected-version 4 --to COMPLETED \
                      --status 201 --resource-id ch_123 --reason 'INC-7: charge exists'\n  \
                      idemctl op reconcile OPID --expected-version 4 --to RETRYABLE_FAILURE \
                      --reason 'INC-8: no charge at the PSP'"
    )]
    Reconcile(ReconcileArgs),
}

/// The scope of a key.
#[derive(Debug, Args)]
pub struct ScopeArgs {
    /// Tenant (calling organisation).
    #[arg(long, env = "IDEMCTL_TENANT")]
    pub tenant: String,
    /// Environment, e.g. prod or test.
    #[arg(long = "env", env = "IDEMCTL_ENV", value_name = "ENV")]
    pub environment: String,
    /// Actor: the end user or account the service acts for.
    #[arg(long, env = "IDEMCTL_ACTOR")]
    pub actor: String,
    /// The operation, "METHOD /route", e.g. "POST /v1/charges".
    #[arg(long, env = "IDEMCTL_ENDPOINT", value_name = "METHOD /ROUTE")]
    pub endpoint: String,
}

/// A scope and a key: one record.
#[derive(Debug, Args)]
pub struct KeyArgs {
    /// The scope.
    #[command(flatten)]
    pub scope: ScopeArgs,
    /// The idempotency key (1-255 bytes of A-Z a-z 0-9 . _ : ~ -).
    #[arg(long)]
    pub key: String,
}

/// A record and the fence of its current owner.
#[derive(Debug, Args)]
pub struct FencedArgs {
    /// The record.
    #[command(flatten)]
    pub target: KeyArgs,
    /// The fence returned by the claim.
    #[arg(long)]
    pub fence: u64,
}

/// `idemctl claim`.
#[derive(Debug, Args)]
pub struct ClaimArgs {
    /// The record.
    #[command(flatten)]
    pub target: KeyArgs,
    /// The request body, JSON (absent: the request has no body, which differs from null).
    #[arg(long, conflicts_with = "body_file")]
    pub body: Option<String>,
    /// Read the JSON body from a file ("-" for stdin).
    #[arg(long, value_name = "PATH")]
    pub body_file: Option<PathBuf>,
    /// A path parameter of the route, NAME=VALUE (repeatable).
    #[arg(long = "path-param", value_name = "NAME=VALUE", value_parser = key_value)]
    pub path_params: Vec<(String, String)>,
    /// A decoded query parameter, NAME=VALUE (repeatable; the order of one name's values
    /// matters).
    #[arg(long = "query", value_name = "NAME=VALUE", value_parser = key_value)]
    pub query: Vec<(String, String)>,
    /// Risk class of a new record (default: the endpoint policy).
    #[arg(long, value_enum, ignore_case = true)]
    pub risk: Option<RiskArg>,
    /// Lease of a new record, e.g. 30s (default: the endpoint policy).
    #[arg(long, value_parser = duration)]
    pub lease: Option<Duration>,
    /// Retention after a terminal state, e.g. 24h (default: the endpoint policy).
    #[arg(long, value_parser = duration)]
    pub retention: Option<Duration>,
    /// Result size limit of a new record, in bytes.
    #[arg(long)]
    pub max_result_bytes: Option<u32>,
    /// Holder identity of this attempt (default: generated). Reuse one only to re-send the
    /// same attempt's claim.
    #[arg(long)]
    pub holder: Option<String>,
    /// Request schema version stored in the fingerprint.
    #[arg(long, default_value_t = 1)]
    pub schema_version: u32,
    /// Send the canonical request for the server to fingerprint, instead of the digest.
    #[arg(long)]
    pub server_hash: bool,
}

/// Risk classes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
#[value(rename_all = "UPPER")]
pub enum RiskArg {
    /// Cheap to repeat.
    Low,
    /// The default.
    Normal,
    /// Money or other irreversible effects.
    High,
}

/// `idemctl call`.
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("stage").required(true).args(["calling", "confirmed"])))]
pub struct CallArgs {
    /// The record and fence.
    #[command(flatten)]
    pub fenced: FencedArgs,
    /// Record CALLING: about to call the downstream.
    #[arg(long)]
    pub calling: bool,
    /// Record REMOTE_CONFIRMED with the downstream's reference.
    #[arg(long, value_name = "REMOTE_REF")]
    pub confirmed: Option<String>,
}

/// `idemctl renew`.
#[derive(Debug, Args)]
pub struct RenewArgs {
    /// The record and fence.
    #[command(flatten)]
    pub fenced: FencedArgs,
    /// New lease from now (default: the record's lease).
    #[arg(long, value_parser = duration)]
    pub lease: Option<Duration>,
}

/// A stored result (complete, reconcile --to COMPLETED).
#[derive(Debug, Args)]
pub struct ResultArgs {
    /// HTTP status code to replay (100-599).
    #[arg(long)]
    pub status: Option<u16>,
    /// Id of the created or changed resource.
    #[arg(long, default_value = "")]
    pub resource_id: String,
    /// Version of that resource.
    #[arg(long, default_value = "")]
    pub resource_version: String,
    /// A stable response field to replay, NAME=VALUE (repeatable).
    #[arg(long = "field", value_name = "NAME=VALUE", value_parser = key_value)]
    pub fields: Vec<(String, String)>,
}

/// An error summary (fail, reconcile to a failure).
#[derive(Debug, Args)]
pub struct ErrorArgs {
    /// Human-readable error message (no personal data).
    #[arg(long, value_name = "TEXT")]
    pub error: Option<String>,
    /// Stable machine-readable error code, e.g. card_declined (default: error).
    #[arg(long)]
    pub code: Option<String>,
}

/// `idemctl complete`.
#[derive(Debug, Args)]
pub struct CompleteArgs {
    /// The record and fence.
    #[command(flatten)]
    pub fenced: FencedArgs,
    /// The result.
    #[command(flatten)]
    pub result: ResultArgs,
}

/// `idemctl fail`.
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("kind").required(true).args(["terminal", "retryable"])))]
pub struct FailArgs {
    /// The record and fence.
    #[command(flatten)]
    pub fenced: FencedArgs,
    /// TERMINAL_FAILURE: the error is replayed to later claims.
    #[arg(long)]
    pub terminal: bool,
    /// RETRYABLE_FAILURE: the next claim takes over.
    #[arg(long)]
    pub retryable: bool,
    /// The error.
    #[command(flatten)]
    pub error: ErrorArgs,
}

/// `idemctl wait`.
#[derive(Debug, Args)]
pub struct WaitArgs {
    /// The record.
    #[command(flatten)]
    pub target: KeyArgs,
    /// Wait budget, at most 30s.
    #[arg(long, value_parser = duration, default_value = "30s")]
    pub timeout: Duration,
}

/// `idemctl op show`.
#[derive(Debug, Args)]
pub struct ShowArgs {
    /// The operation id (UUID).
    pub operation_id: String,
}

/// `idemctl op list`.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// Only these states (repeatable or comma-separated).
    #[arg(long = "state", value_enum, value_delimiter = ',', ignore_case = true)]
    pub states: Vec<StateArg>,
    /// Only records unchanged for at least this long, e.g. 5m.
    #[arg(long, value_parser = duration)]
    pub older_than: Option<Duration>,
    /// Only this tenant's records.
    #[arg(long)]
    pub tenant: Option<String>,
    /// Page size (server default 100, at most 1000).
    #[arg(long)]
    pub limit: Option<u32>,
    /// The next_page_token of the previous page.
    #[arg(long)]
    pub page_token: Option<String>,
    /// Only stuck records: PENDING or IN_PROGRESS, unchanged for longer than their
    /// endpoint's stuck_after (15m unless configured), or than --older-than when given.
    #[arg(long)]
    pub stuck: bool,
}

/// Record states.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
#[value(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum StateArg {
    /// Claimed, not started.
    Pending,
    /// Being worked on.
    InProgress,
    /// Finished; result replayed.
    Completed,
    /// Failed retryably; next claim takes over.
    RetryableFailure,
    /// Failed for good; error replayed.
    TerminalFailure,
    /// Cancelled.
    Cancelled,
    /// Outcome unknown, operator decides.
    NeedsReconciliation,
}

/// States a reconcile may move to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
#[value(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ReconcileTo {
    /// COMPLETED with --status/--resource-id/--field.
    Completed,
    /// RETRYABLE_FAILURE (optionally --error/--code).
    RetryableFailure,
    /// TERMINAL_FAILURE with --error/--code.
    TerminalFailure,
    /// CANCELLED: nothing irreversible happened (the downstream has no trace of it). Only
    /// from NEEDS_RECONCILIATION or stage CALLING; no result or error.
    Cancelled,
}

/// `idemctl op reconcile`.
#[derive(Debug, Args)]
pub struct ReconcileArgs {
    /// The operation id (UUID).
    pub operation_id: String,
    /// The record version the decision is based on.
    #[arg(long)]
    pub expected_version: u64,
    /// The state to move to.
    #[arg(long, value_enum, ignore_case = true)]
    pub to: ReconcileTo,
    /// Why (stored in the audit entry), e.g. a ticket reference.
    #[arg(long)]
    pub reason: String,
    /// Who decides (stored in the audit entry); default $USER.
    #[arg(long, env = "IDEMCTL_OPERATOR")]
    pub operator: Option<String>,
    /// The result, for --to COMPLETED.
    #[command(flatten)]
    pub result: ResultArgs,
    /// The error, for the failure targets.
    #[command(flatten)]
    pub error: ErrorArgs,
}

/// `idemctl purge`.
#[derive(Debug, Args)]
pub struct PurgeArgs {
    /// The subject's tenant.
    #[arg(long)]
    pub tenant: String,
    /// The subject.
    #[arg(long)]
    pub actor: String,
    /// Why (stored in the audit entry).
    #[arg(long)]
    pub reason: String,
    /// Who asks (stored in the audit entry); default $USER.
    #[arg(long, env = "IDEMCTL_OPERATOR")]
    pub operator: Option<String>,
}

#[cfg(test)]
mod tests {
    use clap::error::ErrorKind;
    use clap::CommandFactory;

    use super::*;

    const SCOPE: [&str; 8] = [
        "--tenant",
        "acme",
        "--env",
        "prod",
        "--actor",
        "user-42",
        "--endpoint",
        "POST /v1/charges",
    ];

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        let mut all = vec!["idemctl"];
        all.extend_from_slice(args);
        Cli::try_parse_from(all)
    }

    /// Parses `args` followed by the scope flags.
    fn parse_scoped(args: &[&str]) -> Result<Cli, clap::Error> {
        let mut all = args.to_vec();
        all.extend_from_slice(&SCOPE);
        parse(&all)
    }

    #[test]
    fn definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn claim_parses_every_flag() {
        let cli = parse_scoped(&[
            "-w",
            "json",
            "--endpoints",
            "n1:7400,n2:7400",
            "claim",
            "--key",
            "k1",
            "--body",
            r#"{"a":1}"#,
            "--risk",
            "high",
            "--lease",
            "1m 30s",
            "--retention",
            "24h",
            "--holder",
            "me-1",
            "--path-param",
            "id=7",
            "--query",
            "tag=b",
            "--query",
            "tag=a=x",
        ])
        .unwrap();
        assert_eq!(cli.write_out, Format::Json);
        assert_eq!(cli.endpoints, ["n1:7400", "n2:7400"]);
        let Command::Claim(claim) = cli.command else {
            panic!("not a claim")
        };
        assert_eq!(claim.target.key, "k1");
        assert_eq!(claim.target.scope.endpoint, "POST /v1/charges");
        assert_eq!(claim.target.scope.environment, "prod");
        assert_eq!(claim.risk, Some(RiskArg::High));
        assert_eq!(claim.lease, Some(Duration::from_secs(90)));
        assert_eq!(claim.retention, Some(Duration::from_secs(86_400)));
        assert_eq!(claim.holder.as_deref(), Some("me-1"));
        assert_eq!(claim.path_params, [("id".to_owned(), "7".to_owned())]);
        assert_eq!(
            claim.query,
            [
                ("tag".to_owned(), "b".to_owned()),
                ("tag".to_owned(), "a=x".to_owned())
            ]
        );
        assert_eq!(claim.schema_version, 1);
        assert!(!claim.server_hash);
    }

    #[test]
    fn defaults() {
        let cli = parse_scoped(&["get", "--key", "k"]).unwrap();
        assert_eq!(cli.write_out, Format::Table);
        assert_eq!(cli.request_timeout, Duration::from_secs(10));
        assert_eq!(cli.max_attempts, 8);
        assert!(matches!(cli.command, Command::Get(_)));
        let cli = parse_scoped(&["wait", "--key", "k"]).unwrap();
        let Command::Wait(wait) = cli.command else {
            panic!()
        };
        assert_eq!(wait.timeout, Duration::from_secs(30));
    }

    #[test]
    fn worker_commands_need_a_fence_and_their_flags() {
        let err = parse_scoped(&["start", "--key", "k"]).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::MissingRequiredArgument);

        let cli = parse_scoped(&[
            "complete",
            "--key",
            "k",
            "--fence",
            "3",
            "--status",
            "201",
            "--resource-id",
            "ch_1",
            "--field",
            "amount=100",
        ])
        .unwrap();
        let Command::Complete(c) = cli.command else {
            panic!()
        };
        assert_eq!(c.fenced.fence, 3);
        assert_eq!(c.result.status, Some(201));
        assert_eq!(c.result.fields, [("amount".to_owned(), "100".to_owned())]);
        let err = parse_scoped(&["complete", "--key", "k", "--fence", "3"]).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::MissingRequiredArgument);

        let fail = |extra: &[&str]| {
            let mut args = vec!["fail", "--key", "k", "--fence", "1", "--error", "boom"];
            args.extend_from_slice(extra);
            parse_scoped(&args)
        };
        assert!(fail(&["--terminal"]).is_ok());
        assert!(fail(&["--retryable", "--code", "upstream_503"]).is_ok());
        assert_eq!(
            fail(&[]).unwrap_err().kind(),
            ErrorKind::MissingRequiredArgument
        );
        assert_eq!(
            fail(&["--terminal", "--retryable"]).unwrap_err().kind(),
            ErrorKind::ArgumentConflict
        );

        let call = |extra: &[&str]| {
            let mut args = vec!["call", "--key", "k", "--fence", "1"];
            args.extend_from_slice(extra);
            parse_scoped(&args)
        };
        assert!(call(&["--calling"]).is_ok());
        let cli = call(&["--confirmed", "ch_1"]).unwrap();
        let Command::Call(c) = cli.command else {
            panic!()
        };
        assert_eq!(c.confirmed.as_deref(), Some("ch_1"));
        assert!(call(&[]).is_err());
        assert!(call(&["--calling", "--confirmed", "x"]).is_err());

        let cli = parse_scoped(&["renew", "--key", "k", "--fence", "1", "--lease", "45s"]).unwrap();
        let Command::Renew(r) = cli.command else {
            panic!()
        };
        assert_eq!(r.lease, Some(Duration::from_secs(45)));
    }

    #[test]
    fn op_commands() {
        let cli = parse(&[
            "op",
            "list",
            "--state",
            "PENDING,in_progress",
            "--state",
            "NEEDS_RECONCILIATION",
            "--older-than",
            "5m",
            "--limit",
            "20",
            "--tenant",
            "acme",
        ])
        .unwrap();
        let Command::Op(OpCommand::List(list)) = cli.command else {
            panic!()
        };
        assert_eq!(
            list.states,
            [
                StateArg::Pending,
                StateArg::InProgress,
                StateArg::NeedsReconciliation
            ]
        );
        assert_eq!(list.older_than, Some(Duration::from_secs(300)));
        assert_eq!(list.limit, Some(20));

        let cli = parse(&[
            "op",
            "reconcile",
            "0190f1c2-7d3e-7a4b-9c1d-2e3f4a5b6c7d",
            "--expected-version",
            "4",
            "--to",
            "COMPLETED",
            "--reason",
            "INC-7",
            "--status",
            "201",
            "--resource-id",
            "ch_1",
        ])
        .unwrap();
        let Command::Op(OpCommand::Reconcile(r)) = cli.command else {
            panic!()
        };
        assert_eq!(r.to, ReconcileTo::Completed);
        assert_eq!(r.expected_version, 4);
        assert_eq!(r.result.status, Some(201));
        assert!(parse(&["op", "reconcile", "x", "--to", "PENDING", "--reason", "r"]).is_err());
        let cancel = parse(&[
            "op",
            "reconcile",
            "x",
            "--expected-version",
            "2",
            "--to",
            "cancelled",
            "--reason",
            "r",
        ]);
        let Command::Op(OpCommand::Reconcile(r)) = cancel.unwrap().command else {
            panic!()
        };
        assert_eq!(r.to, ReconcileTo::Cancelled);

        let cli = parse(&["op", "show", "0190f1c2-7d3e-7a4b-9c1d-2e3f4a5b6c7d"]).unwrap();
        assert!(matches!(cli.command, Command::Op(OpCommand::Show(_))));
        assert!(parse(&["purge", "--tenant", "acme", "--actor", "u"]).is_err());
        assert!(parse(&["purge", "--tenant", "acme", "--actor", "u", "--reason", "r"]).is_ok());
        assert!(matches!(
            parse(&["status"]).unwrap().command,
            Command::Status
        ));
    }

    #[test]
    fn region_commands() {
        let cli = parse(&["cluster", "config"]).unwrap();
        assert!(matches!(
            cli.command,
            Command::Cluster(ClusterCommand::Config)
        ));
        let cli = parse(&["cluster", "mode", "region-affinity"]).unwrap();
        let Command::Cluster(ClusterCommand::Mode(m)) = cli.command else {
            panic!()
        };
        assert_eq!(m.mode, ModeArg::RegionAffinity);
        let cli = parse(&["cluster", "mode", "global"]).unwrap();
        let Command::Cluster(ClusterCommand::Mode(m)) = cli.command else {
            panic!()
        };
        assert_eq!(m.mode, ModeArg::Global);
        assert_eq!(
            parse(&["cluster", "mode", "sideways"]).unwrap_err().kind(),
            ErrorKind::InvalidValue
        );
        assert!(parse(&["cluster", "mode"]).is_err());

        let cli = parse(&["region", "add", "eu-west"]).unwrap();
        let Command::Region(RegionCommand::Add(r)) = cli.command else {
            panic!()
        };
        assert_eq!(r.name, "eu-west");

        let cli = parse(&["tenant", "bind", "acme", "--home", "eu-west"]).unwrap();
        let Command::Tenant(TenantCommand::Bind(b)) = cli.command else {
            panic!()
        };
        assert_eq!((b.tenant.as_str(), b.home.as_str()), ("acme", "eu-west"));
        assert_eq!(
            parse(&["tenant", "bind", "acme"]).unwrap_err().kind(),
            ErrorKind::MissingRequiredArgument
        );
        let cli = parse(&["tenant", "unbind", "acme"]).unwrap();
        assert!(matches!(
            cli.command,
            Command::Tenant(TenantCommand::Unbind(_))
        ));
        let cli = parse(&["tenant", "list"]).unwrap();
        assert!(matches!(cli.command, Command::Tenant(TenantCommand::List)));

        let cli = parse(&["failover", "status"]).unwrap();
        assert!(matches!(
            cli.command,
            Command::Failover(FailoverCommand::Status)
        ));
        let cli = parse(&[
            "failover",
            "confirm",
            "--group",
            "eu-west",
            "--new-home",
            "us-east",
            "--reason",
            "INC-42",
            "--admin",
            "alice",
        ])
        .unwrap();
        let Command::Failover(FailoverCommand::Confirm(c)) = cli.command else {
            panic!()
        };
        assert_eq!(c.group, GroupArg::Region("eu-west".into()));
        assert_eq!(c.new_home, "us-east");
        assert_eq!(c.admin.as_deref(), Some("alice"));
        let cli = parse(&[
            "failover",
            "confirm",
            "--group",
            "2",
            "--new-home",
            "r",
            "--reason",
            "x",
            "--operator",
            "bob",
        ])
        .unwrap();
        let Command::Failover(FailoverCommand::Confirm(c)) = cli.command else {
            panic!()
        };
        assert_eq!(
            (c.group, c.admin.as_deref()),
            (GroupArg::Id(2), Some("bob"))
        );
        let missing = parse(&["failover", "confirm", "--group", "1", "--new-home", "r"]);
        assert_eq!(
            missing.unwrap_err().kind(),
            ErrorKind::MissingRequiredArgument
        );
    }

    #[test]
    fn leader_transfer_takes_a_group() {
        let cli = parse(&["leader", "transfer", "2"]).unwrap();
        let Command::Leader(LeaderCommand::Transfer(t)) = cli.command else {
            panic!()
        };
        assert_eq!((t.id, t.group), (2, GroupArg::Id(0)));
        let cli = parse(&["leader", "transfer", "4", "--group", "1"]).unwrap();
        let Command::Leader(LeaderCommand::Transfer(t)) = cli.command else {
            panic!()
        };
        assert_eq!(t.group, GroupArg::Id(1));
        let cli = parse(&["leader", "transfer", "4", "--group", "us-east"]).unwrap();
        let Command::Leader(LeaderCommand::Transfer(t)) = cli.command else {
            panic!()
        };
        assert_eq!(t.group, GroupArg::Region("us-east".into()));
        assert!(parse(&["leader", "transfer", "4", "--group", ""]).is_err());
    }

    #[test]
    fn bad_values_are_usage_errors() {
        let err = parse_scoped(&["claim", "--key", "k", "--lease", "soon"]).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::ValueValidation);
        let err = parse_scoped(&["claim", "--key", "k", "--query", "novalue"]).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::ValueValidation);
        let err = parse(&["-w", "yaml", "status"]).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidValue);
        let err =
            parse_scoped(&["claim", "--key", "k", "--body", "{}", "--body-file", "x"]).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::ArgumentConflict);
    }

    #[test]
    fn help_is_available_at_every_level() {
        for args in [
            &["--help"][..],
            &["claim", "--help"],
            &["op", "--help"],
            &["op", "reconcile", "--help"],
            &["fail", "--help"],
            &["cluster", "mode", "--help"],
            &["tenant", "bind", "--help"],
            &["failover", "confirm", "--help"],
            &["region", "--help"],
        ] {
            let err = parse(args).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::DisplayHelp, "{args:?}");
        }
        let help = Cli::command().render_long_help().to_string();
        assert!(help.contains("Exit codes"));
        assert!(help.contains("IDEMCTL_ENDPOINTS"));
    }
}
