//! The payload encoding of `idem.raft.v1`: openraft's own serde types, in bincode 1.
//!
//! Why openraft's types as opaque bytes instead of a protobuf mirror of each: they change
//! between the 0.10 alphas (the exact version is pinned), a hand-written mirror would be
//! a second copy to keep in sync, and a subtle mismatch in it (say, a dropped field of a
//! vote) is a safety bug, not a decoding error. bincode is what `idem-store` already uses
//! for the same types on disk, it is compact and positional, and openraft's serde forms
//! round-trip through it (the tests check every message type). The `format` field names
//! the encoding so that a future change (a new openraft pin whose serde layout moved, a
//! new field in idem's `Request`) gets a new [`Format`] value and a mixed cluster refuses
//! the other format loudly instead of misreading it.
//!
//! Two versions travel with every request, because they change for different reasons:
//!
//! * `format` ([`FORMAT`]) is the encoding of the openraft messages themselves. Any change
//!   of it is a new [`Format`] value; a receiver refuses a format it does not speak.
//! * `entry_version` is the layout of idem's commands inside log entries (idem-store's
//!   `Request`, idem-core's `Command`): a new command variant, or a new field in one, is a
//!   new entry version. A receiver refuses entries newer than [`ENTRY_VERSION_READ`], so an
//!   old node never applies a command it would misread. A release that introduces entry
//!   version N first ships reading it while still writing N-1 ([`ENTRY_VERSION_WRITTEN`]),
//!   and only a later release (or a cluster-wide switch, once every member reads N) writes
//!   it: that is what keeps a rolling upgrade mixed-version safe. Requests of releases
//!   before versions were sent carry 0, which means 1. A message carries the newest version
//!   among its entries ([`entries_version`]): version 2 added `Command::Abandon`, which
//!   the leader proposes only for endpoints that opt in to `abandon_after`, and
//!   `Command::Tokens`, proposed only when an admin creates or revokes a replicated token,
//!   and `ReconcileTarget::Cancelled`, proposed only when an operator or the reconciler
//!   cancels a record, so every other message stays readable by version-1 nodes. Version
//!   3 added `Command::MembershipIntent`, proposed only before an admin's membership
//!   change, so that a version-2 node refuses the change (it would apply the membership
//!   entry without its audit entry) instead of diverging.
//!
//! A refusal answers `FAILED_PRECONDITION` naming both versions, and is logged (at most
//! once per [`REFUSAL_LOG_INTERVAL`]: a refused leader retries every heartbeat).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use idem_core::command::ReconcileTarget;
use idem_core::Command;
use idem_proto::raft_v1::Format;
use idem_store::Entry;
use openraft::EntryPayload;
use prost::bytes::Bytes;
use serde::de::DeserializeOwned;
use serde::Serialize;

/// The format this version sends and accepts.
pub(crate) const FORMAT: Format = Format::BincodeV1;

/// The log-entry version of the commands this release writes by default: a message whose
/// entries all have this layout says so (`entry_version`).
pub const ENTRY_VERSION_WRITTEN: u32 = 1;
/// The log-entry version that added `Command::Abandon`, which the leader proposes only for
/// endpoints that opt in to `abandon_after`, `Command::Tokens`, proposed only by
/// `Admin.CreateToken`/`RevokeToken`, and a `Reconcile` to CANCELLED (docs/operations.md,
/// "Upgrades").
pub const ENTRY_VERSION_ABANDON: u32 = 2;
/// The log-entry version that added `Command::MembershipIntent`, proposed only by
/// `Admin.AddMember`/`PromoteMember`/`RemoveMember` (docs/operations.md, "Upgrades").
pub const ENTRY_VERSION_MEMBERSHIP_INTENT: u32 = 3;
/// The newest log-entry version this release understands.
pub const ENTRY_VERSION_READ: u32 = ENTRY_VERSION_MEMBERSHIP_INTENT;

// A release always reads what it writes.
const _: () = assert!(ENTRY_VERSION_WRITTEN <= ENTRY_VERSION_READ);

/// How often a refusal of a peer's newer version is logged, at most.
pub(crate) const REFUSAL_LOG_INTERVAL: Duration = Duration::from_secs(10);

/// A payload that could not be encoded or decoded.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CodecError {
    /// The peer used a format this version does not speak.
    #[error("unsupported raft payload format {0} (this node speaks {FORMAT:?}): the peer runs a release this one cannot talk to; see the rolling upgrade procedure")]
    UnsupportedFormat(i32),
    /// The peer sent log entries of a version newer than this node reads.
    #[error("log entries of version {found}, newer than this node reads ({ENTRY_VERSION_READ}): the peer runs a newer release; upgrade this node before the cluster writes them")]
    NewerEntries {
        /// The version the peer sent.
        found: u32,
    },
    /// bincode failed.
    #[error("{what}: {source}")]
    Bincode {
        /// Which value.
        what: &'static str,
        /// The bincode error.
        source: bincode::Error,
    },
}

impl CodecError {
    /// The status a server answers for this error.
    pub(crate) fn to_status(&self) -> tonic::Status {
        match self {
            CodecError::UnsupportedFormat(_) | CodecError::NewerEntries { .. } => {
                tonic::Status::failed_precondition(self.to_string())
            }
            CodecError::Bincode { .. } => tonic::Status::invalid_argument(self.to_string()),
        }
    }
}

/// Checks that a message's `format` is [`FORMAT`].
pub(crate) fn check_format(format: i32) -> Result<(), CodecError> {
    if format == FORMAT as i32 {
        Ok(())
    } else {
        Err(CodecError::UnsupportedFormat(format))
    }
}

/// The log-entry version of a message carrying `entries`: the newest layout among them.
pub(crate) fn entries_version(entries: &[Entry]) -> u32 {
    entries
        .iter()
        .map(|entry| match &entry.payload {
            EntryPayload::Normal(request) => command_version(&request.command),
            EntryPayload::Blank | EntryPayload::Membership(_) => ENTRY_VERSION_WRITTEN,
        })
        .max()
        .unwrap_or(ENTRY_VERSION_WRITTEN)
}

/// The log-entry version that introduced `command`'s layout.
fn command_version(command: &Command) -> u32 {
    match command {
        Command::Abandon(_) | Command::Tokens(_) => ENTRY_VERSION_ABANDON,
        Command::Reconcile(reconcile) if reconcile.target == ReconcileTarget::Cancelled => {
            ENTRY_VERSION_ABANDON
        }
        Command::MembershipIntent(_) => ENTRY_VERSION_MEMBERSHIP_INTENT,
        _ => ENTRY_VERSION_WRITTEN,
    }
}

/// Checks that a request's `entry_version` is one this node reads (0, from a release
/// before versions were sent, is 1).
pub(crate) fn check_entry_version(entry_version: u32) -> Result<(), CodecError> {
    if entry_version <= ENTRY_VERSION_READ {
        Ok(())
    } else {
        Err(CodecError::NewerEntries {
            found: entry_version,
        })
    }
}

/// Checks both versions of a request: its `format` and its `entry_version`.
pub(crate) fn check_versions(format: i32, entry_version: u32) -> Result<(), CodecError> {
    check_format(format)?;
    check_entry_version(entry_version)
}

/// The status for a request refused by [`check_versions`], logged loudly but at most once
/// per [`REFUSAL_LOG_INTERVAL`] for the whole process.
pub(crate) fn refuse(group: u64, error: &CodecError) -> tonic::Status {
    static LAST_LOGGED_SECS: AtomicU64 = AtomicU64::new(0);
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs();
    let last = LAST_LOGGED_SECS.load(Ordering::Relaxed);
    if now >= last + REFUSAL_LOG_INTERVAL.as_secs()
        && LAST_LOGGED_SECS
            .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    {
        tracing::error!(group, %error, "refusing a raft request from a peer of another version");
    }
    error.to_status()
}

/// Encodes `value` in [`FORMAT`].
pub(crate) fn encode<T: Serialize>(what: &'static str, value: &T) -> Result<Bytes, CodecError> {
    bincode::serialize(value)
        .map(Bytes::from)
        .map_err(|source| CodecError::Bincode { what, source })
}

/// Decodes a value encoded in [`FORMAT`].
pub(crate) fn decode<T: DeserializeOwned>(
    what: &'static str,
    bytes: &[u8],
) -> Result<T, CodecError> {
    bincode::deserialize(bytes).map_err(|source| CodecError::Bincode { what, source })
}

#[cfg(test)]
mod fuzz;

#[cfg(test)]
mod tests {
    //! Every message type crosses the wire through bincode; these check that openraft's
    //! serde forms of them round-trip exactly (no `untagged`, no `skip_serializing_if`
    //! that a positional format would mis-read).

    use std::collections::{BTreeMap, BTreeSet};
    use std::fmt::Debug;

    use idem_store::{Entry, NodeInfo, Request, SnapshotMeta, StoredMembership, TypeConfig, Vote};
    use openraft::entry::RaftEntry;
    use openraft::errors::Fatal;
    use openraft::raft::{
        AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, StreamAppendError,
        StreamAppendResult, TransferLeaderRequest, VoteRequest, VoteResponse,
    };
    use openraft::Membership;

    use super::*;

    fn round_trip<T: Serialize + DeserializeOwned + PartialEq + Debug>(value: T) {
        let bytes = encode("value", &value).unwrap();
        let back: T = decode("value", &bytes).unwrap();
        assert_eq!(back, value);
    }

    /// For types without `PartialEq`: equal debug forms.
    fn round_trip_debug<T: Serialize + DeserializeOwned + Debug>(value: T) {
        let bytes = encode("value", &value).unwrap();
        let back: T = decode("value", &bytes).unwrap();
        assert_eq!(format!("{back:?}"), format!("{value:?}"));
    }

    fn log_id(term: u64, node: u64, index: u64) -> idem_store::LogId {
        openraft::testing::log_id::<TypeConfig>(term, node, index)
    }

    fn membership() -> Membership<u64, NodeInfo> {
        let node = |n: u64| NodeInfo {
            region: format!("r{n}"),
            zone: "a".into(),
            raft_addr: format!("10.0.0.{n}:7401"),
            api_addr: format!("10.0.0.{n}:7400"),
        };
        Membership::new(
            vec![BTreeSet::from([1, 2, 3])],
            BTreeMap::from([(1, node(1)), (2, node(2)), (3, node(3)), (4, node(4))]),
        )
        .unwrap()
    }

    fn request() -> Request {
        let mut h = idem_core::testing::Harness::new(idem_core::MemoryStore::new());
        let key = idem_core::testing::Harness::<idem_core::MemoryStore>::target("k-1");
        Request {
            stamp: idem_core::Timestamp(1_000_000),
            command: h
                .claim_command(&key, idem_core::testing::BODY_A, "w1")
                .into(),
        }
    }

    #[test]
    fn openraft_messages_round_trip() {
        let vote = Vote::new(7, 2);
        let committed = Vote::new_committed(7, 2);
        round_trip(vote);
        round_trip(committed);

        let entries: Vec<Entry> = vec![
            Entry::new_blank(log_id(7, 2, 10)),
            Entry::new_normal(log_id(7, 2, 11), request()),
            Entry::new_membership(log_id(7, 2, 12), membership()),
        ];
        round_trip_debug(AppendEntriesRequest::<TypeConfig> {
            vote: committed,
            prev_log_id: Some(log_id(6, 1, 9)),
            entries,
            leader_commit: Some(log_id(6, 1, 8)),
        });
        round_trip_debug(AppendEntriesRequest::<TypeConfig> {
            vote: committed,
            prev_log_id: None,
            entries: vec![],
            leader_commit: None,
        });
        for response in [
            AppendEntriesResponse::<TypeConfig>::Success,
            AppendEntriesResponse::PartialSuccess(Some(log_id(7, 2, 11))),
            AppendEntriesResponse::Conflict,
            AppendEntriesResponse::HigherVote(Vote::new_committed(8, 3)),
        ] {
            round_trip(response);
        }
        let results: Vec<StreamAppendResult<TypeConfig>> = vec![
            Ok(None),
            Ok(Some(log_id(7, 2, 11))),
            Err(StreamAppendError::Conflict(log_id(7, 2, 11))),
            Err(StreamAppendError::HigherVote(Vote::new_committed(8, 3))),
        ];
        for result in results {
            round_trip(result);
        }

        round_trip(VoteRequest::<TypeConfig>::new(vote, Some(log_id(6, 1, 9))));
        round_trip(VoteResponse::<TypeConfig>::new(
            vote,
            Some(log_id(6, 1, 9)),
            true,
        ));
        round_trip(SnapshotResponse::<TypeConfig>::new(committed));
        round_trip(TransferLeaderRequest::<TypeConfig>::new(
            committed,
            3,
            Some(log_id(7, 2, 12)),
        ));
        round_trip(SnapshotMeta {
            last_log_id: Some(log_id(7, 2, 12)),
            last_membership: StoredMembership::new(Some(log_id(7, 2, 12)), membership()),
        });
        round_trip(Fatal::<TypeConfig>::Stopped);
    }

    #[test]
    fn format_is_checked() {
        check_format(Format::BincodeV1 as i32).unwrap();
        let err = check_format(Format::Unspecified as i32).unwrap_err();
        assert_eq!(err.to_status().code(), tonic::Code::FailedPrecondition);
        let err = decode::<Vote>("vote", &[1, 2]).unwrap_err();
        assert_eq!(err.to_status().code(), tonic::Code::InvalidArgument);
    }

    #[test]
    fn a_message_has_the_version_of_its_newest_entry() {
        let abandon = Command::Abandon(idem_core::command::Audited::new(
            idem_core::command::Abandon { targets: vec![] },
            "node:1",
            "abandoned claims",
        ));
        let claim = Entry::new_normal(log_id(7, 2, 11), request());
        let blank = Entry::new_blank(log_id(7, 2, 10));
        let members = Entry::new_membership(log_id(7, 2, 12), membership());
        assert_eq!(entries_version(&[]), ENTRY_VERSION_WRITTEN);
        assert_eq!(
            entries_version(&[blank.clone(), claim.clone(), members]),
            ENTRY_VERSION_WRITTEN
        );
        let abandon = Entry::new_normal(
            log_id(7, 2, 13),
            Request {
                stamp: idem_core::Timestamp(1),
                command: abandon.into(),
            },
        );
        assert_eq!(
            entries_version(&[blank, abandon, claim]),
            ENTRY_VERSION_ABANDON
        );
        check_entry_version(ENTRY_VERSION_ABANDON).unwrap();
        let revoke = Command::Tokens(idem_core::command::Audited::new(
            idem_core::placement::TokenChange::Revoke {
                name: "payments".into(),
            },
            "admin",
            "rotation",
        ));
        let revoke = Entry::new_normal(
            log_id(7, 2, 14),
            Request {
                stamp: idem_core::Timestamp(1),
                command: revoke.into(),
            },
        );
        assert_eq!(entries_version(&[revoke]), ENTRY_VERSION_ABANDON);
        let reconcile = |target| {
            let command = Command::Reconcile(idem_core::command::Reconcile {
                operation_id: idem_core::OperationId::from_bytes([7; 16]),
                expected_version: 3,
                target,
                reason: "provider has no trace".into(),
                admin: "reconciler".into(),
            });
            let request = Request {
                stamp: idem_core::Timestamp(1),
                command: command.into(),
            };
            entries_version(&[Entry::new_normal(log_id(7, 2, 15), request)])
        };
        assert_eq!(reconcile(ReconcileTarget::Cancelled), ENTRY_VERSION_ABANDON);
        let retry = ReconcileTarget::RetryableFailure(idem_core::ErrorSummary::default());
        assert_eq!(reconcile(retry), ENTRY_VERSION_WRITTEN);
        let intent = idem_core::audit::MembershipIntent {
            kind: idem_core::audit::MembershipKind::Add,
            member: 4,
        };
        let intent = Request {
            stamp: idem_core::Timestamp(1),
            command: Command::MembershipIntent(idem_core::command::Audited::new(
                intent, "root", "grow",
            ))
            .into(),
        };
        let intent = Entry::new_normal(log_id(7, 2, 16), intent);
        assert_eq!(entries_version(&[intent]), ENTRY_VERSION_MEMBERSHIP_INTENT);
    }

    #[test]
    fn entry_versions_up_to_the_read_one_pass_and_newer_ones_are_refused() {
        // 0: a release from before entry versions were sent, which wrote version 1.
        for version in [0, 1, ENTRY_VERSION_WRITTEN, ENTRY_VERSION_READ] {
            check_versions(Format::BincodeV1 as i32, version).unwrap();
        }
        let err = check_versions(Format::BincodeV1 as i32, ENTRY_VERSION_READ + 1).unwrap_err();
        let status = refuse(0, &err);
        assert_eq!(status.code(), tonic::Code::FailedPrecondition);
        let found = format!("version {}", ENTRY_VERSION_READ + 1);
        assert!(status.message().contains(&found), "{}", status.message());
        // The format is checked first: an unknown format is refused whatever the version.
        let err = check_versions(Format::Unspecified as i32, 1).unwrap_err();
        assert!(matches!(err, CodecError::UnsupportedFormat(0)), "{err:?}");
    }
}
