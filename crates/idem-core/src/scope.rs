//! The scope of an idempotency key: who asks, where, and for which operation.
//!
//! The unique constraint of the store is the whole tuple `(tenant, environment, actor,
//! endpoint, key)`: two users, two environments or two endpoints never collide even when
//! their clients pick the same key.
//!
//! | field | length | characters |
//! |---|---|---|
//! | tenant | 1..=64 | `A-Z a-z 0-9 . _ -` |
//! | environment | 1..=32 | `a-z 0-9 _ -` |
//! | actor | 1..=128 | `A-Z a-z 0-9 . _ : @ -` |
//! | endpoint | 1..=255 | `METHOD /route`: method `A-Z` (1..=16), one space, a route starting with `/` of printable ASCII without spaces |

use serde::{Deserialize, Serialize};

use crate::error::{check_text, Field, ValidationError};

/// Maximum tenant length in bytes.
pub const MAX_TENANT: usize = 64;
/// Maximum environment length in bytes.
pub const MAX_ENVIRONMENT: usize = 32;
/// Maximum actor length in bytes.
pub const MAX_ACTOR: usize = 128;
/// Maximum endpoint length in bytes.
pub const MAX_ENDPOINT: usize = 255;
/// Maximum HTTP method length inside an endpoint.
pub const MAX_METHOD: usize = 16;

/// The validated scope of a key.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "RawScope", into = "RawScope")]
pub struct Scope {
    tenant: String,
    environment: String,
    actor: String,
    endpoint: String,
}

/// The unvalidated wire form of a [`Scope`].
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RawScope {
    /// Tenant (the authenticated caller's organisation).
    pub tenant: String,
    /// Environment (e.g. `test`, `live`).
    pub environment: String,
    /// The end user or account the calling service acts for.
    pub actor: String,
    /// The operation, e.g. `POST /v1/charges`.
    pub endpoint: String,
}

impl Scope {
    /// Validates and builds a scope.
    pub fn new(
        tenant: impl Into<String>,
        environment: impl Into<String>,
        actor: impl Into<String>,
        endpoint: impl Into<String>,
    ) -> Result<Self, ValidationError> {
        let scope = Scope {
            tenant: tenant.into(),
            environment: environment.into(),
            actor: actor.into(),
            endpoint: endpoint.into(),
        };
        validate_tenant(&scope.tenant)?;
        validate_environment(&scope.environment)?;
        validate_actor(&scope.actor)?;
        validate_endpoint(&scope.endpoint)?;
        Ok(scope)
    }

    /// The tenant.
    pub fn tenant(&self) -> &str {
        &self.tenant
    }

    /// The environment.
    pub fn environment(&self) -> &str {
        &self.environment
    }

    /// The actor.
    pub fn actor(&self) -> &str {
        &self.actor
    }

    /// The endpoint (`METHOD /route`).
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }
}

impl TryFrom<RawScope> for Scope {
    type Error = ValidationError;

    fn try_from(raw: RawScope) -> Result<Self, Self::Error> {
        Scope::new(raw.tenant, raw.environment, raw.actor, raw.endpoint)
    }
}

impl From<Scope> for RawScope {
    fn from(scope: Scope) -> Self {
        RawScope {
            tenant: scope.tenant,
            environment: scope.environment,
            actor: scope.actor,
            endpoint: scope.endpoint,
        }
    }
}

/// Validates a tenant name.
pub fn validate_tenant(tenant: &str) -> Result<(), ValidationError> {
    check_text(
        Field::Tenant,
        tenant,
        1,
        MAX_TENANT,
        |b| b.is_ascii_alphanumeric() || b"._-".contains(&b),
        "A-Z a-z 0-9 . _ -",
    )
}

/// Validates an actor name.
pub fn validate_actor(actor: &str) -> Result<(), ValidationError> {
    check_text(
        Field::Actor,
        actor,
        1,
        MAX_ACTOR,
        |b| b.is_ascii_alphanumeric() || b"._:@-".contains(&b),
        "A-Z a-z 0-9 . _ : @ -",
    )
}

fn validate_environment(environment: &str) -> Result<(), ValidationError> {
    check_text(
        Field::Environment,
        environment,
        1,
        MAX_ENVIRONMENT,
        |b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"_-".contains(&b),
        "a-z 0-9 _ -",
    )
}

fn validate_endpoint(endpoint: &str) -> Result<(), ValidationError> {
    check_text(
        Field::Endpoint,
        endpoint,
        3,
        MAX_ENDPOINT,
        |b| (0x20..=0x7e).contains(&b),
        "printable ASCII",
    )?;
    let rule = "must be `METHOD /route`: method A-Z (1..=16), one space, route starting with / without spaces";
    let bad = || ValidationError::Rule {
        field: Field::Endpoint,
        rule,
    };
    let (method, route) = endpoint.split_once(' ').ok_or_else(bad)?;
    let method_ok =
        (1..=MAX_METHOD).contains(&method.len()) && method.bytes().all(|b| b.is_ascii_uppercase());
    let route_ok = route.starts_with('/') && !route.contains(' ');
    if method_ok && route_ok {
        Ok(())
    } else {
        Err(bad())
    }
}
