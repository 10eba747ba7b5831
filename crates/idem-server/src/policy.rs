//! Policy resolution: which lease, retention, risk and result limit a new record gets.
//!
//! Three layers, most specific last: the cluster default (`[policy]`), the endpoint's policy
//! (`[policies."POST /v1/charges"]`, each field optional) and the claim's own overrides. The
//! result is validated against the core's ranges, so a claim that asks for a 2-hour lease
//! gets `INVALID_POLICY` instead of a silently clamped value.
//!
//! Risk is the one exception to "the claim wins": when an operator configured a risk for an
//! endpoint, a claim may raise it but never lower it. An endpoint marked HIGH because it moves
//! money must not become NORMAL because one client sent `RISK_LOW`. The cluster default risk
//! is only a default: claims on endpoints without a configured risk may choose any class.
//!
//! The policy is resolved once, by the proposer, and travels inside the `Claim` command, so
//! apply never reads configuration and every replica stores the same policy.

use std::collections::BTreeMap;
use std::time::Duration;

use idem_core::{Policy, Risk, ValidationError};

/// The part of a policy an endpoint may set; unset fields inherit the cluster default.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EndpointPolicy {
    /// Lease duration.
    pub lease: Option<Duration>,
    /// Retention after a terminal state.
    pub retention: Option<Duration>,
    /// Risk class; when set, also the lowest risk a claim may ask for.
    pub risk: Option<Risk>,
    /// Largest stored result, in bytes.
    pub max_result_bytes: Option<u32>,
}

/// What a claim asked for; `None` means "use the endpoint policy".
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Overrides {
    /// Requested lease.
    pub lease: Option<Duration>,
    /// Requested retention.
    pub retention: Option<Duration>,
    /// Requested risk.
    pub risk: Option<Risk>,
    /// Requested result limit.
    pub max_result_bytes: Option<u32>,
}

/// The cluster default policy and the per-endpoint policies.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Policies {
    /// Used for every field an endpoint policy leaves unset.
    pub default: Policy,
    /// Endpoint policies by endpoint (`METHOD /route`, exactly as claims send it).
    pub endpoints: BTreeMap<String, EndpointPolicy>,
}

impl Policies {
    /// The policy of `endpoint` before any claim override.
    pub fn for_endpoint(&self, endpoint: &str) -> Policy {
        let Some(custom) = self.endpoints.get(endpoint) else {
            return self.default.clone();
        };
        Policy {
            lease: custom.lease.unwrap_or(self.default.lease),
            retention: custom.retention.unwrap_or(self.default.retention),
            risk: custom.risk.unwrap_or(self.default.risk),
            max_result_bytes: custom
                .max_result_bytes
                .unwrap_or(self.default.max_result_bytes),
        }
    }

    /// The policy a new record of `endpoint` gets for a claim asking for `overrides`.
    pub fn resolve(
        &self,
        endpoint: &str,
        overrides: &Overrides,
    ) -> Result<Policy, ValidationError> {
        let base = self.for_endpoint(endpoint);
        let floor = self.endpoints.get(endpoint).and_then(|p| p.risk);
        let risk = match (overrides.risk, floor) {
            (Some(asked), Some(floor)) => asked.max(floor),
            (Some(asked), None) => asked,
            (None, _) => base.risk,
        };
        let policy = Policy {
            lease: overrides.lease.unwrap_or(base.lease),
            retention: overrides.retention.unwrap_or(base.retention),
            risk,
            max_result_bytes: overrides.max_result_bytes.unwrap_or(base.max_result_bytes),
        };
        policy.validate()?;
        Ok(policy)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policies() -> Policies {
        let mut endpoints = BTreeMap::new();
        endpoints.insert(
            "POST /v1/charges".to_owned(),
            EndpointPolicy {
                risk: Some(Risk::High),
                retention: Some(Duration::from_secs(7 * 86_400)),
                ..EndpointPolicy::default()
            },
        );
        endpoints.insert(
            "POST /v1/exports".to_owned(),
            EndpointPolicy {
                lease: Some(Duration::from_secs(120)),
                ..EndpointPolicy::default()
            },
        );
        Policies {
            default: Policy::default(),
            endpoints,
        }
    }

    #[test]
    fn unknown_endpoint_gets_the_default() {
        let p = policies()
            .resolve("POST /v1/orders", &Overrides::default())
            .unwrap();
        assert_eq!(p, Policy::default());
    }

    #[test]
    fn endpoint_fields_override_default_field_by_field() {
        let p = policies()
            .resolve("POST /v1/charges", &Overrides::default())
            .unwrap();
        assert_eq!(p.risk, Risk::High);
        assert_eq!(p.retention, Duration::from_secs(7 * 86_400));
        assert_eq!(p.lease, Policy::default().lease);
        assert_eq!(p.max_result_bytes, Policy::default().max_result_bytes);
    }

    #[test]
    fn claim_overrides_win_except_lowering_a_configured_risk() {
        let overrides = Overrides {
            lease: Some(Duration::from_secs(5)),
            retention: Some(Duration::from_secs(3600)),
            risk: Some(Risk::Low),
            max_result_bytes: Some(1024),
        };
        let charges = policies().resolve("POST /v1/charges", &overrides).unwrap();
        assert_eq!(charges.lease, Duration::from_secs(5));
        assert_eq!(charges.retention, Duration::from_secs(3600));
        assert_eq!(charges.max_result_bytes, 1024);
        assert_eq!(charges.risk, Risk::High, "configured HIGH is a floor");

        // No configured risk: the default is only a default.
        let exports = policies().resolve("POST /v1/exports", &overrides).unwrap();
        assert_eq!(exports.risk, Risk::Low);
        let orders = policies().resolve("POST /v1/orders", &overrides).unwrap();
        assert_eq!(orders.risk, Risk::Low);

        // Raising is always allowed.
        let raised = Overrides {
            risk: Some(Risk::High),
            ..Overrides::default()
        };
        let exports = policies().resolve("POST /v1/exports", &raised).unwrap();
        assert_eq!(exports.risk, Risk::High);
        assert_eq!(exports.lease, Duration::from_secs(120));
    }

    #[test]
    fn out_of_range_overrides_are_invalid_policy() {
        let too_long = Overrides {
            lease: Some(Duration::from_secs(7200)),
            ..Overrides::default()
        };
        let err = policies()
            .resolve("POST /v1/orders", &too_long)
            .unwrap_err();
        assert_eq!(err.reason(), "INVALID_POLICY");

        let tiny = Overrides {
            max_result_bytes: Some(1),
            ..Overrides::default()
        };
        let err = policies().resolve("POST /v1/orders", &tiny).unwrap_err();
        assert_eq!(err.reason(), "INVALID_POLICY");
    }
}
