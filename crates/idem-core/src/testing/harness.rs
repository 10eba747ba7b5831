//! A small driver around [`apply()`](crate::apply()): a clock, named workers and short assertions.

use std::time::Duration;

use crate::apply;
use crate::command::{
    Claim, Command, Complete, ExternalCall, Fail, Fenced, RecordExternalCall, Renew,
};
use crate::fingerprint::{Fingerprint, JCS_SHA256_V1};
use crate::key::IdempotencyKey;
use crate::operation_id::OperationId;
use crate::outcome::{ClaimKind, ClaimOutcome, Outcome, Rejection};
use crate::policy::Policy;
use crate::record::{ErrorSummary, Holder, Record, RecordKey, StoredResult};
use crate::scope::Scope;
use crate::store::StateStore;
use crate::time::Timestamp;

/// Request body of the "same request" in scenarios.
pub const BODY_A: u8 = 0xA;
/// Request body of a "different request" under the same key.
pub const BODY_B: u8 = 0xB;

/// Drives a store with a manual clock.
pub struct Harness<S: StateStore> {
    /// The store under test.
    pub store: S,
    /// The stamp the next command gets (milliseconds).
    pub now: u64,
    /// The policy new claims carry.
    pub policy: Policy,
    next_operation: u128,
}

impl<S: StateStore> Harness<S> {
    /// A harness at t = 1_000_000 ms with the default policy.
    pub fn new(store: S) -> Self {
        Harness {
            store,
            now: 1_000_000,
            policy: Policy::default(),
            next_operation: 1,
        }
    }

    /// Moves the clock forward.
    pub fn advance(&mut self, by: Duration) {
        self.now += u64::try_from(by.as_millis()).unwrap();
    }

    /// Applies a command at the current stamp.
    pub fn apply(&mut self, command: Command) -> Outcome {
        apply(&mut self.store, &command, Timestamp(self.now)).expect("storage works")
    }

    /// The record key for `key` in the default scope.
    pub fn target(key: &str) -> RecordKey {
        Self::target_for("acme", "user-1", key)
    }

    /// The record key for `key` in tenant `tenant`, actor `actor`.
    pub fn target_for(tenant: &str, actor: &str, key: &str) -> RecordKey {
        let scope = Scope::new(tenant, "live", actor, "POST /v1/charges").unwrap();
        RecordKey::new(scope, IdempotencyKey::new(key).unwrap())
    }

    /// A `jcs-sha256/v1` fingerprint whose digest is 32 copies of `body`.
    pub fn fingerprint(body: u8) -> Fingerprint {
        Fingerprint {
            algorithm: JCS_SHA256_V1.into(),
            schema_version: 1,
            digest: vec![body; 32],
        }
    }

    /// The claim command `holder` sends for `key` with request `body`.
    pub fn claim_command(&mut self, key: &RecordKey, body: u8, holder: &str) -> Command {
        let operation_id = OperationId::from_bytes(self.next_operation.to_be_bytes());
        self.next_operation += 1;
        Command::Claim(Claim {
            target: key.clone(),
            fingerprints: vec![Self::fingerprint(body)],
            policy: self.policy.clone(),
            holder: Holder::new(holder).unwrap(),
            operation_id,
        })
    }

    /// Claims `key` with `body` as `holder`.
    pub fn claim(&mut self, key: &RecordKey, body: u8, holder: &str) -> ClaimOutcome {
        let command = self.claim_command(key, body, holder);
        match self.apply(command) {
            Outcome::Claim(outcome) => outcome,
            other => panic!("claim answered {other:?}"),
        }
    }

    /// Claims and asserts the kind.
    pub fn claim_expect(
        &mut self,
        key: &RecordKey,
        body: u8,
        holder: &str,
        kind: ClaimKind,
    ) -> ClaimOutcome {
        let outcome = self.claim(key, body, holder);
        assert_eq!(outcome.kind, kind, "claim by {holder}: {outcome:?}");
        outcome
    }

    /// Acquires `key` as `holder` and returns the fence.
    pub fn acquire(&mut self, key: &RecordKey, holder: &str) -> u64 {
        let outcome = self.claim(key, BODY_A, holder);
        assert!(outcome.kind.owns(), "{holder} could not own: {outcome:?}");
        outcome.record.fence
    }

    /// A worker reference.
    pub fn owner(key: &RecordKey, fence: u64) -> Fenced {
        Fenced {
            target: key.clone(),
            fence,
        }
    }

    /// A result with one field.
    pub fn result(resource: &str) -> StoredResult {
        StoredResult {
            status_code: 201,
            resource_id: resource.into(),
            resource_version: "1".into(),
            fields: [("amount".to_string(), "1000".to_string())].into(),
            purged: false,
            body: None,
        }
    }

    /// An error summary.
    pub fn error(code: &str) -> ErrorSummary {
        ErrorSummary {
            code: code.into(),
            message: format!("{code} happened"),
        }
    }

    /// Start.
    pub fn start(&mut self, key: &RecordKey, fence: u64) -> Outcome {
        self.apply(Command::Start(Self::owner(key, fence)))
    }

    /// Record CALLING.
    pub fn calling(&mut self, key: &RecordKey, fence: u64) -> Outcome {
        self.apply(Command::RecordExternalCall(RecordExternalCall {
            owner: Self::owner(key, fence),
            call: ExternalCall::Calling,
        }))
    }

    /// Record REMOTE_CONFIRMED.
    pub fn confirmed(&mut self, key: &RecordKey, fence: u64, remote_ref: &str) -> Outcome {
        self.apply(Command::RecordExternalCall(RecordExternalCall {
            owner: Self::owner(key, fence),
            call: ExternalCall::RemoteConfirmed {
                remote_ref: remote_ref.into(),
            },
        }))
    }

    /// Renew.
    pub fn renew(&mut self, key: &RecordKey, fence: u64, lease: Option<Duration>) -> Outcome {
        self.apply(Command::Renew(Renew {
            owner: Self::owner(key, fence),
            lease,
        }))
    }

    /// Complete with `result`.
    pub fn complete(&mut self, key: &RecordKey, fence: u64, result: StoredResult) -> Outcome {
        self.apply(Command::Complete(Complete {
            owner: Self::owner(key, fence),
            result,
        }))
    }

    /// Fail.
    pub fn fail(&mut self, key: &RecordKey, fence: u64, retryable: bool) -> Outcome {
        self.apply(Command::Fail(Fail {
            owner: Self::owner(key, fence),
            retryable,
            error: Self::error(if retryable {
                "upstream_503"
            } else {
                "declined"
            }),
        }))
    }

    /// Release.
    pub fn release(&mut self, key: &RecordKey, fence: u64) -> Outcome {
        self.apply(Command::Release(Self::owner(key, fence)))
    }

    /// Cancel.
    pub fn cancel(&mut self, key: &RecordKey, fence: u64) -> Outcome {
        self.apply(Command::Cancel(Self::owner(key, fence)))
    }

    /// The stored record.
    pub fn record(&self, key: &RecordKey) -> Option<Record> {
        self.store.record(key).unwrap()
    }
}

/// Asserts a successful worker command and returns the record.
pub fn updated(outcome: Outcome) -> Record {
    match outcome {
        Outcome::Record(record) => record,
        other => panic!("expected an updated record, got {other:?}"),
    }
}

/// Asserts a rejection with the given reason.
pub fn rejected(outcome: Outcome, reason: &str) -> Rejection {
    match outcome {
        Outcome::Rejected(rejection) => {
            assert_eq!(rejection.reason(), reason, "{rejection:?}");
            rejection
        }
        other => panic!("expected {reason}, got {other:?}"),
    }
}
