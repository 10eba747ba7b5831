//! Validators: every rule has a test, and no input panics.

use idem_core::fingerprint::Fingerprint;
use idem_core::{Field, Holder, IdempotencyKey, OperationId, Policy, Scope, ValidationError};
use proptest::prelude::*;

#[test]
fn key_accepts_its_alphabet_and_bounds() {
    assert!(IdempotencyKey::new("a").is_ok());
    assert!(IdempotencyKey::new("A-z_0.9:~x").is_ok());
    assert!(IdempotencyKey::new("k".repeat(255)).is_ok());
    let err = IdempotencyKey::new("k".repeat(256)).unwrap_err();
    assert_eq!(
        err,
        ValidationError::Length {
            field: Field::Key,
            min: 1,
            max: 255,
            actual: 256
        }
    );
    assert!(matches!(
        IdempotencyKey::new(""),
        Err(ValidationError::Length { .. })
    ));
    for bad in ["a b", "a/b", "ä", "a\nb", "a%20"] {
        let err = IdempotencyKey::new(bad).unwrap_err();
        assert!(
            matches!(
                err,
                ValidationError::Charset {
                    field: Field::Key,
                    ..
                }
            ),
            "{bad}"
        );
        assert_eq!(err.reason(), "INVALID_KEY");
    }
}

#[test]
fn key_debug_never_prints_the_key() {
    let key = IdempotencyKey::new("secret-key-123").unwrap();
    assert!(!format!("{key:?}").contains("secret"));
    assert_eq!(key.log_hash().len(), 16);
}

#[test]
fn scope_fields_have_their_own_rules() {
    assert!(Scope::new("acme", "live", "user:42@eu", "POST /v1/charges").is_ok());
    let cases = [
        (Scope::new("", "live", "a", "POST /x"), Field::Tenant),
        (Scope::new("ac me", "live", "a", "POST /x"), Field::Tenant),
        (
            Scope::new("acme", "Live", "a", "POST /x"),
            Field::Environment,
        ),
        (Scope::new("acme", "live", "a b", "POST /x"), Field::Actor),
        (Scope::new("acme", "live", "a", "post /x"), Field::Endpoint),
        (Scope::new("acme", "live", "a", "POST x"), Field::Endpoint),
        (
            Scope::new("acme", "live", "a", "POST /x y"),
            Field::Endpoint,
        ),
        (Scope::new("acme", "live", "a", "POST"), Field::Endpoint),
        (
            Scope::new("t".repeat(65), "live", "a", "POST /x"),
            Field::Tenant,
        ),
    ];
    for (result, field) in cases {
        let err = result.unwrap_err();
        assert_eq!(err.field(), field, "{err}");
        assert_eq!(err.reason(), "INVALID_SCOPE");
    }
}

#[test]
fn scope_deserialisation_validates() {
    let bad = r#"{"tenant":"a c","environment":"live","actor":"a","endpoint":"POST /x"}"#;
    assert!(serde_json::from_str::<Scope>(bad).is_err());
    let good = r#"{"tenant":"ac","environment":"live","actor":"a","endpoint":"POST /x"}"#;
    assert!(serde_json::from_str::<Scope>(good).is_ok());
}

#[test]
fn policy_defaults_and_ranges() {
    let policy = Policy::default();
    assert_eq!(policy.lease.as_secs(), 30);
    assert_eq!(policy.retention.as_secs(), 24 * 3600);
    assert_eq!(policy.max_result_bytes, 16 * 1024);
    assert!(policy.validate().is_ok());
    let short = Policy {
        lease: std::time::Duration::from_millis(10),
        ..Policy::default()
    };
    assert_eq!(short.validate().unwrap_err().reason(), "INVALID_POLICY");
}

#[test]
fn operation_ids_are_time_ordered_and_parse() {
    let a = OperationId::generate();
    std::thread::sleep(std::time::Duration::from_millis(2));
    let b = OperationId::generate();
    assert!(a < b);
    assert_eq!(a.to_string().parse::<OperationId>().unwrap(), a);
    assert!("not-a-uuid".parse::<OperationId>().is_err());
}

#[test]
fn holder_rules() {
    assert!(Holder::new("worker-7/attempt-1").is_ok());
    assert!(Holder::new("").is_err());
    assert!(Holder::new("has space").is_err());
}

#[test]
fn fingerprint_round_trips_through_json() {
    let f = Fingerprint {
        algorithm: "jcs-sha256/v1".into(),
        schema_version: 3,
        digest: vec![7; 32],
    };
    let json = serde_json::to_string(&f).unwrap();
    assert_eq!(serde_json::from_str::<Fingerprint>(&json).unwrap(), f);
}

proptest! {
    #[test]
    fn key_validation_never_panics_and_matches_the_rule(s in ".{0,300}") {
        let allowed = !s.is_empty() && s.len() <= 255
            && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"._:~-".contains(&b));
        prop_assert_eq!(IdempotencyKey::new(s).is_ok(), allowed);
    }

    #[test]
    fn scope_validation_never_panics(t in ".{0,80}", e in ".{0,40}", a in ".{0,140}", p in ".{0,300}") {
        let _ = Scope::new(t, e, a, p);
    }

    #[test]
    fn valid_keys_round_trip(s in "[A-Za-z0-9._:~-]{1,255}") {
        let key = IdempotencyKey::new(s.clone()).unwrap();
        prop_assert_eq!(key.as_str(), s.as_str());
    }

    #[test]
    fn record_key_encoding_round_trips(
        t in "[a-z0-9]{1,64}", a in "[a-z0-9@:]{1,128}", k in "[A-Za-z0-9._:~-]{1,255}"
    ) {
        let scope = Scope::new(t, "live", a, "POST /v1/x").unwrap();
        let key = idem_core::RecordKey::new(scope, IdempotencyKey::new(k).unwrap());
        prop_assert_eq!(idem_core::RecordKey::decode(&key.encode()).unwrap(), key);
    }

    #[test]
    fn record_key_decoding_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..600)) {
        let _ = idem_core::RecordKey::decode(&bytes);
    }
}
