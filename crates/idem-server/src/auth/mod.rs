//! Authentication and authorization of the public API.
//!
//! Once `[auth] mode = "on"` (the default; `off` is for a development node only), every call
//! of `idem.v1.Idempotency` and `idem.v1.Admin` must prove who it comes from, and what it may
//! do follows from that identity, never from a request field:
//!
//! 1. [`AuthLayer`] (a tower layer in front of the services) turns the call's credential — a
//!    bearer token (`authorization: Bearer …`) or a verified client certificate
//!    ([`crate::tls::ClientIdentity`]) — into a [`Principal`] through the [`Authenticator`],
//!    or answers `UNAUTHENTICATED` before any handler runs. gRPC health and reflection stay
//!    open (load balancers and tools probe them without credentials).
//! 2. Each handler authorizes against what it touches ([`Principal::require`]): the
//!    scope's tenant, and for calls by fence or operation id the tenant of the record found,
//!    so a guessed fence or operation id of another tenant gets the same `TENANT_FORBIDDEN`
//!    and never the record.
//!
//! Tokens are stored hashed (SHA-256) in two places, both consulted on every call: the
//! credentials file ([`Credentials`]: bootstrap admins, client certificates), re-read when
//! it changes, and the replicated configuration ([`ReplicatedTokens`]: tokens created with
//! `Admin.CreateToken`), in force on a node once it has applied the change. Either way a
//! revoked token stops working within a second.

mod authenticator;
mod credentials;
mod layer;
mod principal;
mod replicated;

pub use authenticator::{AuthMode, Authenticator};
pub use credentials::{token_digest, Credentials, CredentialsError};
pub use layer::AuthLayer;
pub use principal::{Principal, Role, Tenants};
pub use replicated::ReplicatedTokens;
