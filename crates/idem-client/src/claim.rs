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

use crate::convert;
use crate::error::ClientError;
use crate::key_warning::KeyWarning;

/// A record's identity: its scope and idempotency key. Every worker command names its target.
pub type Target = RecordKey;

/// How the claim identifies "the same request".
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Identity {
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
    pub(crate) target: Target,
    pub(crate) identity: Identity,
    pub(crate) risk: Option<Risk>,
    pub(crate) lease: Option<Duration>,
    pub(crate) retention: Option<Duration>,
    pub(crate) max_result_bytes: Option<u32>,
    pub(crate) holder: Option<Holder>,
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
    /// The server's warnings about the key (sequential, a timestamp, short, low entropy);
    /// empty for a key that looks random or when the server's `key_warnings` is off.
    /// Advisory: the outcome is the same without them. Log them, and use generated keys.
    pub warnings: Vec<KeyWarning>,
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
}

#[cfg(test)]
mod tests {
    use idem_core::{IdempotencyKey, Scope};

    use super::*;

    fn target() -> Target {
        let scope = Scope::new("acme", "prod", "user-42", "POST /v1/charges").unwrap();
        RecordKey::new(scope, IdempotencyKey::new("k1").unwrap())
    }

    #[test]
    fn bad_body_is_an_invalid_argument() {
        let request = CanonicalRequest::new("POST", "/x")
            .unwrap()
            .with_json_body("{oops");
        let err = ClaimRequest::for_request(target(), &request, 1).unwrap_err();
        assert_eq!(err.reason(), "INVALID_ARGUMENT");
    }
}
