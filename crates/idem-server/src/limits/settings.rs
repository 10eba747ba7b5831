//! The operator's limits (`[limits]` in the configuration file), as the node runs them.
//!
//! Every limit is on by default, with values generous enough that the benchmark and the
//! fault-injection workloads never meet them (docs/limits.md lists them), except the cap on
//! non-terminal records, which costs a scan and is off until an operator sets it. Zero
//! means "no limit" for every per-tenant value.

use std::collections::BTreeMap;
use std::time::Duration;

/// The default `disk_reserve`: room for a full set of memtables to flush (128 MiB), the
/// write-ahead logs RocksDB keeps before it forces one (256 MiB), and the compaction that
/// follows, with some margin. A snapshot larger than what is left needs a larger reserve.
pub const DEFAULT_DISK_RESERVE: u64 = 512 << 20;

/// A token-bucket rate: `rate` tokens per second, at most `burst` saved up.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Rate {
    /// Tokens per second; 0 = unlimited.
    pub rate: u64,
    /// Largest burst, in tokens; 0 = one second's worth (`rate`).
    pub burst: u64,
}

impl Rate {
    /// True when this rate limits anything.
    pub fn is_limited(self) -> bool {
        self.rate > 0
    }

    /// The burst actually used: `burst`, or one second's worth when unset.
    pub fn effective_burst(self) -> u64 {
        if self.burst == 0 {
            self.rate
        } else {
            self.burst
        }
    }
}

/// One tenant's overrides (`[limits.tenants.<name>]`); unset fields use the defaults.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TenantOverride {
    /// Claims.
    pub claims: Option<Rate>,
    /// Owner mutations (Start, RecordExternalCall, Renew, Complete, Fail, Release, Cancel).
    pub mutations: Option<Rate>,
    /// Cap on the tenant's non-terminal records; 0 = unlimited.
    pub max_active_records: Option<u64>,
}

/// Every limit of a node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LimitsConfig {
    /// Default claim rate of every tenant.
    pub claims: Rate,
    /// Default owner-mutation rate of every tenant.
    pub mutations: Rate,
    /// What a claim answered from a terminal record (a replay) costs, in thousandths of a
    /// token (a full claim costs 1000).
    pub replay_cost_milli: u64,
    /// Default cap on a tenant's non-terminal records; 0 = unlimited.
    pub max_active_records: u64,
    /// Per-tenant overrides by tenant name.
    pub tenants: BTreeMap<String, TenantOverride>,
    /// Requests served at once on the API port; beyond it `OVERLOADED` (0 = unlimited).
    pub max_in_flight: usize,
    /// HTTP/2 `SETTINGS_MAX_CONCURRENT_STREAMS` on both ports, per connection.
    pub max_concurrent_streams: u32,
    /// HTTP/2 keepalive ping interval on both ports.
    pub keepalive_interval: Duration,
    /// How long a keepalive ping may go unanswered before the connection is closed.
    pub keepalive_timeout: Duration,
    /// Largest snapshot a peer may announce on the Raft port, in bytes.
    pub max_snapshot_bytes: u64,
    /// Longest a backup stream waits for its reader to take one message before it gives
    /// up (and releases the snapshot it pins).
    pub backup_idle_timeout: Duration,
    /// Longest a whole backup may stream.
    pub backup_max_duration: Duration,
    /// Bytes that must stay free on the data directory's filesystem; below it, writes are
    /// refused (`DISK_FULL`, see [`DiskGuard`](super::DiskGuard)). 0 = no guard.
    pub disk_reserve: u64,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        LimitsConfig {
            claims: Rate {
                rate: 50_000,
                burst: 100_000,
            },
            mutations: Rate {
                rate: 100_000,
                burst: 200_000,
            },
            replay_cost_milli: 100,
            max_active_records: 0,
            tenants: BTreeMap::new(),
            max_in_flight: 4096,
            max_concurrent_streams: 1024,
            keepalive_interval: Duration::from_secs(10),
            keepalive_timeout: Duration::from_secs(10),
            max_snapshot_bytes: 4 << 30,
            backup_idle_timeout: Duration::from_secs(60),
            backup_max_duration: Duration::from_secs(3600),
            disk_reserve: DEFAULT_DISK_RESERVE,
        }
    }
}

impl LimitsConfig {
    /// The claim rate of `tenant`.
    pub fn claims_of(&self, tenant: &str) -> Rate {
        self.tenants
            .get(tenant)
            .and_then(|t| t.claims)
            .unwrap_or(self.claims)
    }

    /// The owner-mutation rate of `tenant`.
    pub fn mutations_of(&self, tenant: &str) -> Rate {
        self.tenants
            .get(tenant)
            .and_then(|t| t.mutations)
            .unwrap_or(self.mutations)
    }

    /// The cap on `tenant`'s non-terminal records (0 = unlimited).
    pub fn max_active_of(&self, tenant: &str) -> u64 {
        self.tenants
            .get(tenant)
            .and_then(|t| t.max_active_records)
            .unwrap_or(self.max_active_records)
    }
}
