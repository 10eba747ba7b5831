//! Records and log entries written before result version 1 (a verbatim body) still decode
//! and replay: the stored result's encoding is positional (bincode), so this checks the
//! exact bytes an older build wrote, not a re-encoding of today's types.
//!
//! The fixtures were written by the build before version 1 existed, from
//! `testing::sample::completed_record()` and from the harness's `Complete` command for
//! `Harness::target("k-old")`, fence 1, with `Harness::result("ch_old")`.

use idem_core::testing::{Harness, BODY_A};
use idem_core::{ClaimKind, Command, MemoryStore, Outcome, Record};

/// A COMPLETED record, as stored in the `records` column family and in snapshots.
const RECORD_V0: &str = "040000000000000061636d65040000000000000070726f640700000000000000757365722d34321000000000000000504f5354202f76312f636861726765730a000000000000006f726465722d376633610190f1c27d3e7a4b9c1d2e3f4a5b6c7d0d000000000000006a63732d7368613235362f76310100000020000000000000000707070707070707070707070707070707070707070707070707070707070707020000000300000001040000000000000063685f3101010000000300000000000000000200000009000000000000001e0000000000000000000000805101000000000000000000020000000040000001c900040000000000000063685f310200000000000000763101000000000000000600000000000000616d6f756e7403000000000000003130300000e803000000000000d00700000000000001d00700000000000001d063260500000000";

/// A `Command::Complete`, as stored in a log entry.
const COMPLETE_V0: &str = "04000000040000000000000061636d6504000000000000006c6976650600000000000000757365722d311000000000000000504f5354202f76312f6368617267657305000000000000006b2d6f6c640100000000000000c900060000000000000063685f6f6c6401000000000000003101000000000000000600000000000000616d6f756e7404000000000000003130303000";

type H = Harness<MemoryStore>;

#[test]
fn an_old_record_decodes_and_encodes_to_the_same_bytes() {
    let bytes = hex::decode(RECORD_V0).unwrap();
    let record: Record = bincode::deserialize(&bytes).unwrap();
    let mut expected = idem_core::testing::sample::completed_record();
    expected.result.as_mut().unwrap().body = None;
    assert_eq!(record, expected);
    let result = record.result.as_ref().unwrap();
    assert_eq!(result.version(), idem_core::record::RESULT_VERSION_FIELDS);
    // A result without a body is still written in the old form.
    assert_eq!(bincode::serialize(&record).unwrap(), bytes);
}

#[test]
fn an_old_log_entry_applies_and_replays() {
    let command: Command = bincode::deserialize(&hex::decode(COMPLETE_V0).unwrap()).unwrap();
    let mut h = H::new(MemoryStore::new());
    let key = H::target("k-old");
    assert_eq!(h.acquire(&key, "w1"), 1);
    match h.apply(command) {
        Outcome::Record(record) => assert_eq!(record.fence, 1),
        other => panic!("the old Complete did not apply: {other:?}"),
    }
    let replay = h.claim_expect(&key, BODY_A, "w2", ClaimKind::Completed);
    let result = replay.record.result.unwrap();
    assert_eq!(result, H::result("ch_old"));
    assert_eq!(result.body, None);
}
