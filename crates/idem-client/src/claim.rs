//! Claims: the request builder and the typed answer.
//!
//! A claim is the one call every protected operation starts with. The builder makes the two
//! easy mistakes hard: the fingerprint is computed from the parsed request by the same code
//! as the server's (`jcs-sha256/v1`, [`ClaimRequest::for_request`]), and the holder is
//! generated once per claim (see [`crate::holder`]), so that the SDK's retries of a claim
//! whose answer was lost get the ownership back instead of `IN_PROGRESS`.
//!
//! The answer is a [`Claim`] whose [`ClaimOutcome`] carries exactly the fields that outcome
//! defines: the fence only when the caller owns the record, the result only when there is one
//! to replay.

use std::time::Duration;

use idem_core::fingerprint::{CanonicalRequest, Fingerprint};
use idem_core::{
    ClaimKind, ErrorSummary, Holder, OperationId, RecordKey, Risk, Stage, State, StoredResult,
    Timestamp,
};
use idem_proto::v1;

use crate::convert::{self, millis};
use crate::error::ClientError;
use crate::holder;

/// A record's identity: its scope and idempotency key. Every worker command names its target.
pub type Target = RecordKey;

/// How the claim identifies "the same request".
#[derive(Clone, Debug, PartialEq)]
enum Identity {
    /// Fingerprints computed by the caller (1 to 4, one per algorithm).
    Fingerprints(Vec<Fingerprint>),
    /// The canonical request, for the server to fingerprint.
    Canonical(v1::CanonicalRequest),
}

/// A claim to send with [`crate::Client::claim`].
///
/// ```
/// use idem_client::ClaimRequest;
/// use idem_core::fingerprint::CanonicalRequest;
/// use idem_core::{IdempotencyKey, RecordKey, Risk, Scope};
/// use std::time::Duration;
///
/// let scope = Scope::new("acme", "prod", "user-42", "POST /v1/charges")?;
/// let target = RecordKey::new(scope, IdempotencyKey::new("order-7f3a")?);
/// let request = CanonicalRequest::new("POST", "/v1/charges")?
///     .with_json_body(r#"{"amount": 100, "currency": "EUR"}"#);
/// let claim = ClaimRequest::for_request(target, &request, 1)?
///     .risk(Risk::High)
///     .lease(Duration::from_secs(30));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct ClaimRequest {
    target: Target,
    identity: Identity,
    risk: Option<Risk>,
    lease: Option<Duration>,
    retention: Option<Duration>,
    max_result_bytes: Option<u32>,
    holder: Option<Holder>,
}

impl ClaimRequest {
    /// A claim carrying `jcs-sha256/v1` of `request`, computed here (the SDK path).
    pub fn for_request(
        target: Target,
        request: &CanonicalRequest,
        schema_version: u32,
    ) -> Result<Self, ClientError> {
        let fingerprint = request.fingerprint(schema_version)?;
        Ok(Self::with_fingerprints(target, vec![fingerprint]))
    }

    /// A claim carrying fingerprints computed by the caller: one per algorithm, the first is
    /// stored with a new record (send the old and the new one during an algorithm upgrade).
    pub fn with_fingerprints(target: Target, fingerprints: Vec<Fingerprint>) -> Self {
        Self::new(target, Identity::Fingerprints(fingerprints))
    }

    /// A claim carrying the canonical request itself, for the server to fingerprint.
    pub fn server_hashed(
        target: Target,
        request: &CanonicalRequest,
        schema_version: u32,
    ) -> Result<Self, ClientError> {
        let wire = convert::canonical_request_to_proto(request, schema_version)?;
        Ok(Self::new(target, Identity::Canonical(wire)))
    }

    fn new(target: Target, identity: Identity) -> Self {
        ClaimRequest {
            target,
            identity,
            risk: None,
            lease: None,
            retention: None,
            max_result_bytes: None,
            holder: None,
        }
    }

    /// The risk class of a new record (default: the endpoint policy).
    #[must_use]
    pub fn risk(mut self, risk: Risk) -> Self {
        self.risk = Some(risk);
        self
    }

    /// The lease duration of a new record (default: the endpoint policy, 30 s).
    #[must_use]
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = Some(lease);
        self
    }

    /// The retention after a terminal state of a new record (default: the policy, 24 h).
    #[must_use]
    pub fn retention(mut self, retention: Duration) -> Self {
        self.retention = Some(retention);
        self
    }

    /// The result size limit of a new record (default: the policy, 16 KiB).
    #[must_use]
    pub fn max_result_bytes(mut self, bytes: u32) -> Self {
        self.max_result_bytes = Some(bytes);
        self
    }

    /// The holder identity of this attempt (default: generated, unique per claim). Reuse a
    /// holder only to re-send the same attempt's claim.
    #[must_use]
    pub fn holder(mut self, holder: Holder) -> Self {
        self.holder = Some(holder);
        self
    }

    /// The record this claim targets.
    pub fn target(&self) -> &Target {
        &self.target
    }

    /// The wire request, with the given holder, and that holder.
    pub(crate) fn into_proto(self) -> (v1::ClaimRequest, Holder) {
        let holder = self.holder.unwrap_or_else(holder::generate);
        let (fingerprints, request) = match self.identity {
            Identity::Fingerprints(f) => {
                (f.iter().map(convert::fingerprint_to_proto).collect(), None)
            }
            Identity::Canonical(r) => (Vec::new(), Some(r)),
        };
        let wire = v1::ClaimRequest {
            scope: Some(convert::scope_to_proto(&self.target.scope)),
            key: self.target.key.as_str().to_owned(),
            fingerprints,
            request,
            risk: self
                .risk
                .map_or(v1::Risk::Unspecified, convert::risk_to_proto) as i32,
            lease_ms: self.lease.map(millis),
            retention_ms: self.retention.map(millis),
            holder: holder.as_str().to_owned(),
            max_result_bytes: self.max_result_bytes,
        };
        (wire, holder)
    }
}

/// What a claim decided, with the fields that decision defines.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClaimOutcome {
    /// First claim: the caller owns the new record.
    Acquired {
        /// The fence to send with every worker command.
        fence: u64,
        /// When the caller's lease expires.
        lease_expires_at: Option<Timestamp>,
        /// True when this was a re-send of the caller's own claim (same holder) that got
        /// the existing ownership back.
        redelivered: bool,
    },
    /// The previous owner's lease expired, it released, or it failed retryably: the caller
    /// owns the record now.
    TakenOver {
        /// The fence to send with every worker command.
        fence: u64,
        /// How far the previous attempt got; `Some(Stage::Calling)` means its external call
        /// may have happened: ask the downstream about the operation id first. `None` when
        /// the server did not say (treat as unknown).
        previous_stage: Option<Stage>,
        /// The downstream's reference when the previous stage was `REMOTE_CONFIRMED`.
        remote_ref: Option<String>,
        /// When the caller's lease expires.
        lease_expires_at: Option<Timestamp>,
        /// True when this was a re-send of the caller's own claim.
        redelivered: bool,
    },
    /// Someone else holds a live lease.
    InProgress {
        /// Suggested wait before looking again.
        retry_after: Duration,
        /// When the other holder's lease expires.
        lease_expires_at: Option<Timestamp>,
    },
    /// A result is stored: replay it.
    Completed {
        /// The stored result.
        result: StoredResult,
    },
    /// A terminal failure is stored, or the operation was cancelled.
    Failed {
        /// The stored error (`None` for a cancelled record).
        error: Option<ErrorSummary>,
        /// `TERMINAL_FAILURE` or `CANCELLED`.
        state: State,
    },
    /// The key was used for a different request; the record is untouched.
    FingerprintMismatch,
    /// The claim carried no fingerprint of the record's algorithm.
    FingerprintUnverifiable {
        /// The algorithm the record was stored with.
        required_algorithm: String,
    },
    /// The outcome of a HIGH-risk external call is unknown; an operator decides.
    NeedsReconciliation,
}

impl ClaimOutcome {
    /// The kind of outcome (its API name is [`ClaimKind::name`], e.g. `TAKEN_OVER`).
    pub fn kind(&self) -> ClaimKind {
        match self {
            ClaimOutcome::Acquired { .. } => ClaimKind::Acquired,
            ClaimOutcome::TakenOver { .. } => ClaimKind::TakenOver,
            ClaimOutcome::InProgress { .. } => ClaimKind::InProgress,
            ClaimOutcome::Completed { .. } => ClaimKind::Completed,
            ClaimOutcome::Failed { .. } => ClaimKind::Failed,
            ClaimOutcome::FingerprintMismatch => ClaimKind::FingerprintMismatch,
            ClaimOutcome::FingerprintUnverifiable { .. } => ClaimKind::FingerprintUnverifiable,
            ClaimOutcome::NeedsReconciliation => ClaimKind::NeedsReconciliation,
        }
    }

    /// The fence when the caller owns the record (`ACQUIRED`, `TAKEN_OVER`).
    pub fn fence(&self) -> Option<u64> {
        match self {
            ClaimOutcome::Acquired { fence, .. } | ClaimOutcome::TakenOver { fence, .. } => {
                Some(*fence)
            }
            _ => None,
        }
    }
}

/// The answer to a claim.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Claim {
    /// What the claim decided.
    pub outcome: ClaimOutcome,
    /// The record's operation id (every outcome): the downstream's idempotency key.
    pub operation_id: OperationId,
    /// The record's state after the claim.
    pub state: State,
    /// The record's stage after the claim.
    pub stage: Stage,
    /// The record's version after the claim.
    pub version: u64,
    /// Number of acquisitions so far.
    pub attempts: u32,
    /// The holder this claim was sent with (generated unless given).
    pub holder: Holder,
    /// The record the claim targeted.
    pub target: Target,
}

impl Claim {
    /// The fence when the caller owns the record.
    pub fn fence(&self) -> Option<u64> {
        self.outcome.fence()
    }

    /// True when the caller owns the record and must run the operation.
    pub fn owns(&self) -> bool {
        self.outcome.kind().owns()
    }

    /// Builds the typed answer from the wire response.
    pub(crate) fn from_proto(
        response: v1::ClaimResponse,
        holder: Holder,
        target: Target,
    ) -> Result<Self, ClientError> {
        let kind = convert::claim_kind_from_proto(response.outcome)?;
        let state = convert::state_from_proto(response.state)?;
        Ok(Claim {
            operation_id: response
                .operation_id
                .parse()
                .map_err(|e| ClientError::invalid_response(format!("operation id: {e}")))?,
            stage: convert::stage_from_proto(response.stage)?,
            version: response.version,
            attempts: response.attempts,
            outcome: outcome_from_proto(kind, state, response)?,
            state,
            holder,
            target,
        })
    }
}

fn outcome_from_proto(
    kind: ClaimKind,
    state: State,
    r: v1::ClaimResponse,
) -> Result<ClaimOutcome, ClientError> {
    let lease_expires_at = (r.lease_expires_at_ms != 0).then_some(Timestamp(r.lease_expires_at_ms));
    let owned_fence = || {
        (r.fence != 0)
            .then_some(r.fence)
            .ok_or_else(|| ClientError::invalid_response("owned claim without fence"))
    };
    Ok(match kind {
        ClaimKind::Acquired => ClaimOutcome::Acquired {
            fence: owned_fence()?,
            lease_expires_at,
            redelivered: r.redelivered,
        },
        ClaimKind::TakenOver => ClaimOutcome::TakenOver {
            fence: owned_fence()?,
            previous_stage: convert::optional_stage_from_proto(r.previous_stage)?,
            remote_ref: (!r.remote_ref.is_empty()).then_some(r.remote_ref),
            lease_expires_at,
            redelivered: r.redelivered,
        },
        ClaimKind::InProgress => ClaimOutcome::InProgress {
            retry_after: Duration::from_millis(r.retry_after_ms),
            lease_expires_at,
        },
        ClaimKind::Completed => {
            ClaimOutcome::Completed {
                result: convert::result_from_proto(r.result.ok_or_else(|| {
                    ClientError::invalid_response("COMPLETED claim without result")
                })?)?,
            }
        }
        ClaimKind::Failed => ClaimOutcome::Failed {
            error: r.error.map(convert::error_from_proto),
            state,
        },
        ClaimKind::FingerprintMismatch => ClaimOutcome::FingerprintMismatch,
        ClaimKind::FingerprintUnverifiable => ClaimOutcome::FingerprintUnverifiable {
            required_algorithm: r.required_algorithm,
        },
        ClaimKind::NeedsReconciliation => ClaimOutcome::NeedsReconciliation,
    })
}

#[cfg(test)]
mod tests {
    use idem_core::{IdempotencyKey, Scope};

    use super::*;

    fn target() -> Target {
        let scope = Scope::new("acme", "prod", "user-42", "POST /v1/charges").unwrap();
        RecordKey::new(scope, IdempotencyKey::new("k1").unwrap())
    }

    fn response(outcome: v1::ClaimOutcome) -> v1::ClaimResponse {
        v1::ClaimResponse {
            outcome: outcome as i32,
            operation_id: "0190f1c2-7d3e-7a4b-9c1d-2e3f4a5b6c7d".into(),
            state: v1::State::Pending as i32,
            stage: v1::Stage::NotCalled as i32,
            version: 1,
            attempts: 1,
            ..Default::default()
        }
    }

    fn decode(r: v1::ClaimResponse) -> Result<Claim, ClientError> {
        Claim::from_proto(r, Holder::new("h").unwrap(), target())
    }

    #[test]
    fn builder_computes_fingerprint_and_generates_holder() {
        let request = CanonicalRequest::new("POST", "/v1/charges")
            .unwrap()
            .with_json_body(r#"{"b":1,"a":2}"#);
        let claim = ClaimRequest::for_request(target(), &request, 1)
            .unwrap()
            .risk(Risk::High)
            .lease(Duration::from_millis(1500))
            .retention(Duration::from_secs(60));
        let (wire, holder) = claim.clone().into_proto();
        assert_eq!(wire.fingerprints.len(), 1);
        assert_eq!(wire.fingerprints[0].algorithm, "jcs-sha256/v1");
        assert_eq!(
            wire.fingerprints[0].digest,
            request.fingerprint(1).unwrap().digest
        );
        assert_eq!(wire.request, None);
        assert_eq!(wire.risk, v1::Risk::High as i32);
        assert_eq!(wire.lease_ms, Some(1500));
        assert_eq!(wire.retention_ms, Some(60_000));
        assert_eq!(wire.max_result_bytes, None);
        assert_eq!(wire.holder, holder.as_str());
        assert_eq!(wire.key, "k1");
        // Each claim gets its own holder unless one is given.
        let (again, _) = claim.clone().into_proto();
        assert_ne!(again.holder, wire.holder);
        let fixed = claim.holder(Holder::new("me-1").unwrap());
        assert_eq!(fixed.into_proto().0.holder, "me-1");

        let server = ClaimRequest::server_hashed(target(), &request, 3).unwrap();
        let (wire, _) = server.into_proto();
        assert!(wire.fingerprints.is_empty());
        assert_eq!(wire.request.unwrap().schema_version, 3);
        assert_eq!(wire.risk, v1::Risk::Unspecified as i32);
    }

    #[test]
    fn bad_body_is_an_invalid_argument() {
        let request = CanonicalRequest::new("POST", "/x")
            .unwrap()
            .with_json_body("{oops");
        let err = ClaimRequest::for_request(target(), &request, 1).unwrap_err();
        assert_eq!(err.reason(), "INVALID_ARGUMENT");
    }

    #[test]
    fn outcomes_decode() {
        let mut r = response(v1::ClaimOutcome::Acquired);
        r.fence = 4;
        r.lease_expires_at_ms = 9;
        let claim = decode(r).unwrap();
        assert_eq!(claim.fence(), Some(4));
        assert!(claim.owns());
        assert_eq!(
            claim.outcome,
            ClaimOutcome::Acquired {
                fence: 4,
                lease_expires_at: Some(Timestamp(9)),
                redelivered: false
            }
        );

        let mut r = response(v1::ClaimOutcome::TakenOver);
        r.fence = 5;
        r.previous_stage = v1::Stage::RemoteConfirmed as i32;
        r.remote_ref = "ch_1".into();
        let outcome = decode(r).unwrap().outcome;
        assert_eq!(
            outcome,
            ClaimOutcome::TakenOver {
                fence: 5,
                previous_stage: Some(Stage::RemoteConfirmed),
                remote_ref: Some("ch_1".into()),
                lease_expires_at: None,
                redelivered: false
            }
        );

        let mut r = response(v1::ClaimOutcome::InProgress);
        r.retry_after_ms = 250;
        let claim = decode(r).unwrap();
        assert_eq!(claim.fence(), None);
        assert_eq!(
            claim.outcome,
            ClaimOutcome::InProgress {
                retry_after: Duration::from_millis(250),
                lease_expires_at: None
            }
        );

        let mut r = response(v1::ClaimOutcome::Completed);
        r.state = v1::State::Completed as i32;
        r.result = Some(v1::StoredResult {
            status_code: 201,
            resource_id: "ch_1".into(),
            ..Default::default()
        });
        match decode(r).unwrap().outcome {
            ClaimOutcome::Completed { result } => assert_eq!(result.status_code, 201),
            other => panic!("{other:?}"),
        }

        let mut r = response(v1::ClaimOutcome::Failed);
        r.state = v1::State::Cancelled as i32;
        assert_eq!(
            decode(r).unwrap().outcome,
            ClaimOutcome::Failed {
                error: None,
                state: State::Cancelled
            }
        );

        let mut r = response(v1::ClaimOutcome::FingerprintUnverifiable);
        r.required_algorithm = "jcs-sha256/v1".into();
        assert_eq!(
            decode(r).unwrap().outcome.kind().name(),
            "FINGERPRINT_UNVERIFIABLE"
        );
        assert_eq!(
            decode(response(v1::ClaimOutcome::FingerprintMismatch))
                .unwrap()
                .outcome,
            ClaimOutcome::FingerprintMismatch
        );
    }

    #[test]
    fn malformed_responses_are_invalid() {
        // Owned without a fence, COMPLETED without a result, no outcome at all.
        for r in [
            response(v1::ClaimOutcome::Acquired),
            response(v1::ClaimOutcome::Completed),
            response(v1::ClaimOutcome::Unspecified),
        ] {
            assert_eq!(decode(r).unwrap_err().reason(), "INVALID_RESPONSE");
        }
    }
}
