//! Fixed records for conversion and encoding tests in other crates: every optional part
//! that a round trip could drop is set.

use std::collections::BTreeMap;

use crate::fingerprint::Fingerprint;
use crate::{
    IdempotencyKey, Policy, Record, RecordKey, Risk, Scope, Stage, State, StoredBody, StoredResult,
    Timestamp,
};

/// A COMPLETED high-risk charge with a stored result, a remote reference and a retention end.
pub fn completed_record() -> Record {
    let scope = Scope::new("acme", "prod", "user-42", "POST /v1/charges").unwrap();
    Record {
        key: RecordKey::new(scope, IdempotencyKey::new("order-7f3a").unwrap()),
        operation_id: "0190f1c2-7d3e-7a4b-9c1d-2e3f4a5b6c7d".parse().unwrap(),
        fingerprint: Fingerprint::new("jcs-sha256/v1", 1, vec![7; 32]).unwrap(),
        state: State::Completed,
        stage: Stage::LocalDone,
        remote_ref: Some("ch_1".into()),
        previous_stage: Some(Stage::Calling),
        fence: 3,
        lease: None,
        attempts: 2,
        version: 9,
        policy: Policy {
            risk: Risk::High,
            ..Policy::default()
        },
        result: Some(StoredResult {
            status_code: 201,
            resource_id: "ch_1".into(),
            resource_version: "v1".into(),
            fields: BTreeMap::from([("amount".into(), "100".into())]),
            purged: false,
            body: Some(StoredBody {
                content_type: "application/json".into(),
                bytes: br#"{"id":"ch_1"}"#.to_vec(),
            }),
        }),
        error: None,
        created_at: Timestamp(1_000),
        updated_at: Timestamp(2_000),
        completed_at: Some(Timestamp(2_000)),
        expires_at: Some(Timestamp(86_402_000)),
    }
}
