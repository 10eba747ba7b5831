//! A `ClaimRequest`, decoded: the record, the attempt's holder, the request's fingerprints
//! (computed here when the client sent a canonical request) and the policy overrides.

use idem_core::fingerprint::Fingerprint;
use idem_core::{Holder, RecordKey};
use idem_proto::reason;
use idem_proto::v1 as pb;

use super::fields::{self, BodyLimits};
use crate::api::observe::record_key_hash;
use crate::backend::RequestError;
use crate::policy::Overrides;

/// Bodies above this size are fingerprinted on a blocking thread.
const INLINE_BODY_BYTES: usize = 16 * 1024;

/// A validated claim.
#[derive(Debug)]
pub struct ClaimInput {
    /// The record claimed.
    pub target: RecordKey,
    /// The attempt's holder.
    pub holder: Holder,
    /// 1–4 fingerprints, the first stored on a new record.
    pub fingerprints: Vec<Fingerprint>,
    /// What the client asked of the endpoint's policy.
    pub overrides: Overrides,
}

/// Decodes a claim; fingerprints a canonical request within `limits`.
pub async fn claim(req: pb::ClaimRequest, limits: BodyLimits) -> Result<ClaimInput, RequestError> {
    let target = fields::record_key(req.scope, req.key)?;
    record_key_hash(&target.key);
    if req.holder.is_empty() {
        return Err(RequestError::argument(
            "holder is required: a unique id per worker attempt (the SDK generates one)",
        ));
    }
    let holder = Holder::new(req.holder)?;
    let fingerprints = fingerprints(req.fingerprints, req.request, limits).await?;
    let overrides = Overrides {
        lease: req.lease_ms.map(fields::duration_from_ms),
        retention: req.retention_ms.map(fields::duration_from_ms),
        risk: fields::risk(req.risk)?,
        max_result_bytes: req.max_result_bytes,
    };
    Ok(ClaimInput {
        target,
        holder,
        fingerprints,
        overrides,
    })
}

/// The fingerprints sent, or the one computed from the canonical request: exactly one of
/// the two must be present.
async fn fingerprints(
    sent: Vec<pb::Fingerprint>,
    request: Option<pb::CanonicalRequest>,
    limits: BodyLimits,
) -> Result<Vec<Fingerprint>, RequestError> {
    match (sent.is_empty(), request) {
        (false, Some(_)) => Err(RequestError::invalid(
            reason::INVALID_FINGERPRINT,
            "set either fingerprints or request, not both",
        )),
        (false, None) => fields::fingerprints(sent),
        (true, Some(request)) => Ok(vec![canonical(request, limits).await?]),
        (true, None) => Err(RequestError::invalid(
            reason::INVALID_FINGERPRINT,
            "a claim needs fingerprints or a canonical request",
        )),
    }
}

/// Computes `jcs-sha256/v1` of a canonical request; large bodies off the async threads.
async fn canonical(
    request: pb::CanonicalRequest,
    limits: BodyLimits,
) -> Result<Fingerprint, RequestError> {
    let size = request.body_json.as_ref().map_or(0, Vec::len);
    if size <= INLINE_BODY_BYTES || size > limits.max_body_bytes {
        return fields::canonical_fingerprint(request, limits);
    }
    tokio::task::spawn_blocking(move || fields::canonical_fingerprint(request, limits))
        .await
        .map_err(|e| RequestError::Internal(format!("fingerprint task failed: {e}")))?
}
