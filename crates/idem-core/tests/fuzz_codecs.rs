//! Fuzzing the storage and wire codecs of the core's types.
//!
//! Records, log entries (`Command`), forwarded commands and the leader's replies (`Outcome`)
//! cross the network between nodes and sit on disk in bincode 1; keys and index entries have
//! hand-written encodings; a result has a hand-written, versioned tuple form
//! (`record/result_codec.rs`). A corrupted disk or a hostile peer can hand any bytes to
//! these decoders, so each must answer with a value or an error — never a panic, never an
//! allocation sized by a length it has not checked against the input. Inputs: arbitrary
//! bytes, and structured mutations of real encodings (a byte flipped, a slice deleted or
//! repeated, a length prefix set huge, the input cut short). Failing cases are kept in
//! `proptest-regressions/`.

use std::time::Duration;

use idem_core::store::{ExpiryKey, Meta};
use idem_core::testing::{sample, Harness};
use idem_core::{
    AuditEntry, Command, MemoryStore, Outcome, Placement, Record, RecordKey, StoredBody,
    StoredResult,
};
use idem_testkit::mutation::{mutated, LengthPrefix, MutationSpace};
use proptest::prelude::*;
use serde::de::DeserializeOwned;
use serde::Serialize;

/// Valid encodings of every type, as the store and the network carry them.
fn samples() -> Vec<Vec<u8>> {
    let mut h = Harness::new(MemoryStore::new());
    let key = Harness::<MemoryStore>::target("k-1");
    let claim = h.claim_command(&key, 1, "worker-1");
    let fence = h.acquire(&Harness::<MemoryStore>::target("k-2"), "worker-2");
    let mut with_body = Harness::<MemoryStore>::result("ch_1");
    with_body.body = Some(StoredBody {
        content_type: "application/json".into(),
        bytes: br#"{"amount":1000}"#.to_vec(),
    });
    h.advance(Duration::from_secs(1));
    let completed = h.complete(
        &Harness::<MemoryStore>::target("k-2"),
        fence,
        with_body.clone(),
    );
    vec![
        enc(&claim),
        enc(&completed),
        enc(&sample::completed_record()),
        enc(&with_body),
        enc(&Harness::<MemoryStore>::result("ch_2")),
        key.encode(),
        Harness::<MemoryStore>::target_for("acme", "user-42", "order-7").encode(),
    ]
}

/// The bincode encoding of `value`.
fn enc<T: Serialize>(value: &T) -> Vec<u8> {
    bincode::serialize(value).unwrap()
}

/// Decodes `bytes` as `T`; a success must encode again (no half-built value).
fn decode<T: DeserializeOwned + Serialize>(bytes: &[u8]) {
    if let Ok(value) = bincode::deserialize::<T>(bytes) {
        bincode::serialize(&value).unwrap();
    }
}

/// Every decoder of the core on `bytes`.
fn decode_everything(bytes: &[u8]) {
    decode::<Command>(bytes);
    decode::<Outcome>(bytes);
    decode::<Record>(bytes);
    decode::<StoredResult>(bytes);
    decode::<Option<StoredResult>>(bytes);
    decode::<AuditEntry>(bytes);
    decode::<Meta>(bytes);
    let _ = Placement::decode(bytes);
    if let Ok(key) = RecordKey::decode(bytes) {
        // The key encoding is canonical: what decodes encodes to the same bytes.
        assert_eq!(key.encode(), bytes);
    }
    if let Some(expiry) = ExpiryKey::decode(bytes) {
        assert_eq!(expiry.encode().as_slice(), bytes);
    }
}

/// The mutations drawn for these encodings.
const SPACE: MutationSpace = MutationSpace {
    max_span: 16,
    max_insert: 16,
    length_prefix: Some(LengthPrefix::U64Le),
};

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        decode_everything(&bytes);
    }

    #[test]
    fn mutated_encodings_never_panic(
        sample in 0..7usize,
        mutations in SPACE.mutations(1..5),
    ) {
        let bytes = mutated(&samples()[sample], &mutations);
        decode_everything(&bytes);
    }
}

#[test]
fn samples_decode_as_what_they_are() {
    // The mutations start from real encodings: check that they are.
    let samples = samples();
    assert!(bincode::deserialize::<Command>(&samples[0]).is_ok());
    assert!(bincode::deserialize::<Outcome>(&samples[1]).is_ok());
    assert!(bincode::deserialize::<Record>(&samples[2]).is_ok());
    let result: StoredResult = bincode::deserialize(&samples[3]).unwrap();
    assert!(result.body.is_some());
    assert!(RecordKey::decode(&samples[5]).is_ok());
}
