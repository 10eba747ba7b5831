//! `fingerprint`: a key is never accepted for a different request.
//!
//! A claim with the same key but another request body must get `:fingerprint-mismatch` (or
//! `:fingerprint-unverifiable` when it carries no usable fingerprint), never ownership or the
//! other request's stored result; and the original request must never be refused as a mismatch.
//! The key's body is the body of its `:acquired` claim, or, when no acquisition was acknowledged
//! (it timed out), the body of the first claim the store accepted (any `:ok` outcome other than a
//! fingerprint refusal). Every accepted claim must carry that body; a `:fingerprint-mismatch` for
//! that very body is a false refusal.

use serde_json::json;

use super::{by_key, CheckInput, Checker, CheckerResult};
use crate::history::{Operation, Outcome, Value, F};

/// The fingerprint checker.
#[derive(Debug, Clone, Copy, Default)]
pub struct Fingerprint;

impl Checker for Fingerprint {
    fn name(&self) -> &'static str {
        "fingerprint"
    }

    fn check(&self, input: &CheckInput<'_>) -> CheckerResult {
        let mut result = CheckerResult::new();
        for (key, ops) in by_key(input.operations) {
            let claims: Vec<&Operation> = ops
                .into_iter()
                .filter(|op| op.f == F::Claim && op.is_ok() && op.body.is_some())
                .filter(|op| op.outcome.is_some())
                .collect();
            check_key(key, &claims, &mut result);
        }
        result
    }
}

/// The body the key was first stored with, and the claim that shows it.
fn stored_body<'a>(claims: &[&'a Operation]) -> Option<(&'a Value, &'a Operation)> {
    let is_refusal = |op: &&&Operation| {
        op.outcome
            .as_ref()
            .is_some_and(Outcome::is_fingerprint_refusal)
    };
    let acquired = claims
        .iter()
        .find(|op| op.outcome == Some(Outcome::Acquired));
    let first_accepted = claims.iter().find(|op| !is_refusal(op));
    let op = acquired.or(first_accepted)?;
    Some((op.body.as_ref()?, op))
}

fn check_key(key: &str, claims: &[&Operation], result: &mut CheckerResult) {
    let Some((body, origin)) = stored_body(claims) else {
        return;
    };
    result.add("keys", 1);
    for op in claims {
        let outcome = op.outcome.as_ref().map_or("", Outcome::name);
        let same = op.body.as_ref() == Some(body);
        let kind = match op.outcome.as_ref() {
            Some(Outcome::FingerprintMismatch) if same => "mismatch-on-same-request",
            Some(Outcome::FingerprintMismatch | Outcome::FingerprintUnverifiable) => {
                result.add("refused", 1);
                continue;
            }
            _ if same => {
                result.add("accepted", 1);
                continue;
            }
            _ => "accepted-mismatch",
        };
        result.anomaly(json!({
            "type": kind,
            "key": key,
            "stored-body": body.to_ident(),
            "outcome": outcome,
            "origin": origin.describe(),
            "op": op.describe(),
        }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::test_support::{anomaly_types, assert_validity, run};
    use crate::checker::Validity;

    const ACQUIRED: &str = r#"
{:type :invoke :process 0 :f :claim :value {:key "k" :body "b1"}}
{:type :ok :process 0 :f :claim :value {:key "k" :body "b1" :outcome :acquired :fence 1}}
"#;

    fn then(claim_body: &str, outcome: &str) -> String {
        format!(
            r#"{ACQUIRED}
{{:type :invoke :process 1 :f :claim :value {{:key "k" :body "{claim_body}"}}}}
{{:type :ok :process 1 :f :claim :value {{:key "k" :body "{claim_body}" :outcome :{outcome}}}}}"#
        )
    }

    #[test]
    fn refusing_another_body_and_replaying_the_same_pass() {
        for (body, outcome) in [
            ("b2", "fingerprint-mismatch"),
            ("b2", "fingerprint-unverifiable"),
            ("b1", "in-progress"),
            ("b1", "completed"),
            ("b1", "fingerprint-unverifiable"),
        ] {
            assert_validity(
                &run(&Fingerprint, &then(body, outcome), None),
                Validity::Valid,
            );
        }
    }

    #[test]
    fn flags_an_accepted_mismatch() {
        for outcome in ["in-progress", "completed", "taken-over"] {
            let r = run(&Fingerprint, &then("b2", outcome), None);
            assert_eq!(anomaly_types(&r), ["accepted-mismatch"], "{outcome}");
        }
    }

    #[test]
    fn flags_a_mismatch_for_the_same_request() {
        let r = run(&Fingerprint, &then("b1", "fingerprint-mismatch"), None);
        assert_eq!(anomaly_types(&r), ["mismatch-on-same-request"]);
    }

    #[test]
    fn without_an_acknowledged_acquisition_accepted_bodies_must_agree() {
        let h = r#"
{:type :invoke :process 0 :f :claim :value {:key "k" :body "b1"}}
{:type :info :process 0 :f :claim :value {:key "k" :body "b1"} :error :timeout}
{:type :invoke :process 1 :f :claim :value {:key "k" :body "b1"}}
{:type :ok :process 1 :f :claim :value {:key "k" :body "b1" :outcome :in-progress}}
{:type :invoke :process 2 :f :claim :value {:key "k" :body "b2"}}
{:type :ok :process 2 :f :claim :value {:key "k" :body "b2" :outcome :in-progress}}"#;
        assert_eq!(
            anomaly_types(&run(&Fingerprint, h, None)),
            ["accepted-mismatch"]
        );
    }
}
