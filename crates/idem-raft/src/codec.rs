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

use idem_proto::raft_v1::Format;
use prost::bytes::Bytes;
use serde::de::DeserializeOwned;
use serde::Serialize;

/// The format this version sends and accepts.
pub(crate) const FORMAT: Format = Format::BincodeV1;

/// A payload that could not be encoded or decoded.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CodecError {
    /// The peer used a format this version does not speak.
    #[error("unsupported raft payload format {0} (this node speaks {FORMAT:?})")]
    UnsupportedFormat(i32),
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
            CodecError::UnsupportedFormat(_) => {
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
            command: h.claim_command(&key, idem_core::testing::BODY_A, "w1"),
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
}
