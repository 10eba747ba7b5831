//! Raft timing and log retention, and the openraft [`Config`] built from them.
//!
//! Why presets instead of raw openraft knobs: the values are coupled, partly through
//! openraft internals that are easy to miss.
//!
//! - openraft uses the **heartbeat interval as the deadline of each heartbeat RPC** and of
//!   each response of the replication stream (it passes `RPCOption::new(heartbeat_interval)`
//!   and the transport honours 3/4 of it). A heartbeat interval at or below the round-trip
//!   time therefore fails every heartbeat. Hence `heartbeat >= 2 x RTT`.
//! - A follower campaigns after `election_timeout` without a heartbeat, and the leader's
//!   lease (during which followers refuse to vote for anyone else) is
//!   `election_timeout_max`. The election timeout must cover several lost heartbeats plus
//!   the round trips of an election: at least 10 x RTT (the usual etcd guidance), and at
//!   least 5 heartbeats.
//! - The election timeout also bounds failover time: after a leader dies, a new one is
//!   elected roughly `election_timeout_max` (lease) plus one election later.
//!
//! [`RaftTimeouts::lan`] holds the LAN defaults (heartbeat 100 ms, election 1–2 s, as
//! etcd); [`RaftTimeouts::for_rtt`] derives settings for a group whose members are a given
//! round trip apart (cross-region), never below the LAN values. `docs/cluster.md` has the
//! table for 20, 60 and 150 ms.

use std::time::Duration;

use openraft::{Config, ConfigError, SnapshotPolicy};

/// The timing of a Raft group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RaftTimeouts {
    /// How often the leader sends heartbeats; also openraft's deadline for each heartbeat
    /// and each replication response (3/4 of it is enforced by the transport).
    pub heartbeat_interval: Duration,
    /// Lower bound of the randomised election timeout.
    pub election_timeout_min: Duration,
    /// Upper bound of the randomised election timeout; also the leader lease.
    pub election_timeout_max: Duration,
    /// Deadline for each step of a snapshot transfer (sending a chunk, then installing the
    /// whole snapshot on the receiver).
    pub install_snapshot_timeout: Duration,
    /// Run a Pre-Vote round before a real election, so that a node that cannot win (a
    /// rejoining, partitioned node, a node with a stale log) does not bump the term and
    /// depose a healthy leader.
    pub pre_vote: bool,
}

/// When to snapshot and how much log to keep.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogPolicy {
    /// Ask for a snapshot after this many log entries since the last one
    /// (openraft `SnapshotPolicy::LogsSinceLast`). A floor: idem's state machine builds it
    /// only once the entries since the last snapshot also reach half the number of records,
    /// so that the cost of snapshots per entry stays O(1) as the state grows (see
    /// `idem-store`'s `snapshot_policy` module and `docs/operations.md`).
    pub snapshot_logs_since_last: u64,
    /// Log entries already covered by a snapshot to keep anyway, so that a follower that is
    /// only a little behind catches up from the log instead of a full snapshot.
    pub max_in_snapshot_log_to_keep: u64,
    /// Purge the log only when at least this many entries can go (fewer, larger deletes).
    pub purge_batch_size: u64,
    /// Most entries in one AppendEntries request.
    pub max_payload_entries: u64,
}

impl Default for LogPolicy {
    fn default() -> Self {
        LogPolicy {
            snapshot_logs_since_last: 100_000,
            max_in_snapshot_log_to_keep: 10_000,
            purge_batch_size: 256,
            max_payload_entries: 300,
        }
    }
}

impl Default for RaftTimeouts {
    fn default() -> Self {
        Self::lan()
    }
}

impl RaftTimeouts {
    /// LAN defaults (members < 2 ms apart): heartbeat 100 ms, election timeout 1–2 s,
    /// snapshot steps 10 s, Pre-Vote on.
    pub fn lan() -> Self {
        RaftTimeouts {
            heartbeat_interval: Duration::from_millis(100),
            election_timeout_min: Duration::from_millis(1_000),
            election_timeout_max: Duration::from_millis(2_000),
            install_snapshot_timeout: Duration::from_secs(10),
            pre_vote: true,
        }
    }

    /// Settings for a group whose members are `rtt` apart (the largest round trip between
    /// two voters): heartbeat `max(100 ms, 2 x rtt)`, election timeout
    /// `max(1 s, 10 x rtt)` to twice that, snapshot steps `max(10 s, 50 x rtt)`.
    ///
    /// Never below [`RaftTimeouts::lan`]: a short round trip does not make shorter
    /// timeouts safe (GC pauses, fsync stalls, busy hosts).
    pub fn for_rtt(rtt: Duration) -> Self {
        let lan = Self::lan();
        let election_timeout_min = lan.election_timeout_min.max(rtt * 10);
        RaftTimeouts {
            heartbeat_interval: lan.heartbeat_interval.max(rtt * 2),
            election_timeout_min,
            election_timeout_max: election_timeout_min * 2,
            install_snapshot_timeout: lan.install_snapshot_timeout.max(rtt * 50),
            pre_vote: lan.pre_vote,
        }
    }

    /// The openraft config of a group named `cluster_name` with these timeouts and the
    /// default [`LogPolicy`], validated.
    pub fn config(&self, cluster_name: &str) -> Result<Config, ConfigError> {
        self.config_with(cluster_name, &LogPolicy::default())
    }

    /// The openraft config of a group named `cluster_name` with these timeouts and `log`,
    /// validated (e.g. the election timeout must exceed the heartbeat interval).
    ///
    /// A restarted leader never resumes its term (openraft's `enable_leader_restore`, on by
    /// default, is turned off): it stands for election like any other node. A leader
    /// counts an entry committed once a quorum of *followers* has it on disk, before its own
    /// copy is synced; a power loss can then take the tail of the leader's log and leave the
    /// followers' copies. A leader that came back in the same term would write new entries
    /// at those indexes with the same term, which the followers take for the ones they
    /// already have: the replicas diverge and an acknowledged write disappears (the jepsen
    /// `power-loss` nemesis found this). An election instead picks a node holding every
    /// committed entry, in a new term. Restoring also trusts the restarted leader's state
    /// and committed index, which idem does not sync (docs/guarantees.md).
    pub fn config_with(&self, cluster_name: &str, log: &LogPolicy) -> Result<Config, ConfigError> {
        Config {
            cluster_name: cluster_name.to_owned(),
            heartbeat_interval: millis(self.heartbeat_interval),
            election_timeout_min: millis(self.election_timeout_min),
            election_timeout_max: millis(self.election_timeout_max),
            install_snapshot_timeout: millis(self.install_snapshot_timeout),
            enable_pre_vote: Some(self.pre_vote),
            snapshot_policy: SnapshotPolicy::LogsSinceLast(log.snapshot_logs_since_last),
            max_in_snapshot_log_to_keep: log.max_in_snapshot_log_to_keep,
            purge_batch_size: log.purge_batch_size,
            max_payload_entries: log.max_payload_entries,
            enable_leader_restore: Some(false),
            ..Config::default()
        }
        .validate()
    }
}

/// Whole milliseconds, at least 1 (openraft's unit).
fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lan_defaults_build_a_valid_config() {
        let config = RaftTimeouts::lan().config("idem").unwrap();
        assert_eq!(config.cluster_name, "idem");
        assert_eq!(config.heartbeat_interval, 100);
        assert_eq!(
            (config.election_timeout_min, config.election_timeout_max),
            (1_000, 2_000)
        );
        assert_eq!(
            config.snapshot_policy,
            SnapshotPolicy::LogsSinceLast(100_000)
        );
        assert_eq!(config.enable_pre_vote, Some(true));
        assert_eq!(RaftTimeouts::default(), RaftTimeouts::lan());
    }

    #[test]
    fn rtt_presets_follow_the_documented_table() {
        let table = [
            // rtt, heartbeat, election min, election max
            (20, 100, 1_000, 2_000),
            (60, 120, 1_000, 2_000),
            (150, 300, 1_500, 3_000),
            (300, 600, 3_000, 6_000),
        ];
        for (rtt, heartbeat, min, max) in table {
            let t = RaftTimeouts::for_rtt(Duration::from_millis(rtt));
            assert_eq!(
                t.heartbeat_interval,
                Duration::from_millis(heartbeat),
                "{rtt}"
            );
            assert_eq!(t.election_timeout_min, Duration::from_millis(min), "{rtt}");
            assert_eq!(t.election_timeout_max, Duration::from_millis(max), "{rtt}");
            assert!(t.election_timeout_min >= t.heartbeat_interval * 5);
            let config = t.config("idem").unwrap();
            assert_eq!(config.heartbeat_interval, heartbeat);
        }
        assert_eq!(
            RaftTimeouts::for_rtt(Duration::from_millis(300)).install_snapshot_timeout,
            Duration::from_secs(15)
        );
    }

    #[test]
    fn inconsistent_timeouts_are_rejected() {
        let t = RaftTimeouts {
            heartbeat_interval: Duration::from_secs(2),
            ..RaftTimeouts::lan()
        };
        assert!(t.config("idem").is_err());
        let t = RaftTimeouts {
            election_timeout_max: Duration::from_millis(500),
            ..RaftTimeouts::lan()
        };
        assert!(t.config("idem").is_err());
    }

    #[test]
    fn log_policy_reaches_the_config() {
        let log = LogPolicy {
            snapshot_logs_since_last: 50,
            max_in_snapshot_log_to_keep: 0,
            purge_batch_size: 1,
            max_payload_entries: 10,
        };
        let config = RaftTimeouts::lan().config_with("t", &log).unwrap();
        assert_eq!(config.snapshot_policy, SnapshotPolicy::LogsSinceLast(50));
        assert_eq!(config.max_in_snapshot_log_to_keep, 0);
        assert_eq!(config.purge_batch_size, 1);
        assert_eq!(config.max_payload_entries, 10);
    }
}
