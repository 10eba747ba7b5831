//! Fuzzing the Raft payload decoder ([`super::decode`]).
//!
//! Every Raft RPC a node receives carries its openraft message as bincode bytes in
//! `payload` (and a snapshot header carries a vote and a snapshot meta): whatever a peer,
//! a bug or a flipped bit on the wire sends reaches [`super::decode`]. It must answer with a
//! message or an `INVALID_ARGUMENT`, never panic, and never allocate what a length prefix
//! merely claims. Inputs: arbitrary bytes, and structured mutations of real encodings of
//! every message type (a byte flipped, a slice deleted, repeated or inserted, a length
//! prefix set huge, the input cut short). Failing cases are kept in `proptest-regressions/`.

use std::collections::{BTreeMap, BTreeSet};

use idem_store::{Entry, NodeInfo, Request, SnapshotMeta, StoredMembership, TypeConfig, Vote};
use idem_testkit::mutation::{mutated, LengthPrefix, MutationSpace};
use openraft::entry::RaftEntry;
use openraft::errors::Fatal;
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, StreamAppendResult,
    TransferLeaderRequest, VoteRequest, VoteResponse,
};
use openraft::Membership;
use proptest::prelude::*;
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::{decode, encode};

fn log_id(term: u64, index: u64) -> idem_store::LogId {
    openraft::testing::log_id::<TypeConfig>(term, 2, index)
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
        BTreeMap::from([(1, node(1)), (2, node(2)), (3, node(3))]),
    )
    .unwrap()
}

fn request() -> Request {
    type H = idem_core::testing::Harness<idem_core::MemoryStore>;
    let mut h = H::new(idem_core::MemoryStore::new());
    Request {
        stamp: idem_core::Timestamp(1_000_000),
        command: h
            .claim_command(&H::target("k-1"), idem_core::testing::BODY_A, "w1")
            .into(),
    }
}

fn bytes_of<T: Serialize>(value: &T) -> Vec<u8> {
    encode("sample", value).unwrap().to_vec()
}

/// Real encodings of every message type a node decodes.
fn samples() -> Vec<Vec<u8>> {
    let committed = Vote::new_committed(7, 2);
    let entries: Vec<Entry> = vec![
        Entry::new_blank(log_id(7, 10)),
        Entry::new_normal(log_id(7, 11), request()),
        Entry::new_membership(log_id(7, 12), membership()),
    ];
    let append = AppendEntriesRequest::<TypeConfig> {
        vote: committed,
        prev_log_id: Some(log_id(6, 9)),
        entries,
        leader_commit: Some(log_id(6, 8)),
    };
    let stream: StreamAppendResult<TypeConfig> = Ok(Some(log_id(7, 11)));
    vec![
        bytes_of(&append),
        bytes_of(&AppendEntriesResponse::<TypeConfig>::HigherVote(committed)),
        bytes_of(&stream),
        bytes_of(&VoteRequest::<TypeConfig>::new(
            committed,
            Some(log_id(6, 9)),
        )),
        bytes_of(&VoteResponse::<TypeConfig>::new(committed, None, true)),
        bytes_of(&SnapshotResponse::<TypeConfig>::new(committed)),
        bytes_of(&TransferLeaderRequest::<TypeConfig>::new(
            committed,
            3,
            Some(log_id(7, 12)),
        )),
        bytes_of(&SnapshotMeta {
            last_log_id: Some(log_id(7, 12)),
            last_membership: StoredMembership::new(Some(log_id(7, 12)), membership()),
        }),
        bytes_of(&committed),
        bytes_of(&Fatal::<TypeConfig>::Stopped),
    ]
}

/// Decodes `bytes` as `T`; a success must encode again.
fn try_decode<T: DeserializeOwned + Serialize>(bytes: &[u8]) {
    if let Ok(value) = decode::<T>("fuzz", bytes) {
        encode("fuzz", &value).unwrap();
    }
}

/// Every message type the server and the network client decode.
fn decode_everything(bytes: &[u8]) {
    try_decode::<AppendEntriesRequest<TypeConfig>>(bytes);
    try_decode::<AppendEntriesResponse<TypeConfig>>(bytes);
    try_decode::<StreamAppendResult<TypeConfig>>(bytes);
    try_decode::<VoteRequest<TypeConfig>>(bytes);
    try_decode::<VoteResponse<TypeConfig>>(bytes);
    try_decode::<SnapshotResponse<TypeConfig>>(bytes);
    try_decode::<TransferLeaderRequest<TypeConfig>>(bytes);
    try_decode::<SnapshotMeta>(bytes);
    try_decode::<Vote>(bytes);
    try_decode::<Fatal<TypeConfig>>(bytes);
}

/// The mutations drawn for these encodings.
const SPACE: MutationSpace = MutationSpace {
    max_span: 24,
    max_insert: 16,
    length_prefix: Some(LengthPrefix::U64Le),
};

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn arbitrary_payloads_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        decode_everything(&bytes);
    }

    #[test]
    fn mutated_messages_never_panic(
        sample in 0..10usize,
        mutations in SPACE.mutations(1..5),
    ) {
        let bytes = mutated(&samples()[sample], &mutations);
        decode_everything(&bytes);
    }
}

#[test]
fn a_huge_entry_count_is_an_error_not_an_allocation() {
    // An append whose entry count claims 2^60 entries, followed by nothing.
    let mut bytes = samples()[0].clone();
    let vote_len = bytes_of(&Vote::new_committed(7, 2)).len();
    let prev_len = bytes_of(&Some(log_id(6, 9))).len();
    let at = vote_len + prev_len;
    bytes.truncate(at);
    // The layout is right: with no entries and no commit, the prefix decodes.
    let mut empty = bytes.clone();
    empty.extend(0u64.to_le_bytes());
    empty.push(0);
    let decoded = decode::<AppendEntriesRequest<TypeConfig>>("fuzz", &empty).unwrap();
    assert!(decoded.entries.is_empty());
    bytes.extend((1u64 << 60).to_le_bytes());
    assert!(decode::<AppendEntriesRequest<TypeConfig>>("fuzz", &bytes).is_err());
}
