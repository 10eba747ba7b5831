use std::collections::HashMap;

use idem_core::testing::sample::completed_record;
use idem_core::{Holder, Lease};

use super::*;

#[test]
fn record_round_trips() {
    let record = completed_record();
    let wire = record_to_proto(&record);
    assert_eq!(wire.completed_at_ms, 2_000);
    assert_eq!(wire.risk, v1::Risk::High as i32);
    assert_eq!(record_from_proto(wire.clone()).unwrap(), record);

    let mut live = record;
    live.state = State::InProgress;
    live.stage = Stage::NotCalled;
    live.remote_ref = None;
    live.previous_stage = None;
    live.result = None;
    live.error = Some(ErrorSummary {
        code: "timeout".into(),
        message: "upstream".into(),
    });
    live.completed_at = None;
    live.expires_at = None;
    live.lease = Some(Lease {
        holder: Holder::new("w-1").unwrap(),
        expires_at: Timestamp(31_000),
    });
    let wire = record_to_proto(&live);
    assert_eq!(wire.previous_stage, 0);
    assert_eq!(wire.remote_ref, "");
    assert_eq!(record_from_proto(wire).unwrap(), live);
}

#[test]
fn result_versions_round_trip() {
    // Version 1: the verbatim body and its content type, both ways.
    let with_body = completed_record().result.unwrap();
    let wire = result_to_proto(&with_body);
    assert_eq!(wire.result_version, 1);
    assert_eq!(wire.content_type, "application/json");
    assert_eq!(wire.body, br#"{"id":"ch_1"}"#.to_vec());
    assert_eq!(result_from_proto(wire.clone()).unwrap(), with_body);
    // An empty body is still a stored body (version 1), not "none".
    let empty = StoredResult {
        body: Some(StoredBody::default()),
        ..with_body.clone()
    };
    assert_eq!(result_from_proto(result_to_proto(&empty)).unwrap(), empty);
    // Version 0: no body on the wire, none back.
    let plain = StoredResult {
        body: None,
        ..with_body
    };
    let wire0 = result_to_proto(&plain);
    assert_eq!((wire0.result_version, wire0.body.len()), (0, 0));
    assert_eq!(result_from_proto(wire0).unwrap(), plain);
    // A body without its version, or an unknown version, is refused, not dropped.
    for version in [0, 2] {
        let err = result_from_proto(v1::StoredResult {
            result_version: version,
            ..wire.clone()
        })
        .unwrap_err();
        assert_eq!(err.reason(), "INVALID_RESULT", "{err}");
        assert!(
            err.to_string().starts_with("result.result_version"),
            "{err}"
        );
    }
}

/// A change that breaks a valid wire record.
type Mutation = fn(&mut v1::Record);

#[test]
fn invalid_records_carry_the_field_reason() {
    let good = record_to_proto(&completed_record());
    let cases: [(Mutation, &str); 10] = [
        (|r| r.state = 0, "INVALID_ARGUMENT"),
        (|r| r.state = 99, "INVALID_ARGUMENT"),
        (|r| r.stage = 0, "INVALID_ARGUMENT"),
        (|r| r.risk = 0, "INVALID_POLICY"),
        (|r| r.scope = None, "INVALID_SCOPE"),
        (
            |r| r.scope.as_mut().unwrap().endpoint = "x".into(),
            "INVALID_SCOPE",
        ),
        (|r| r.fingerprint = None, "INVALID_FINGERPRINT"),
        (|r| r.key = "no spaces".into(), "INVALID_KEY"),
        (|r| r.operation_id = "x".into(), "INVALID_ARGUMENT"),
        (
            |r| r.result.as_mut().unwrap().status_code = 70_000,
            "INVALID_RESULT",
        ),
    ];
    for (i, (mutate, reason)) in cases.iter().enumerate() {
        let mut wire = good.clone();
        mutate(&mut wire);
        let err = record_from_proto(wire).unwrap_err();
        assert_eq!(err.reason(), *reason, "case {i}: {err}");
    }
}

#[test]
fn messages_name_the_field() {
    let err = result_from_proto(v1::StoredResult {
        status_code: 70_000,
        ..Default::default()
    })
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "result.status_code: 70000 is outside 100..=599"
    );
    assert_eq!(
        optional_risk_from_proto(9).unwrap_err().to_string(),
        "risk: unknown value 9"
    );
    assert_eq!(
        scope_from_proto(None).unwrap_err().to_string(),
        "scope is required (tenant, environment, actor, endpoint)"
    );
}

#[test]
fn enums_map_one_to_one() {
    for state in State::ALL {
        assert_eq!(
            state_from_proto(state_to_proto(state) as i32).unwrap(),
            state
        );
        // The wire name is the core name with the enum prefix.
        assert_eq!(
            state_to_proto(state).as_str_name(),
            format!("STATE_{}", state.name())
        );
    }
    for stage in STAGES {
        assert_eq!(
            stage_from_proto(stage_to_proto(stage) as i32).unwrap(),
            stage
        );
        assert_eq!(
            stage_to_proto(stage).as_str_name(),
            format!("STAGE_{}", stage.name())
        );
    }
    for risk in RISKS {
        assert_eq!(risk_from_proto(risk_to_proto(risk) as i32).unwrap(), risk);
    }
    for n in 1..=8 {
        let kind = claim_kind_from_proto(n).unwrap();
        assert_eq!(claim_kind_to_proto(kind) as i32, n);
        assert_eq!(
            claim_kind_to_proto(kind).as_str_name(),
            format!("CLAIM_OUTCOME_{}", kind.name())
        );
    }
    assert!(claim_kind_from_proto(0).is_err());
    assert_eq!(optional_stage_from_proto(0).unwrap(), None);
    assert_eq!(optional_state_from_proto(0).unwrap(), None);
    assert_eq!(optional_risk_from_proto(0).unwrap(), None);
}

#[test]
fn canonical_request_keeps_body_presence_and_query_order() {
    let request = CanonicalRequest::new("POST", "/v1/charges/{id}")
        .unwrap()
        .with_path_param("id", "7")
        .with_query_param("tag", "b")
        .with_query_param("tag", "a");
    let wire = canonical_request_to_proto(&request, 2).unwrap();
    assert_eq!(wire.body_json, None);
    assert_eq!(wire.schema_version, 2);
    assert_eq!(wire.path_params.get("id").map(String::as_str), Some("7"));
    let values: Vec<_> = wire.query.iter().map(|q| q.value.as_str()).collect();
    assert_eq!(values, ["b", "a"]);
    assert_eq!(canonical_request_from_proto(wire).unwrap(), request);

    let with_body = request.with_json_body("null");
    let wire = canonical_request_to_proto(&with_body, 1).unwrap();
    assert_eq!(wire.body_json.as_deref(), Some(&b"null"[..]));
    assert_eq!(canonical_request_from_proto(wire).unwrap(), with_body);
}

#[test]
fn canonical_request_from_the_wire_is_validated() {
    let wire = v1::CanonicalRequest {
        method: "post".into(),
        route: "/v1".into(),
        path_params: HashMap::new(),
        query: Vec::new(),
        body_json: None,
        schema_version: 1,
    };
    assert!(matches!(
        canonical_request_from_proto(wire),
        Err(FingerprintError::InvalidMethod { .. })
    ));
}
