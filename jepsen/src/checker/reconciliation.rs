//! `reconciliation`: a HIGH-risk record whose outcome is unknown is never silently retried.
//!
//! docs/semantics.md: when a HIGH-risk holder's lease expires with stage `CALLING`, the
//! record moves to `NEEDS_RECONCILIATION` and nobody takes over automatically; only an
//! (audited) reconcile moves it on — to `COMPLETED`, or to `RETRYABLE_FAILURE`, after which
//! the next claim takes over. Per key claimed with `:risk :high` (the `high-risk` workload),
//! every way of starting the effect again must be preceded by a reconcile (`:reconcile`, not
//! refused, that may have taken effect in between):
//!
//! - a takeover (claim `:ok` `:taken-over`) after an acknowledged `:call` of an older fence
//!   (`takeover-without-reconciliation`);
//! - a takeover after a claim was told `:needs-reconciliation`
//!   (`takeover-without-reconciliation`);
//! - a second execution on the ledger by a newer fence after an execution by an older one
//!   (`re-executed-without-reconciliation`): the effect started again.
//!
//! Other keys are not judged (a NORMAL-risk takeover after `CALLING` is the rule there).

use serde_json::json;

use super::{by_key, CheckInput, Checker, CheckerResult};
use crate::history::{Operation, Outcome, Status, F};
use crate::ledger::LedgerEntry;

/// The no-silent-retry checker.
#[derive(Debug, Clone, Copy, Default)]
pub struct Reconciliation;

impl Checker for Reconciliation {
    fn name(&self) -> &'static str {
        "reconciliation"
    }

    fn check(&self, input: &CheckInput<'_>) -> CheckerResult {
        let mut result = CheckerResult::new();
        for (key, ops) in by_key(input.operations) {
            if !ops.iter().any(|op| is_high_risk(op)) {
                continue;
            }
            result.add("high-risk-keys", 1);
            let reconciles: Vec<&Operation> = ops
                .iter()
                .copied()
                .filter(|op| op.f == F::Reconcile && op.status != Status::Fail)
                .collect();
            result.add("reconciles", reconciles.len() as u64);
            check_takeovers(key, &ops, &reconciles, &mut result);
            if let Some(ledger) = input.ledger {
                let executions: Vec<&LedgerEntry> =
                    ledger.entries().iter().filter(|e| e.key == key).collect();
                check_executions(key, &executions, &reconciles, &mut result);
            }
        }
        result
    }
}

fn is_high_risk(op: &Operation) -> bool {
    op.f == F::Claim && op.risk.as_deref() == Some("high")
}

/// Whether some reconcile may have taken effect after `after` (ns) and before `before` (ns):
/// invoked before `before`, not completed before `after`.
fn reconciled_between(reconciles: &[&Operation], after: i64, before: i64) -> bool {
    reconciles
        .iter()
        .any(|r| r.invoke_time < before && r.completion_time.is_none_or(|done| done > after))
}

fn check_takeovers(
    key: &str,
    ops: &[&Operation],
    reconciles: &[&Operation],
    result: &mut CheckerResult,
) {
    let takeovers = ops
        .iter()
        .filter(|op| op.is_ok() && op.outcome == Some(Outcome::TakenOver));
    for takeover in takeovers {
        result.add("takeovers", 1);
        let end = takeover.completion_time.unwrap_or(i64::MAX);
        // What made a reconcile necessary: an acknowledged CALLING of an older fence, or a
        // claim told NEEDS_RECONCILIATION, before this claim began.
        let mut needs = ops.iter().copied().filter(|op| {
            op.precedes(takeover)
                && op.is_ok()
                && match op.f {
                    F::Call => op.fence < takeover.fence,
                    F::Claim => op.outcome == Some(Outcome::NeedsReconciliation),
                    _ => false,
                }
        });
        let unreconciled =
            needs.rfind(|need| !reconciled_between(reconciles, need.invoke_time, end));
        if let Some(need) = unreconciled {
            result.anomaly(json!({
                "type": "takeover-without-reconciliation",
                "key": key,
                "unknown-outcome": need.describe(),
                "takeover": takeover.describe(),
            }));
        }
    }
}

fn check_executions(
    key: &str,
    executions: &[&LedgerEntry],
    reconciles: &[&Operation],
    result: &mut CheckerResult,
) {
    for (i, later) in executions.iter().enumerate() {
        let earlier = executions[..i]
            .iter()
            .filter(|e| e.fence < later.fence)
            .rfind(|e| !reconciled_between(reconciles, e.time, later.time));
        if let Some(earlier) = earlier {
            result.anomaly(json!({
                "type": "re-executed-without-reconciliation",
                "key": key,
                "first": {"fence": earlier.fence, "time": earlier.time, "operation-id": earlier.operation_id},
                "second": {"fence": later.fence, "time": later.time, "operation-id": later.operation_id},
            }));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::test_support::{anomaly_types, assert_validity, run};
    use crate::checker::Validity;

    /// p0 acquires (fence 1) and records CALLING, then dies; p1 is told NEEDS_RECONCILIATION;
    /// `middle` happens; p2 takes over with fence 2.
    fn history(middle: &str) -> String {
        format!(
            r#"
{{:type :invoke :process 0 :f :claim :value {{:key "k" :body "b" :risk :high}} :time 1}}
{{:type :ok :process 0 :f :claim :value {{:key "k" :body "b" :outcome :acquired :fence 1}} :time 2}}
{{:type :invoke :process 0 :f :call :value {{:key "k" :fence 1}} :time 3}}
{{:type :ok :process 0 :f :call :value {{:key "k" :fence 1}} :time 4}}
{{:type :invoke :process 1 :f :claim :value {{:key "k" :body "b" :risk :high}} :time 5}}
{{:type :ok :process 1 :f :claim :value {{:key "k" :body "b" :outcome :needs-reconciliation}} :time 6}}
{middle}
{{:type :invoke :process 2 :f :claim :value {{:key "k" :body "b" :risk :high}} :time 9}}
{{:type :ok :process 2 :f :claim :value {{:key "k" :body "b" :outcome :taken-over :fence 2}} :time 10}}"#
        )
    }

    const RECONCILED: &str = r#"
{:type :invoke :process 3 :f :reconcile :value {:key "k" :state :retryable-failure} :time 7}
{:type :ok :process 3 :f :reconcile :value {:key "k" :state :retryable-failure} :time 8}"#;

    #[test]
    fn a_takeover_after_a_reconcile_passes() {
        let r = run(&Reconciliation, &history(RECONCILED), None);
        assert_validity(&r, Validity::Valid);
        assert_eq!(r.counts["reconciles"], 1);
    }

    #[test]
    fn a_refused_reconcile_does_not_count() {
        let refused = RECONCILED.replace(":ok", ":fail");
        let r = run(&Reconciliation, &history(&refused), None);
        assert_eq!(anomaly_types(&r), ["takeover-without-reconciliation"]);
    }

    #[test]
    fn flags_a_silent_takeover() {
        let r = run(&Reconciliation, &history(""), None);
        assert_eq!(anomaly_types(&r), ["takeover-without-reconciliation"]);
    }

    #[test]
    fn normal_risk_keys_are_not_judged() {
        let r = run(
            &Reconciliation,
            &history("").replace(" :risk :high", ""),
            None,
        );
        assert_validity(&r, Validity::Valid);
    }

    #[test]
    fn flags_a_second_execution_without_a_reconcile_between() {
        let ledger = r#"
{:key "k", :operation-id "o1", :fence 1, :process 0, :time 4, :duplicate false}
{:key "k", :operation-id "o1", :fence 2, :process 2, :time 11, :duplicate true}"#;
        let r = run(&Reconciliation, &history(RECONCILED), Some(ledger));
        assert_validity(&r, Validity::Valid);
        let early = ledger.replace(":time 11", ":time 6");
        let r = run(&Reconciliation, &history(RECONCILED), Some(&early));
        assert_eq!(anomaly_types(&r), ["re-executed-without-reconciliation"]);
    }
}
