//! `fencing`: a stale fence is never applied.
//!
//! Every acquisition hands out a larger fence, and every mutation by a worker carries its fence,
//! so that a worker whose lease was taken over (paused, partitioned, slow) cannot act on the key
//! any more. Per key:
//! - once a claim returning fence f2 (acquired or taken over) has completed `:ok`, a `:complete`
//!   or `:call` carrying a fence f1 < f2 that is invoked afterwards must not complete `:ok`
//!   (`stale-fence-applied`);
//! - no two acknowledged acquisitions share a fence (`duplicate-fence`);
//! - an acquisition that begins after another one was acknowledged gets a larger fence
//!   (`fence-regressed`): fences only grow.

use serde_json::json;

use super::{by_key, CheckInput, Checker, CheckerResult};
use crate::history::{Operation, F};

/// The fencing checker.
#[derive(Debug, Clone, Copy, Default)]
pub struct Fencing;

impl Checker for Fencing {
    fn name(&self) -> &'static str {
        "fencing"
    }

    fn check(&self, input: &CheckInput<'_>) -> CheckerResult {
        let mut result = CheckerResult::new();
        for (key, ops) in by_key(input.operations) {
            let owners: Vec<&Operation> = ops
                .iter()
                .copied()
                .filter(|op| op.is_owning_claim() && op.fence.is_some())
                .collect();
            result.add("acquisitions", owners.len() as u64);
            check_owners(key, &owners, &mut result);
            for op in ops
                .iter()
                .filter(|op| matches!(op.f, F::Complete | F::Call))
            {
                check_mutation(key, op, &owners, &mut result);
            }
        }
        result
    }
}

fn check_owners(key: &str, owners: &[&Operation], result: &mut CheckerResult) {
    for (i, a) in owners.iter().enumerate() {
        for b in &owners[i + 1..] {
            let kind = if a.fence == b.fence {
                "duplicate-fence"
            } else if (a.precedes(b) && b.fence < a.fence) || (b.precedes(a) && a.fence < b.fence) {
                "fence-regressed"
            } else {
                continue;
            };
            result.anomaly(json!({
                "type": kind,
                "key": key,
                "first": a.describe(),
                "second": b.describe(),
            }));
        }
    }
}

fn check_mutation(key: &str, op: &Operation, owners: &[&Operation], result: &mut CheckerResult) {
    let Some(fence) = op.fence else {
        result.add("unfenced-mutations", 1);
        return;
    };
    let newer = owners
        .iter()
        .filter(|claim| claim.precedes(op) && claim.fence > Some(fence))
        .max_by_key(|claim| claim.fence);
    let Some(newer) = newer else {
        result.add("current-fence-mutations", 1);
        return;
    };
    if !op.is_ok() {
        result.add("stale-fence-rejected", 1);
        return;
    }
    result.anomaly(json!({
        "type": "stale-fence-applied",
        "key": key,
        "fence": fence,
        "newer-fence": newer.fence,
        "newer-claim": newer.describe(),
        "op": op.describe(),
    }));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::test_support::{anomaly_types, assert_validity, run};
    use crate::checker::Validity;

    /// Worker 0 holds fence 1; worker 1 takes over with fence 2; then worker 0 acts.
    fn takeover_then(kind: &str, f: &str) -> String {
        format!(
            r#"
{{:type :invoke :process 0 :f :claim :value {{:key "k" :body "b"}}}}
{{:type :ok :process 0 :f :claim :value {{:key "k" :body "b" :outcome :acquired :fence 1}}}}
{{:type :invoke :process 1 :f :claim :value {{:key "k" :body "b"}}}}
{{:type :ok :process 1 :f :claim :value {{:key "k" :body "b" :outcome :taken-over :fence 2}}}}
{{:type :invoke :process 0 :f :{f} :value {{:key "k" :fence 1 :result "r"}}}}
{{:type :{kind} :process 0 :f :{f} :value {{:key "k" :fence 1 :result "r"}} :error :stale-fence}}"#
        )
    }

    #[test]
    fn rejected_or_unknown_stale_mutations_pass() {
        for kind in ["fail", "info"] {
            for f in ["complete", "call"] {
                let r = run(&Fencing, &takeover_then(kind, f), None);
                assert_validity(&r, Validity::Valid);
            }
        }
    }

    #[test]
    fn flags_an_applied_stale_fence() {
        for f in ["complete", "call"] {
            let r = run(&Fencing, &takeover_then("ok", f), None);
            assert_eq!(anomaly_types(&r), ["stale-fence-applied"]);
        }
    }

    #[test]
    fn a_stale_fence_racing_the_takeover_is_allowed() {
        let h = r#"
{:type :invoke :process 0 :f :claim :value {:key "k" :body "b"}}
{:type :ok :process 0 :f :claim :value {:key "k" :body "b" :outcome :acquired :fence 1}}
{:type :invoke :process 1 :f :claim :value {:key "k" :body "b"}}
{:type :invoke :process 0 :f :call :value {:key "k" :fence 1}}
{:type :ok :process 1 :f :claim :value {:key "k" :body "b" :outcome :taken-over :fence 2}}
{:type :ok :process 0 :f :call :value {:key "k" :fence 1}}"#;
        assert_validity(&run(&Fencing, h, None), Validity::Valid);
    }

    #[test]
    fn flags_duplicate_and_regressed_fences() {
        let h = r#"
{:type :invoke :process 0 :f :claim :value {:key "k" :body "b"}}
{:type :ok :process 0 :f :claim :value {:key "k" :body "b" :outcome :acquired :fence 3}}
{:type :invoke :process 1 :f :claim :value {:key "k" :body "b"}}
{:type :ok :process 1 :f :claim :value {:key "k" :body "b" :outcome :taken-over :fence 3}}
{:type :invoke :process 2 :f :claim :value {:key "k" :body "b"}}
{:type :ok :process 2 :f :claim :value {:key "k" :body "b" :outcome :taken-over :fence 2}}"#;
        let r = run(&Fencing, h, None);
        assert_eq!(
            anomaly_types(&r),
            ["duplicate-fence", "fence-regressed", "fence-regressed"]
        );
    }
}
