//! `idemctl claim`: fingerprint the request given on the command line and claim its key.
//!
//! The canonical request is `{method, route, path_params, query, body}` with method and route
//! taken from the scope's `--endpoint` ("POST /v1/charges"), so the same command line always
//! gives the same fingerprint, and the fingerprint a service computes for the same request
//! (with the same route template) matches.

use std::io::Read as _;

use idem_client::{Claim, ClaimOutcome, ClaimRequest, Client, ClientError};
use idem_core::fingerprint::CanonicalRequest;
use idem_core::{Holder, Risk, Stage};

use super::target;
use crate::cli::{ClaimArgs, RiskArg};
use crate::error::CliError;
use crate::output::{error_summary_doc, millis, result_doc, Doc};

/// Claims the key and prints the outcome.
pub async fn claim(client: &Client, args: ClaimArgs) -> Result<Doc, CliError> {
    let request = build(args)?;
    let answer = client.claim(request).await?;
    Ok(claim_doc(&answer))
}

/// The SDK request of the claim flags.
fn build(args: ClaimArgs) -> Result<ClaimRequest, CliError> {
    let target = target(&args.target)?;
    let canonical = canonical_request(target.scope.endpoint(), &args)?;
    let mut request = if args.server_hash {
        ClaimRequest::server_hashed(target, &canonical, args.schema_version)?
    } else {
        ClaimRequest::for_request(target, &canonical, args.schema_version)?
    };
    if let Some(risk) = args.risk {
        request = request.risk(risk.into());
    }
    if let Some(lease) = args.lease {
        request = request.lease(lease);
    }
    if let Some(retention) = args.retention {
        request = request.retention(retention);
    }
    if let Some(bytes) = args.max_result_bytes {
        request = request.max_result_bytes(bytes);
    }
    if let Some(holder) = args.holder {
        request = request.holder(Holder::new(holder).map_err(ClientError::from)?);
    }
    Ok(request)
}

/// The canonical request: method and route from the (validated) endpoint, then the
/// parameters and the body.
fn canonical_request(endpoint: &str, args: &ClaimArgs) -> Result<CanonicalRequest, CliError> {
    let (method, route) = endpoint.split_once(' ').ok_or_else(|| {
        CliError::Usage(format!("endpoint {endpoint:?} is not \"METHOD /route\""))
    })?;
    let mut request = CanonicalRequest::new(method, route)
        .map_err(ClientError::from)?
        .with_path_params(args.path_params.iter().cloned())
        .with_query(args.query.iter().cloned());
    if let Some(body) = body(args)? {
        request = request.with_json_body(body);
    }
    Ok(request)
}

/// The body from `--body` or `--body-file` (`-` is stdin); `None` when neither is given.
fn body(args: &ClaimArgs) -> Result<Option<Vec<u8>>, CliError> {
    if let Some(body) = &args.body {
        return Ok(Some(body.clone().into_bytes()));
    }
    let Some(path) = &args.body_file else {
        return Ok(None);
    };
    let read = if path.as_os_str() == "-" {
        let mut buffer = Vec::new();
        std::io::stdin().read_to_end(&mut buffer).map(|_| buffer)
    } else {
        std::fs::read(path)
    };
    read.map(Some)
        .map_err(|e| CliError::Usage(format!("cannot read {}: {e}", path.display())))
}

impl From<RiskArg> for Risk {
    fn from(risk: RiskArg) -> Self {
        match risk {
            RiskArg::Low => Risk::Low,
            RiskArg::Normal => Risk::Normal,
            RiskArg::High => Risk::High,
        }
    }
}

/// The document of a claim: outcome, operation id, fence (null unless owned), state, stage,
/// version, the server's key warnings (comma-separated, only when there are any), then the
/// fields of the outcome.
pub fn claim_doc(claim: &Claim) -> Doc {
    let warnings = claim
        .warnings
        .iter()
        .map(|w| w.name())
        .collect::<Vec<_>>()
        .join(",");
    let doc = Doc::new()
        .with("outcome", claim.outcome.kind().name())
        .with("operation_id", claim.operation_id.to_string())
        .with("fence", claim.fence())
        .with("state", claim.state.name())
        .with("stage", claim.stage.name())
        .with("version", claim.version)
        .with("attempts", claim.attempts)
        .with("holder", claim.holder.as_str())
        .with_some("warnings", (!warnings.is_empty()).then_some(warnings));
    match &claim.outcome {
        ClaimOutcome::Acquired {
            lease_expires_at,
            redelivered,
            ..
        } => doc
            .with("redelivered", *redelivered)
            .with_some("lease_expires_at_ms", lease_expires_at.map(|t| t.millis())),
        ClaimOutcome::TakenOver {
            previous_stage,
            remote_ref,
            lease_expires_at,
            redelivered,
            ..
        } => doc
            .with("previous_stage", previous_stage.map(Stage::name))
            .with_some("remote_ref", remote_ref.clone())
            .with("redelivered", *redelivered)
            .with_some("lease_expires_at_ms", lease_expires_at.map(|t| t.millis())),
        ClaimOutcome::InProgress {
            retry_after,
            lease_expires_at,
        } => doc
            .with("retry_after_ms", millis(*retry_after))
            .with_some("lease_expires_at_ms", lease_expires_at.map(|t| t.millis())),
        ClaimOutcome::Completed { result } => doc.with("result", result_doc(result)),
        ClaimOutcome::Failed { error, .. } => {
            doc.with("error", error.as_ref().map(error_summary_doc))
        }
        ClaimOutcome::FingerprintUnverifiable { required_algorithm } => {
            doc.with("required_algorithm", required_algorithm.as_str())
        }
        ClaimOutcome::FingerprintMismatch | ClaimOutcome::NeedsReconciliation => doc,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use clap::Parser;
    use idem_client::KeyWarning;
    use idem_core::{IdempotencyKey, RecordKey, Scope, Stage, State, StoredResult, Timestamp};

    use super::*;
    use crate::cli::{Cli, Command};
    use crate::output::to_json;

    fn args(extra: &[&str]) -> ClaimArgs {
        let mut all = vec![
            "idemctl",
            "claim",
            "--tenant",
            "acme",
            "--env",
            "prod",
            "--actor",
            "u",
            "--endpoint",
            "POST /v1/charges/{id}",
            "--key",
            "k1",
        ];
        all.extend_from_slice(extra);
        match Cli::try_parse_from(all).unwrap().command {
            Command::Claim(args) => args,
            _ => unreachable!(),
        }
    }

    #[test]
    fn fingerprint_ignores_json_spelling_but_not_content() {
        let fp = |body: &str| {
            let a = args(&["--body", body, "--path-param", "id=7"]);
            canonical_request("POST /v1/charges/{id}", &a)
                .unwrap()
                .fingerprint(1)
                .unwrap()
        };
        assert_eq!(fp(r#"{"a":1,"b":2}"#), fp(r#"{ "b": 2.0, "a": 1 }"#));
        assert_ne!(fp(r#"{"a":1}"#), fp(r#"{"a":2}"#));
        let no_body = canonical_request("POST /v1/charges/{id}", &args(&[])).unwrap();
        assert!(no_body.body().is_none());
    }

    #[test]
    fn bad_input_is_reported_before_sending() {
        let err = build(args(&["--body", "{not json"])).unwrap_err();
        assert_eq!((err.reason(), err.exit_code()), ("INVALID_ARGUMENT", 2));
        let err = build(args(&["--holder", "has space"])).unwrap_err();
        assert_eq!(err.exit_code(), 2);
        let err = build(args(&["--body-file", "/nonexistent/body.json"])).unwrap_err();
        assert_eq!((err.reason(), err.exit_code()), ("USAGE", 2));
        assert!(build(args(&["--body", "{}", "--risk", "HIGH", "--server-hash"])).is_ok());
    }

    fn claim(outcome: ClaimOutcome, state: State) -> Claim {
        let scope = Scope::new("acme", "prod", "u", "POST /x").unwrap();
        Claim {
            outcome,
            operation_id: "0190f1c2-7d3e-7a4b-9c1d-2e3f4a5b6c7d".parse().unwrap(),
            state,
            stage: Stage::NotCalled,
            version: 2,
            attempts: 1,
            holder: Holder::new("h-1").unwrap(),
            target: RecordKey::new(scope, IdempotencyKey::new("k").unwrap()),
            warnings: Vec::new(),
        }
    }

    #[test]
    fn claim_json_names_the_outcome_and_its_fields() {
        let acquired = claim(
            ClaimOutcome::Acquired {
                fence: 1,
                lease_expires_at: Some(Timestamp(5)),
                redelivered: false,
            },
            State::Pending,
        );
        let json: serde_json::Value =
            serde_json::from_str(&to_json(&claim_doc(&acquired))).unwrap();
        assert_eq!(json["outcome"], "ACQUIRED");
        assert_eq!(json["fence"], 1);
        assert_eq!(json["state"], "PENDING");
        assert_eq!(json["version"], 2);
        assert_eq!(json["operation_id"], "0190f1c2-7d3e-7a4b-9c1d-2e3f4a5b6c7d");

        let busy = claim(
            ClaimOutcome::InProgress {
                retry_after: Duration::from_millis(1200),
                lease_expires_at: None,
            },
            State::InProgress,
        );
        let json: serde_json::Value = serde_json::from_str(&to_json(&claim_doc(&busy))).unwrap();
        assert_eq!(json["outcome"], "IN_PROGRESS");
        assert_eq!(json["fence"], serde_json::Value::Null);
        assert_eq!(json["retry_after_ms"], 1200);

        let done = claim(
            ClaimOutcome::Completed {
                result: StoredResult {
                    status_code: 201,
                    resource_id: "ch_1".into(),
                    ..Default::default()
                },
            },
            State::Completed,
        );
        let json: serde_json::Value = serde_json::from_str(&to_json(&claim_doc(&done))).unwrap();
        assert_eq!(json["outcome"], "COMPLETED");
        assert_eq!(json["result"]["status_code"], 201);
        assert_eq!(json["result"]["resource_id"], "ch_1");

        let taken = claim(
            ClaimOutcome::TakenOver {
                fence: 2,
                previous_stage: Some(Stage::Calling),
                remote_ref: None,
                lease_expires_at: None,
                redelivered: false,
            },
            State::Pending,
        );
        let json: serde_json::Value = serde_json::from_str(&to_json(&claim_doc(&taken))).unwrap();
        assert_eq!(json["outcome"], "TAKEN_OVER");
        assert_eq!(json["previous_stage"], "CALLING");

        let mismatch = claim(ClaimOutcome::FingerprintMismatch, State::Completed);
        let json: serde_json::Value =
            serde_json::from_str(&to_json(&claim_doc(&mismatch))).unwrap();
        assert_eq!(json["outcome"], "FINGERPRINT_MISMATCH");
        assert_eq!(json["state"], "COMPLETED");
        assert!(json.get("warnings").is_none(), "no warnings, no field");
    }

    #[test]
    fn key_warnings_are_printed() {
        let mut weak = claim(ClaimOutcome::FingerprintMismatch, State::Completed);
        weak.warnings = vec![KeyWarning::Sequential, KeyWarning::Short];
        let json: serde_json::Value = serde_json::from_str(&to_json(&claim_doc(&weak))).unwrap();
        assert_eq!(json["warnings"], "SEQUENTIAL,SHORT");
    }
}
