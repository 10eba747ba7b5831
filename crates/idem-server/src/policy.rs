//! Policy resolution: which lease, retention, risk and result limit a new record gets.
//!
//! Three layers, most specific last: the cluster default (`[policy]`), the endpoint's policy
//! (`[policies."POST /v1/charges"]`, each field optional) and the claim's own overrides. The
//! result is validated against the core's ranges, so a claim that asks for a 2-hour lease
//! gets `INVALID_POLICY` instead of a silently clamped value.
//!
//! An endpoint may also cap what a claim may ask for (`lease_ceiling`, `retention_ceiling`,
//! `max_result_bytes_ceiling`): a client that asks for more is refused with
//! `INVALID_POLICY`, never silently clamped, so it learns at once that its request will not
//! be honoured as sent. The ceilings bound the claim's overrides only; the operator's own
//! values for the endpoint are checked against them when the configuration is read.
//!
//! Risk is the one exception to "the claim wins": when an operator configured a risk for an
//! endpoint, a claim may raise it but never lower it. An endpoint marked HIGH because it moves
//! money must not become NORMAL because one client sent `RISK_LOW`. The cluster default risk
//! is only a default: claims on endpoints without a configured risk may choose any class.
//!
//! The policy is resolved once, by the proposer, and travels inside the `Claim` command, so
//! apply never reads configuration and every replica stores the same policy.
//!
//! Two endpoint settings are not part of the stored policy because they describe what the
//! leader's housekeeping does, not the record: `stuck_after` (when a PENDING or IN_PROGRESS
//! record unchanged that long is reported as stuck, default [`DEFAULT_STUCK_AFTER`]) and
//! `abandon_after` (off by default: when a claim that never began anything irreversible
//! may be deleted, see `crate::stuck`). The sweep reads them when it looks at a record and
//! carries `abandon_after` in its `Abandon` command, so apply still reads no configuration.

use std::collections::BTreeMap;
use std::time::Duration;

use idem_core::{Field, Policy, Risk, ValidationError};

/// When a PENDING or IN_PROGRESS record unchanged this long counts as stuck, unless its
/// endpoint sets `stuck_after`.
pub const DEFAULT_STUCK_AFTER: Duration = Duration::from_secs(15 * 60);

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
    /// Longest lease a claim may ask for.
    pub lease_ceiling: Option<Duration>,
    /// Longest retention a claim may ask for.
    pub retention_ceiling: Option<Duration>,
    /// Largest `max_result_bytes` a claim may ask for.
    pub max_result_bytes_ceiling: Option<u32>,
    /// When an unchanged PENDING or IN_PROGRESS record is reported as stuck.
    pub stuck_after: Option<Duration>,
    /// When an abandoned claim (stage NOT_CALLED, no live lease, unchanged) is deleted;
    /// `None` (the default) never deletes one.
    pub abandon_after: Option<Duration>,
}

impl EndpointPolicy {
    /// Refuses overrides above this endpoint's ceilings (`INVALID_POLICY`).
    pub fn check_ceilings(&self, overrides: &Overrides) -> Result<(), ValidationError> {
        let millis = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        let above = |field, asked: u64, min: u64, ceiling: u64| {
            if asked > ceiling {
                return Err(ValidationError::Range {
                    field,
                    value: asked,
                    min,
                    max: ceiling,
                });
            }
            Ok(())
        };
        if let (Some(asked), Some(ceiling)) = (overrides.lease, self.lease_ceiling) {
            let min = millis(idem_core::policy::MIN_LEASE);
            above(Field::Lease, millis(asked), min, millis(ceiling))?;
        }
        if let (Some(asked), Some(ceiling)) = (overrides.retention, self.retention_ceiling) {
            let min = millis(idem_core::policy::MIN_RETENTION);
            above(Field::Retention, millis(asked), min, millis(ceiling))?;
        }
        if let (Some(asked), Some(ceiling)) =
            (overrides.max_result_bytes, self.max_result_bytes_ceiling)
        {
            let min = idem_core::policy::MIN_RESULT_BYTES.into();
            above(Field::MaxResultBytes, asked.into(), min, ceiling.into())?;
        }
        Ok(())
    }
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

    /// How long a PENDING or IN_PROGRESS record of `endpoint` may sit unchanged before it
    /// is reported as stuck.
    pub fn stuck_after(&self, endpoint: &str) -> Duration {
        self.endpoints
            .get(endpoint)
            .and_then(|p| p.stuck_after)
            .unwrap_or(DEFAULT_STUCK_AFTER)
    }

    /// The `abandon_after` of `endpoint`, if it has one.
    pub fn abandon_after(&self, endpoint: &str) -> Option<Duration> {
        self.endpoints.get(endpoint).and_then(|p| p.abandon_after)
    }

    /// True when some endpoint has an `abandon_after`.
    pub fn any_abandon_after(&self) -> bool {
        self.endpoints.values().any(|p| p.abandon_after.is_some())
    }

    /// The policy a new record of `endpoint` gets for a claim asking for `overrides`.
    pub fn resolve(
        &self,
        endpoint: &str,
        overrides: &Overrides,
    ) -> Result<Policy, ValidationError> {
        let base = self.for_endpoint(endpoint);
        let custom = self.endpoints.get(endpoint);
        if let Some(custom) = custom {
            custom.check_ceilings(overrides)?;
        }
        let floor = custom.and_then(|p| p.risk);
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
    fn overrides_above_an_endpoints_ceilings_are_refused_not_clamped() {
        let mut policies = policies();
        policies.endpoints.insert(
            "POST /v1/refunds".to_owned(),
            EndpointPolicy {
                lease_ceiling: Some(Duration::from_secs(60)),
                retention_ceiling: Some(Duration::from_secs(86_400)),
                max_result_bytes_ceiling: Some(4096),
                ..EndpointPolicy::default()
            },
        );
        let within = Overrides {
            lease: Some(Duration::from_secs(60)),
            retention: Some(Duration::from_secs(86_400)),
            max_result_bytes: Some(4096),
            ..Overrides::default()
        };
        let p = policies.resolve("POST /v1/refunds", &within).unwrap();
        assert_eq!(p.lease, Duration::from_secs(60));
        for (asked, field) in [
            (
                Overrides {
                    lease: Some(Duration::from_secs(61)),
                    ..Overrides::default()
                },
                Field::Lease,
            ),
            (
                Overrides {
                    retention: Some(Duration::from_secs(86_401)),
                    ..Overrides::default()
                },
                Field::Retention,
            ),
            (
                Overrides {
                    max_result_bytes: Some(4097),
                    ..Overrides::default()
                },
                Field::MaxResultBytes,
            ),
        ] {
            let err = policies.resolve("POST /v1/refunds", &asked).unwrap_err();
            assert_eq!(err.reason(), "INVALID_POLICY");
            assert_eq!(err.field(), field);
        }
        // No override: the endpoint's own values, whatever the ceilings.
        let p = policies
            .resolve("POST /v1/refunds", &Overrides::default())
            .unwrap();
        assert_eq!(p, Policy::default());
        // Other endpoints have no ceilings.
        let long = Overrides {
            lease: Some(Duration::from_secs(600)),
            ..Overrides::default()
        };
        policies.resolve("POST /v1/orders", &long).unwrap();
    }

    #[test]
    fn stuck_and_abandon_thresholds_are_per_endpoint() {
        let mut policies = policies();
        policies.endpoints.insert(
            "POST /v1/imports".to_owned(),
            EndpointPolicy {
                stuck_after: Some(Duration::from_secs(60)),
                abandon_after: Some(Duration::from_secs(3600)),
                ..EndpointPolicy::default()
            },
        );
        assert_eq!(
            policies.stuck_after("POST /v1/imports"),
            Duration::from_secs(60)
        );
        assert_eq!(policies.stuck_after("POST /v1/orders"), DEFAULT_STUCK_AFTER);
        assert_eq!(
            policies.abandon_after("POST /v1/imports"),
            Some(Duration::from_secs(3600))
        );
        assert_eq!(policies.abandon_after("POST /v1/charges"), None);
        assert!(policies.any_abandon_after());
        assert!(!self::policies().any_abandon_after(), "off by default");
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
