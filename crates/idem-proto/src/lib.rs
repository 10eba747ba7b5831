//! The public gRPC API of idem, package `idem.v1`, as Rust types.
//!
//! The `.proto` files in `proto/idem/v1/` are the contract; this crate is their
//! generated tonic/prost code plus the few names that server and clients must agree on
//! beyond the messages themselves:
//!
//! - [`v1`]: messages, enums, and client and server for the `idem.v1.Idempotency` and
//!   `idem.v1.Admin` services (e.g. [`v1::idempotency_client::IdempotencyClient`],
//!   [`v1::admin_server::AdminServer`]).
//! - [`FILE_DESCRIPTOR_SET`]: the encoded descriptors, for gRPC server reflection.
//! - [`raft_v1`]: the internal node-to-node Raft transport (`idem.raft.v1`, used by
//!   `idem-raft`); not part of the public API, so not in [`FILE_DESCRIPTOR_SET`].
//! - [`reason`]: the machine-readable error reasons and the metadata keys that carry them.
//! - [`status`]: building and reading a [`tonic::Status`] that carries a reason both as
//!   `google.rpc.ErrorInfo` and as plain metadata, so that the server has one way to
//!   report errors and clients one way to read them.
//! - [`convert`]: the conversions between these messages and idem-core's validated types,
//!   shared by the server and the SDK so both ends of the wire use the same rules.
//! - `testing` (feature `testing`): a fake node's `Admin` service and sample messages, for
//!   the tests of the SDK and idemctl.
//!
//! Code generation uses the protoc shipped by `protoc-bin-vendored`, never the system's.

/// Generated code of package `idem.v1` (messages, enums, clients and servers).
///
/// The documentation of each item is the comment of its `.proto` definition.
pub mod v1 {
    #![allow(missing_docs)]
    tonic::include_proto!("idem.v1");

    impl State {
        /// True for the states that never change again: `COMPLETED`, `TERMINAL_FAILURE`
        /// and `CANCELLED`.
        pub fn is_terminal(self) -> bool {
            matches!(
                self,
                State::Completed | State::TerminalFailure | State::Cancelled
            )
        }
    }
}

/// Generated code of package `idem.raft.v1`: the node-to-node Raft transport
/// (`proto/idem/v1/raft.proto`). Internal: only idem nodes speak it, on their Raft address.
///
/// Its `bytes` fields are [`prost::bytes::Bytes`], so snapshot chunks are zero-copy slices.
pub mod raft_v1 {
    #![allow(missing_docs)]
    tonic::include_proto!("idem.raft.v1");
}

/// The encoded `google.protobuf.FileDescriptorSet` of `idem.v1` (both services and
/// every message they use), for `tonic-reflection`.
pub const FILE_DESCRIPTOR_SET: &[u8] = tonic::include_file_descriptor_set!("idem_v1_descriptor");

pub mod convert;

#[cfg(feature = "testing")]
pub mod testing;

pub mod reason {
    //! Error reasons and the metadata keys that carry them.
    //!
    //! A failed call's `tonic::Status` holds a `google.rpc.ErrorInfo` whose `domain` is
    //! [`DOMAIN`] and whose `reason` is one of the constants below; the same reason is in
    //! the [`REASON_METADATA_KEY`] response metadata for clients without rich-status
    //! support. See `docs/api.md` for the full table.

    use tonic::Code;

    /// The `google.rpc.ErrorInfo` domain of every idem error.
    pub const DOMAIN: &str = "idem.v1";

    /// Response metadata key holding the reason (plain text, e.g. `STALE_FENCE`).
    pub const REASON_METADATA_KEY: &str = "idem-reason";
    /// Metadata key (response metadata and ErrorInfo metadata) with the Raft id of the
    /// leader, sent with [`NOT_LEADER`] when known.
    pub const LEADER_ID_METADATA_KEY: &str = "leader-id";
    /// Metadata key with the public API address (`host:port`) of the leader, sent with
    /// [`NOT_LEADER`] when known.
    pub const LEADER_ADDR_METADATA_KEY: &str = "leader-addr";
    /// Metadata key with a suggested wait in milliseconds before retrying, sent with
    /// [`REGION_FAILOVER`] and other "try again later" answers.
    pub const RETRY_AFTER_MS_METADATA_KEY: &str = "retry-after-ms";

    /// INVALID_ARGUMENT: the key is empty, longer than 255 bytes or has a byte outside
    /// `[A-Za-z0-9._:~-]`.
    pub const INVALID_KEY: &str = "INVALID_KEY";
    /// INVALID_ARGUMENT: a scope field is missing, too long or has a forbidden character.
    pub const INVALID_SCOPE: &str = "INVALID_SCOPE";
    /// INVALID_ARGUMENT: no fingerprint or canonical request, too many fingerprints, two
    /// of one algorithm, an unknown algorithm or a bad digest size.
    pub const INVALID_FINGERPRINT: &str = "INVALID_FINGERPRINT";
    /// INVALID_ARGUMENT: lease, retention, risk or result limit out of the allowed range.
    pub const INVALID_POLICY: &str = "INVALID_POLICY";
    /// INVALID_ARGUMENT: a stored result or error summary is malformed.
    pub const INVALID_RESULT: &str = "INVALID_RESULT";
    /// INVALID_ARGUMENT: any other malformed field.
    pub const INVALID_ARGUMENT: &str = "INVALID_ARGUMENT";
    /// INVALID_ARGUMENT: the canonical request body is above the server's limit.
    pub const BODY_TOO_LARGE: &str = "BODY_TOO_LARGE";
    /// INVALID_ARGUMENT: the result is above the record's `max_result_bytes`.
    pub const RESULT_TOO_LARGE: &str = "RESULT_TOO_LARGE";
    /// FAILED_PRECONDITION: the fence is not the record's current fence; nothing changed.
    pub const STALE_FENCE: &str = "STALE_FENCE";
    /// FAILED_PRECONDITION: the command is not allowed in the record's state.
    pub const WRONG_STATE: &str = "WRONG_STATE";
    /// FAILED_PRECONDITION: release or cancel after an external call began.
    pub const IRREVERSIBLE_STAGE: &str = "IRREVERSIBLE_STAGE";
    /// FAILED_PRECONDITION: the record is terminal and can no longer change.
    pub const ALREADY_TERMINAL: &str = "ALREADY_TERMINAL";
    /// ABORTED: the reconcile `expected_version` differs from the record's version.
    pub const VERSION_MISMATCH: &str = "VERSION_MISMATCH";
    /// NOT_FOUND: no such record.
    pub const NOT_FOUND: &str = "NOT_FOUND";
    /// UNAVAILABLE: this node cannot serve the request; see the leader metadata keys.
    pub const NOT_LEADER: &str = "NOT_LEADER";
    /// UNAVAILABLE: a write timed out; it may or may not have been applied. Retry with
    /// the same key (and holder or fence).
    pub const UNAVAILABLE_OUTCOME_UNKNOWN: &str = "UNAVAILABLE_OUTCOME_UNKNOWN";
    /// UNAVAILABLE: a HIGH-risk write is refused while the group is in region failover.
    pub const REGION_FAILOVER: &str = "REGION_FAILOVER";
    /// UNAVAILABLE: the group asked does not decide this tenant's keys (its home is
    /// changing, or the node's view of the placement was stale); retry.
    pub const WRONG_GROUP: &str = "WRONG_GROUP";
    /// NOT_FOUND: no region of that name is defined.
    pub const UNKNOWN_REGION: &str = "UNKNOWN_REGION";
    /// FAILED_PRECONDITION: the tenant has records; its home region cannot change.
    pub const TENANT_HOME_IMMUTABLE: &str = "TENANT_HOME_IMMUTABLE";
    /// FAILED_PRECONDITION: the placement change contradicts the configuration.
    pub const PLACEMENT_CONFLICT: &str = "PLACEMENT_CONFLICT";
    /// FAILED_PRECONDITION: confirming a new home needs a group in failover.
    pub const NOT_IN_FAILOVER: &str = "NOT_IN_FAILOVER";
    /// RESOURCE_EXHAUSTED: the request message is above the server's limit.
    pub const REQUEST_TOO_LARGE: &str = "REQUEST_TOO_LARGE";
    /// RESOURCE_EXHAUSTED: the tenant's rate limit for this kind of call is used up; retry
    /// after the `retry-after-ms` hint. Nothing was proposed.
    pub const RATE_LIMITED: &str = "RATE_LIMITED";
    /// RESOURCE_EXHAUSTED: the tenant has as many unfinished (non-terminal) records as its
    /// quota allows; a claim that would create another is refused. Existing records are
    /// unaffected.
    pub const QUOTA_EXCEEDED: &str = "QUOTA_EXCEEDED";
    /// RESOURCE_EXHAUSTED: the node serves as many requests as it allows at once and shed
    /// this one without running it; retry after the `retry-after-ms` hint, or elsewhere.
    pub const OVERLOADED: &str = "OVERLOADED";
    /// DEADLINE_EXCEEDED: a read did not finish before the caller's deadline
    /// (`grpc-timeout`); a write cut off by its deadline is `UNAVAILABLE_OUTCOME_UNKNOWN`.
    pub const DEADLINE_EXCEEDED: &str = "DEADLINE_EXCEEDED";
    /// INTERNAL: a bug or storage failure on the server.
    pub const INTERNAL: &str = "INTERNAL";
    /// UNAUTHENTICATED: authentication is on and the call carried no valid credential (no
    /// bearer token, an unknown or revoked one, no client certificate mapped to a principal).
    pub const UNAUTHENTICATED: &str = "UNAUTHENTICATED";
    /// PERMISSION_DENIED: the scope's (or the record's) tenant is not one of the caller's.
    /// Nothing was read or written.
    pub const TENANT_FORBIDDEN: &str = "TENANT_FORBIDDEN";
    /// PERMISSION_DENIED: the call needs a role the caller does not have (`operator` or
    /// `admin`).
    pub const ROLE_FORBIDDEN: &str = "ROLE_FORBIDDEN";
    /// FAILED_PRECONDITION: this node cannot back up every group yet (it does not run a
    /// region group the configuration names: still provisioning); retry or ask another node.
    pub const BACKUP_UNSUPPORTED: &str = "BACKUP_UNSUPPORTED";
    /// ALREADY_EXISTS: a replicated token of that name exists (`Admin.CreateToken`).
    pub const TOKEN_EXISTS: &str = "TOKEN_EXISTS";
    /// UNAVAILABLE: this node's Raft stopped (a failed fsync or write of its storage, or a
    /// shutdown) and it serves nothing until restarted; nothing was done: use another node.
    pub const NODE_STOPPED: &str = "NODE_STOPPED";
    /// RESOURCE_EXHAUSTED: the node's disk is below its reserve (`limits.disk_reserve`);
    /// writes are refused until space is freed, reads and replays still work. Nothing was
    /// proposed.
    pub const DISK_FULL: &str = "DISK_FULL";
    /// FAILED_PRECONDITION: a voter change (`PromoteMember`, `RemoveMember`) refused because
    /// a majority of the voters before or after it does not answer the leader: it could not
    /// commit, and would block every later membership change while it waits. Nothing
    /// changed.
    pub const QUORUM_AT_RISK: &str = "QUORUM_AT_RISK";

    /// Every reason with its gRPC status code.
    pub const ALL: &[(&str, Code)] = &[
        (INVALID_KEY, Code::InvalidArgument),
        (INVALID_SCOPE, Code::InvalidArgument),
        (INVALID_FINGERPRINT, Code::InvalidArgument),
        (INVALID_POLICY, Code::InvalidArgument),
        (INVALID_RESULT, Code::InvalidArgument),
        (INVALID_ARGUMENT, Code::InvalidArgument),
        (BODY_TOO_LARGE, Code::InvalidArgument),
        (RESULT_TOO_LARGE, Code::InvalidArgument),
        (STALE_FENCE, Code::FailedPrecondition),
        (WRONG_STATE, Code::FailedPrecondition),
        (IRREVERSIBLE_STAGE, Code::FailedPrecondition),
        (ALREADY_TERMINAL, Code::FailedPrecondition),
        (VERSION_MISMATCH, Code::Aborted),
        (NOT_FOUND, Code::NotFound),
        (NOT_LEADER, Code::Unavailable),
        (UNAVAILABLE_OUTCOME_UNKNOWN, Code::Unavailable),
        (REGION_FAILOVER, Code::Unavailable),
        (WRONG_GROUP, Code::Unavailable),
        (UNKNOWN_REGION, Code::NotFound),
        (TENANT_HOME_IMMUTABLE, Code::FailedPrecondition),
        (PLACEMENT_CONFLICT, Code::FailedPrecondition),
        (NOT_IN_FAILOVER, Code::FailedPrecondition),
        (REQUEST_TOO_LARGE, Code::ResourceExhausted),
        (RATE_LIMITED, Code::ResourceExhausted),
        (QUOTA_EXCEEDED, Code::ResourceExhausted),
        (OVERLOADED, Code::ResourceExhausted),
        (DEADLINE_EXCEEDED, Code::DeadlineExceeded),
        (INTERNAL, Code::Internal),
        (UNAUTHENTICATED, Code::Unauthenticated),
        (TENANT_FORBIDDEN, Code::PermissionDenied),
        (ROLE_FORBIDDEN, Code::PermissionDenied),
        (BACKUP_UNSUPPORTED, Code::FailedPrecondition),
        (TOKEN_EXISTS, Code::AlreadyExists),
        (NODE_STOPPED, Code::Unavailable),
        (DISK_FULL, Code::ResourceExhausted),
        (QUORUM_AT_RISK, Code::FailedPrecondition),
    ];

    /// The gRPC status code of a reason, or `None` for a reason this version does not
    /// know.
    pub fn code_of(reason: &str) -> Option<Code> {
        ALL.iter()
            .find(|(r, _)| *r == reason)
            .map(|(_, code)| *code)
    }
}

pub mod status {
    //! Building and reading statuses that carry an idem [`reason`].

    use std::collections::HashMap;
    use std::time::Duration;

    use tonic::metadata::{MetadataMap, MetadataValue};
    use tonic::{Code, Status};
    use tonic_types::{ErrorDetails, StatusExt};

    use crate::{reason, v1};

    /// Builds the status of an error: the reason's code (`UNKNOWN` for a reason not in
    /// [`reason::ALL`]), the message, a `google.rpc.ErrorInfo` with domain
    /// [`reason::DOMAIN`] whose metadata are `hints`, and the response metadata
    /// [`reason::REASON_METADATA_KEY`] plus every hint (e.g.
    /// [`reason::RETRY_AFTER_MS_METADATA_KEY`]). Hints whose value is not valid
    /// metadata (non-ASCII) are kept in the ErrorInfo only.
    pub fn error<'a>(
        reason: &str,
        message: impl Into<String>,
        hints: impl IntoIterator<Item = (&'a str, String)>,
    ) -> Status {
        let code = reason::code_of(reason).unwrap_or(Code::Unknown);
        let hints: HashMap<String, String> =
            hints.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
        let mut metadata = MetadataMap::new();
        if let Ok(value) = MetadataValue::try_from(reason) {
            metadata.insert(reason::REASON_METADATA_KEY, value);
        }
        for (key, value) in &hints {
            let key = tonic::metadata::AsciiMetadataKey::from_bytes(key.as_bytes());
            if let (Ok(key), Ok(value)) = (key, MetadataValue::try_from(value.as_str())) {
                metadata.insert(key, value);
            }
        }
        let details = ErrorDetails::with_error_info(reason, reason::DOMAIN, hints);
        Status::with_error_details_and_metadata(code, message, details, metadata)
    }

    /// A `NOT_LEADER` status with the leader's id and API address when known.
    pub fn not_leader(leader_id: Option<u64>, leader_addr: Option<&str>) -> Status {
        let mut hints = Vec::new();
        if let Some(id) = leader_id {
            hints.push((reason::LEADER_ID_METADATA_KEY, id.to_string()));
        }
        if let Some(addr) = leader_addr {
            hints.push((reason::LEADER_ADDR_METADATA_KEY, addr.to_owned()));
        }
        error(reason::NOT_LEADER, "not the leader", hints)
    }

    /// A status with a `retry-after-ms` hint (e.g. [`reason::REGION_FAILOVER`]).
    pub fn with_retry_after(reason: &str, message: impl Into<String>, after: Duration) -> Status {
        let ms = u64::try_from(after.as_millis()).unwrap_or(u64::MAX);
        error(
            reason,
            message,
            [(reason::RETRY_AFTER_MS_METADATA_KEY, ms.to_string())],
        )
    }

    /// The idem reason of a status: the `google.rpc.ErrorInfo` reason when its domain
    /// is [`reason::DOMAIN`], else the [`reason::REASON_METADATA_KEY`] metadata, else
    /// `None` (e.g. a transport error that never reached an idem server).
    pub fn reason_of(status: &Status) -> Option<String> {
        if let Some(info) = status.get_details_error_info() {
            if info.domain == reason::DOMAIN {
                return Some(info.reason);
            }
        }
        metadata_str(status, reason::REASON_METADATA_KEY)
    }

    /// A hint of a status by key: from the ErrorInfo metadata, else from the response
    /// metadata.
    pub fn hint(status: &Status, key: &str) -> Option<String> {
        if let Some(mut info) = status.get_details_error_info() {
            if info.domain == reason::DOMAIN {
                if let Some(value) = info.metadata.remove(key) {
                    return Some(value);
                }
            }
        }
        metadata_str(status, key)
    }

    /// The suggested wait before a retry, from the `retry-after-ms` hint.
    pub fn retry_after(status: &Status) -> Option<Duration> {
        hint(status, reason::RETRY_AFTER_MS_METADATA_KEY)?
            .parse::<u64>()
            .ok()
            .map(Duration::from_millis)
    }

    /// The leader hint of a `NOT_LEADER` status: its id and API address, each when known.
    pub fn leader_hint(status: &Status) -> (Option<u64>, Option<String>) {
        let id = hint(status, reason::LEADER_ID_METADATA_KEY).and_then(|v| v.parse().ok());
        let addr = hint(status, reason::LEADER_ADDR_METADATA_KEY).filter(|a| !a.is_empty());
        (id, addr)
    }

    /// The [`v1::CallError`] that stands for `status` in a batch reply: its code, message
    /// and details (the ErrorInfo with reason and hints). Response metadata is not kept:
    /// everything an idem status says is in its details too.
    pub fn to_call_error(status: &Status) -> v1::CallError {
        v1::CallError {
            code: status.code() as i32,
            message: status.message().to_owned(),
            details: status.details().to_vec(),
        }
    }

    /// The status a batch call's [`v1::CallError`] stands for, as the call would have
    /// returned it alone ([`reason_of`], [`hint`] and friends read it the same way).
    pub fn from_call_error(error: v1::CallError) -> Status {
        Status::with_details(Code::from(error.code), error.message, error.details.into())
    }

    fn metadata_str(status: &Status, key: &str) -> Option<String> {
        status.metadata().get(key)?.to_str().ok().map(str::to_owned)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::time::Duration;

    use prost::Message;
    use tonic::Code;

    use super::v1::{
        CanonicalRequest, ClaimOutcome, ClaimRequest, Fingerprint, QueryParam, Risk, Scope, State,
    };
    use super::{reason, status, FILE_DESCRIPTOR_SET};

    fn sample_claim() -> ClaimRequest {
        ClaimRequest {
            scope: Some(Scope {
                tenant: "acme".into(),
                environment: "prod".into(),
                actor: "user-42".into(),
                endpoint: "POST /v1/charges".into(),
            }),
            key: "order-2024:7f3a~b".into(),
            fingerprints: vec![Fingerprint {
                algorithm: "jcs-sha256/v1".into(),
                schema_version: 3,
                digest: vec![0xab; 32],
            }],
            request: Some(CanonicalRequest {
                method: "POST".into(),
                route: "/v1/charges".into(),
                path_params: HashMap::from([("id".to_owned(), "7".to_owned())]),
                query: vec![
                    QueryParam {
                        name: "tag".into(),
                        value: "b".into(),
                    },
                    QueryParam {
                        name: "tag".into(),
                        value: "a".into(),
                    },
                ],
                body_json: Some(br#"{"amount":100}"#.to_vec()),
                schema_version: 3,
            }),
            risk: Risk::High as i32,
            lease_ms: Some(30_000),
            retention_ms: None,
            holder: "worker-1/attempt-1".into(),
            max_result_bytes: Some(0),
        }
    }

    #[test]
    fn claim_request_round_trips() {
        let claim = sample_claim();
        let bytes = claim.encode_to_vec();
        let decoded = ClaimRequest::decode(bytes.as_slice()).unwrap();
        assert_eq!(decoded, claim);
        // Proto3 `optional` keeps presence: Some(0) and None stay distinct.
        assert_eq!(decoded.max_result_bytes, Some(0));
        assert_eq!(decoded.retention_ms, None);
        assert_eq!(decoded.risk(), Risk::High);
        // Order of repeated values of one query name survives.
        let values: Vec<_> = decoded
            .request
            .unwrap()
            .query
            .into_iter()
            .map(|q| q.value)
            .collect();
        assert_eq!(values, ["b", "a"]);
    }

    #[test]
    fn absent_body_differs_from_empty_body() {
        let mut request = CanonicalRequest {
            body_json: None,
            ..Default::default()
        };
        let absent = CanonicalRequest::decode(request.encode_to_vec().as_slice()).unwrap();
        request.body_json = Some(Vec::new());
        let empty = CanonicalRequest::decode(request.encode_to_vec().as_slice()).unwrap();
        assert_eq!(absent.body_json, None);
        assert_eq!(empty.body_json, Some(Vec::new()));
    }

    #[test]
    fn descriptor_set_has_both_services() {
        let set = prost_types::FileDescriptorSet::decode(FILE_DESCRIPTOR_SET).unwrap();
        let services: Vec<String> = set
            .file
            .iter()
            .filter(|f| f.package() == "idem.v1")
            .flat_map(|f| f.service.iter().map(|s| format!("idem.v1.{}", s.name())))
            .collect();
        assert!(
            services.contains(&"idem.v1.Idempotency".to_owned()),
            "{services:?}"
        );
        assert!(
            services.contains(&"idem.v1.Admin".to_owned()),
            "{services:?}"
        );

        let rpcs: Vec<String> = set
            .file
            .iter()
            .flat_map(|f| f.service.iter())
            .filter(|s| s.name() == "Idempotency")
            .flat_map(|s| s.method.iter().map(|m| m.name().to_owned()))
            .collect();
        for rpc in [
            "Claim",
            "Start",
            "RecordExternalCall",
            "Renew",
            "Complete",
            "Fail",
            "Release",
            "Cancel",
            "Get",
            "GetOperation",
            "Wait",
            "Batch",
        ] {
            assert!(rpcs.iter().any(|r| r == rpc), "missing rpc {rpc}");
        }
    }

    #[test]
    fn a_call_error_stands_for_its_status() {
        let original = status::not_leader(Some(2), Some("10.0.0.2:7400"));
        let wire = status::to_call_error(&original);
        let decoded = super::v1::CallError::decode(wire.encode_to_vec().as_slice()).unwrap();
        let status = status::from_call_error(decoded);
        assert_eq!(status.code(), Code::Unavailable);
        assert_eq!(status.message(), original.message());
        assert_eq!(
            status::reason_of(&status).as_deref(),
            Some(reason::NOT_LEADER)
        );
        assert_eq!(
            status::leader_hint(&status),
            (Some(2), Some("10.0.0.2:7400".to_owned()))
        );

        let bare = status::from_call_error(status::to_call_error(&tonic::Status::internal("x")));
        assert_eq!((bare.code(), bare.message()), (Code::Internal, "x"));
        assert_eq!(status::reason_of(&bare), None);
    }

    #[test]
    fn descriptor_set_is_public_only() {
        let set = prost_types::FileDescriptorSet::decode(FILE_DESCRIPTOR_SET).unwrap();
        assert!(
            set.file
                .iter()
                .all(|f| f.package() == "idem.v1" || f.package().starts_with("google.")),
            "the internal raft transport must not be advertised"
        );
        // The Raft transport exists as its own package.
        let _ = super::raft_v1::RaftRequest::default();
    }

    #[test]
    fn enums_have_unspecified_zero_and_stable_names() {
        assert_eq!(State::default(), State::Unspecified);
        assert_eq!(ClaimOutcome::default(), ClaimOutcome::Unspecified);
        assert_eq!(Risk::default(), Risk::Unspecified);
        assert_eq!(State::Pending.as_str_name(), "STATE_PENDING");
        assert!(State::Cancelled.is_terminal());
        assert!(!State::RetryableFailure.is_terminal());
        assert!(!State::NeedsReconciliation.is_terminal());
    }

    #[test]
    fn every_reason_has_a_code_and_is_unique() {
        let mut names: Vec<&str> = reason::ALL.iter().map(|(r, _)| *r).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), reason::ALL.len());
        assert_eq!(
            reason::code_of(reason::STALE_FENCE),
            Some(Code::FailedPrecondition)
        );
        assert_eq!(
            reason::code_of(reason::VERSION_MISMATCH),
            Some(Code::Aborted)
        );
        assert_eq!(reason::code_of("NO_SUCH_REASON"), None);
    }

    #[test]
    fn status_carries_reason_in_details_and_metadata() {
        let s = status::with_retry_after(
            reason::REGION_FAILOVER,
            "home region unavailable",
            Duration::from_millis(1500),
        );
        assert_eq!(s.code(), Code::Unavailable);
        assert_eq!(
            status::reason_of(&s).as_deref(),
            Some(reason::REGION_FAILOVER)
        );
        assert_eq!(status::retry_after(&s), Some(Duration::from_millis(1500)));
        assert_eq!(
            s.metadata()
                .get(reason::REASON_METADATA_KEY)
                .unwrap()
                .to_str()
                .unwrap(),
            reason::REGION_FAILOVER
        );

        // A client that only sees metadata (details dropped) still finds the reason.
        let plain = tonic::Status::with_metadata(Code::Unavailable, "x", s.metadata().clone());
        assert_eq!(
            status::reason_of(&plain).as_deref(),
            Some(reason::REGION_FAILOVER)
        );
        assert_eq!(
            status::retry_after(&plain),
            Some(Duration::from_millis(1500))
        );

        let nl = status::not_leader(Some(3), Some("10.0.0.3:7400"));
        assert_eq!(nl.code(), Code::Unavailable);
        assert_eq!(status::reason_of(&nl).as_deref(), Some(reason::NOT_LEADER));
        assert_eq!(
            status::leader_hint(&nl),
            (Some(3), Some("10.0.0.3:7400".to_owned()))
        );
        assert_eq!(
            nl.metadata()
                .get(reason::LEADER_ADDR_METADATA_KEY)
                .unwrap()
                .to_str()
                .unwrap(),
            "10.0.0.3:7400"
        );

        assert_eq!(
            status::reason_of(&tonic::Status::unavailable("conn refused")),
            None
        );
    }
}
