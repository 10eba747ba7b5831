//! Fuzzing what a node decodes from its clients, its peers and its operator: API requests
//! (protobuf, then the proto → domain conversions of `api::decode`, including server-side
//! JSON fingerprinting of a canonical request), forwarded payloads (bincode `Command` and
//! `MembershipChange` from another node), and the configuration file.
//!
//! Each must answer with a value or a clear error — never a panic, never an allocation sized
//! by what the input merely claims. Inputs are real, valid messages (and a full configuration)
//! that are then damaged: protobuf bytes flipped, cut, repeated or inserted (whatever still
//! decodes as protobuf reaches the conversions with odd field values), JSON bodies rewritten
//! from JSON's own alphabet, and configuration values replaced by values of other types and
//! extreme numbers. Failing cases are kept in `proptest-regressions/`.

use std::collections::HashMap;

use idem_core::testing::Harness;
use idem_core::MemoryStore;
use idem_proto::v1 as pb;
use idem_server::api::decode::{self, BodyLimits};
use idem_server::backend::MembershipChange;
use idem_server::Config;
use idem_testkit::mutation::{mutated, MutationSpace};
use proptest::prelude::*;
use prost::Message;

const LIMITS: BodyLimits = BodyLimits {
    max_body_bytes: 64 << 10,
    max_canonical_bytes: 128 << 10,
};

fn scope() -> Option<pb::Scope> {
    Some(pb::Scope {
        tenant: "acme".into(),
        environment: "test".into(),
        actor: "user-42".into(),
        endpoint: "POST /v1/charges".into(),
    })
}

fn canonical(body: &str) -> pb::CanonicalRequest {
    pb::CanonicalRequest {
        method: "POST".into(),
        route: "/v1/charges/{id}".into(),
        path_params: HashMap::from([("id".into(), "7".into())]),
        query: vec![pb::QueryParam {
            name: "expand".into(),
            value: "fees".into(),
        }],
        body_json: Some(body.as_bytes().to_vec()),
        schema_version: 1,
    }
}

fn claim_request() -> pb::ClaimRequest {
    pb::ClaimRequest {
        scope: scope(),
        key: "order-7f3a".into(),
        request: Some(canonical(
            r#"{"amount":1000,"currency":"EUR","items":[1,2.5,null]}"#,
        )),
        holder: "worker-1".into(),
        lease_ms: Some(30_000),
        retention_ms: Some(86_400_000),
        max_result_bytes: Some(4096),
        ..Default::default()
    }
}

fn result() -> pb::StoredResult {
    pb::StoredResult {
        status_code: 201,
        resource_id: "ch_1".into(),
        resource_version: "1".into(),
        fields: HashMap::from([("amount".into(), "1000".into())]),
        purged: false,
        body: br#"{"id":"ch_1"}"#.to_vec(),
        content_type: "application/json".into(),
        // A verbatim body is result version 1.
        result_version: 1,
    }
}

/// Real encodings of every request the owner and lookup conversions take, by kind.
fn samples() -> Vec<(usize, Vec<u8>)> {
    vec![
        (0, claim_request().encode_to_vec()),
        (
            1,
            pb::CompleteRequest {
                scope: scope(),
                key: "order-7f3a".into(),
                fence: 3,
                result: Some(result()),
            }
            .encode_to_vec(),
        ),
        (
            2,
            pb::FailRequest {
                scope: scope(),
                key: "order-7f3a".into(),
                fence: 3,
                retryable: true,
                error: Some(pb::ErrorSummary {
                    code: "card_declined".into(),
                    message: "declined".into(),
                }),
            }
            .encode_to_vec(),
        ),
        (
            3,
            pb::RecordExternalCallRequest {
                scope: scope(),
                key: "order-7f3a".into(),
                fence: 3,
                stage: pb::ExternalCallStage::RemoteConfirmed as i32,
                remote_ref: "pi_123".into(),
            }
            .encode_to_vec(),
        ),
        (
            4,
            pb::RenewRequest {
                scope: scope(),
                key: "order-7f3a".into(),
                fence: 3,
                lease_ms: Some(60_000),
            }
            .encode_to_vec(),
        ),
        (
            5,
            pb::WaitRequest {
                scope: scope(),
                key: "order-7f3a".into(),
                operation_id: String::new(),
                timeout_ms: 5_000,
            }
            .encode_to_vec(),
        ),
        (
            6,
            pb::GetOperationRequest {
                operation_id: "01a2270b-d6db-72b3-ad6b-7c8b7fc38980".into(),
            }
            .encode_to_vec(),
        ),
    ]
}

/// Decodes `bytes` as request kind `kind` and runs its conversion; errors are fine.
fn convert(runtime: &tokio::runtime::Runtime, kind: usize, bytes: &[u8]) {
    match kind {
        0 => {
            if let Ok(req) = pb::ClaimRequest::decode(bytes) {
                let _ = runtime.block_on(decode::claim::claim(req, LIMITS));
            }
        }
        1 => {
            if let Ok(req) = pb::CompleteRequest::decode(bytes) {
                let _ = decode::owner::complete(req);
            }
        }
        2 => {
            if let Ok(req) = pb::FailRequest::decode(bytes) {
                let _ = decode::owner::fail(req);
            }
        }
        3 => {
            if let Ok(req) = pb::RecordExternalCallRequest::decode(bytes) {
                let _ = decode::owner::record_external_call(req);
            }
        }
        4 => {
            if let Ok(req) = pb::RenewRequest::decode(bytes) {
                let _ = decode::owner::renew(req);
            }
        }
        5 => {
            if let Ok(req) = pb::WaitRequest::decode(bytes) {
                let _ = decode::lookup::wait(req);
            }
        }
        _ => {
            if let Ok(req) = pb::GetOperationRequest::decode(bytes) {
                let _ = decode::lookup::get_operation(req);
            }
        }
    }
}

/// The mutations drawn for these encodings.
const SPACE: MutationSpace = MutationSpace {
    max_span: 16,
    max_insert: 12,
    length_prefix: None,
};

/// JSON text from JSON's alphabet (and a few characters outside it).
fn json_text() -> impl Strategy<Value = String> {
    let alphabet = vec![
        '{',
        '}',
        '[',
        ']',
        ':',
        ',',
        '"',
        '\\',
        'u',
        '0',
        '1',
        '9',
        '-',
        '+',
        '.',
        'e',
        'E',
        't',
        'r',
        'f',
        'a',
        'l',
        's',
        'n',
        ' ',
        '\n',
        'é',
        '\u{1F600}',
        '\u{0}',
        'D',
        '8',
    ];
    prop::collection::vec(prop::sample::select(alphabet), 0..300)
        .prop_map(|chars| chars.into_iter().collect())
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// A full, valid configuration file: every section this build knows.
fn config_table() -> toml::Table {
    let invocation = Config::load(["idemd", "--auth", "off"], &|_| None).unwrap();
    invocation.config.to_toml().parse().unwrap()
}

/// Every `(section, key)` path of a table, one level of sections deep.
fn paths(table: &toml::Table) -> Vec<(Option<String>, String)> {
    let mut out = Vec::new();
    for (key, value) in table {
        match value {
            toml::Value::Table(inner) => {
                out.extend(inner.keys().map(|k| (Some(key.clone()), k.clone())));
            }
            _ => out.push((None, key.clone())),
        }
    }
    out
}

fn toml_value() -> impl Strategy<Value = toml::Value> {
    prop_oneof![
        any::<i64>().prop_map(toml::Value::Integer),
        prop_oneof![
            Just(0i64),
            Just(-1),
            Just(i64::MAX),
            Just(i64::MIN),
            Just(1 << 53)
        ]
        .prop_map(toml::Value::Integer),
        any::<f64>().prop_map(toml::Value::Float),
        any::<bool>().prop_map(toml::Value::Boolean),
        prop_oneof![
            Just("".to_string()),
            Just("-1s".to_string()),
            Just("18446744073709551615ms".to_string()),
            Just("99999999999999999999h".to_string()),
            Just("1e300s".to_string()),
            Just("NaN".to_string()),
            Just("0.0.0.0:99999".to_string()),
            Just("/nonexistent/file".to_string()),
            ".{0,40}",
        ]
        .prop_map(toml::Value::String),
        Just(toml::Value::Array(vec![toml::Value::Integer(1)])),
        Just(toml::Value::Table(toml::Table::new())),
    ]
}

/// Loads `text` as the configuration file; any error is fine, a panic is not.
fn load_config(dir: &std::path::Path, text: &str) {
    let path = dir.join("idemd.toml");
    std::fs::write(&path, text).unwrap();
    let args = [
        "idemd".to_string(),
        "--config".into(),
        path.display().to_string(),
    ];
    if let Ok(invocation) = Config::load(args, &|_| None) {
        let _ = invocation.config.raft_config();
        let _ = invocation.config.to_toml();
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn mutated_requests_never_panic(
        sample in 0..7usize,
        mutations in SPACE.mutations(1..5),
    ) {
        let runtime = runtime();
        let (kind, original) = samples()[sample].clone();
        let bytes = mutated(&original, &mutations);
        convert(&runtime, kind, &bytes);
    }

    #[test]
    fn arbitrary_fields_never_panic(
        key in ".{0,300}",
        tenant in ".{0,80}",
        holder in ".{0,300}",
        fence in any::<u64>(),
        lease_ms in any::<Option<u64>>(),
        retention_ms in any::<Option<u64>>(),
        max_result_bytes in any::<Option<u32>>(),
        risk in any::<i32>(),
        digest in prop::collection::vec(any::<u8>(), 0..80),
        algorithm in ".{0,40}",
        status_code in any::<u32>(),
        operation_id in ".{0,40}",
        timeout_ms in any::<u64>(),
    ) {
        let runtime = runtime();
        let mut scope = scope();
        if let Some(s) = scope.as_mut() {
            s.tenant = tenant;
        }
        let claim = pb::ClaimRequest {
            scope: scope.clone(),
            key: key.clone(),
            fingerprints: vec![pb::Fingerprint { algorithm, schema_version: 1, digest }],
            holder,
            lease_ms,
            retention_ms,
            max_result_bytes,
            risk,
            ..Default::default()
        };
        let _ = runtime.block_on(decode::claim::claim(claim, LIMITS));
        let complete = pb::CompleteRequest {
            scope: scope.clone(),
            key: key.clone(),
            fence,
            result: Some(pb::StoredResult { status_code, ..result() }),
        };
        let _ = decode::owner::complete(complete);
        let renew = pb::RenewRequest { scope: scope.clone(), key: key.clone(), fence, lease_ms };
        let _ = decode::owner::renew(renew);
        let wait = pb::WaitRequest { scope: None, key: String::new(), operation_id, timeout_ms };
        let _ = decode::lookup::wait(wait);
    }

    #[test]
    fn arbitrary_json_bodies_never_panic(body in json_text()) {
        let runtime = runtime();
        let claim = pb::ClaimRequest { request: Some(canonical(&body)), ..claim_request() };
        let _ = runtime.block_on(decode::claim::claim(claim, LIMITS));
    }

    #[test]
    fn forwarded_payloads_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        // The Forward service decodes these from another node's request.
        let _ = bincode::deserialize::<idem_core::Command>(&bytes);
        let _ = bincode::deserialize::<MembershipChange>(&bytes);
    }

    #[test]
    fn mutated_forwarded_commands_never_panic(
        mutations in SPACE.mutations(1..5),
    ) {
        let mut h = Harness::new(MemoryStore::new());
        let command = h.claim_command(&Harness::<MemoryStore>::target("k-1"), 1, "worker-1");
        let bytes = mutated(&bincode::serialize(&command).unwrap(), &mutations);
        let _ = bincode::deserialize::<idem_core::Command>(&bytes);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn mutated_config_values_never_panic(
        choices in prop::collection::vec((any::<prop::sample::Index>(), toml_value()), 1..4),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let mut table = config_table();
        let all = paths(&table);
        for (index, value) in choices {
            let (section, key) = index.get(&all).clone();
            match section {
                Some(s) => {
                    if let Some(toml::Value::Table(inner)) = table.get_mut(&s) {
                        inner.insert(key, value);
                    }
                }
                None => {
                    table.insert(key, value);
                }
            }
        }
        load_config(dir.path(), &toml::to_string(&table).unwrap());
    }

    #[test]
    fn mutated_config_text_never_panics(
        mutations in SPACE.mutations(1..5),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let bytes = mutated(toml::to_string(&config_table()).unwrap().as_bytes(), &mutations);
        load_config(dir.path(), &String::from_utf8_lossy(&bytes));
    }
}

#[test]
fn deeply_nested_json_is_refused_not_a_stack_overflow() {
    let runtime = runtime();
    for open in ["[", "{\"a\":"] {
        let body = open.repeat(20_000);
        let claim = pb::ClaimRequest {
            request: Some(canonical(&body)),
            ..claim_request()
        };
        assert!(runtime
            .block_on(decode::claim::claim(claim, LIMITS))
            .is_err());
    }
}

#[test]
fn the_samples_are_valid() {
    // The mutations start from requests the conversions accept.
    let runtime = runtime();
    let (_, claim) = &samples()[0];
    let req = pb::ClaimRequest::decode(claim.as_slice()).unwrap();
    runtime.block_on(decode::claim::claim(req, LIMITS)).unwrap();
    for (kind, bytes) in &samples()[1..5] {
        let command = match kind {
            1 => decode::owner::complete(pb::CompleteRequest::decode(bytes.as_slice()).unwrap()),
            2 => decode::owner::fail(pb::FailRequest::decode(bytes.as_slice()).unwrap()),
            3 => decode::owner::record_external_call(
                pb::RecordExternalCallRequest::decode(bytes.as_slice()).unwrap(),
            ),
            _ => decode::owner::renew(pb::RenewRequest::decode(bytes.as_slice()).unwrap()),
        };
        command.unwrap();
    }
}
