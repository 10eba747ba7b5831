//! Misuse signals: what a node can tell about how callers use their keys, without refusing
//! anything (docs/troubleshooting.md).
//!
//! - [`Signal`]: what a claim's answer reveals (replay, mismatch, in-flight collision),
//!   counted by tenant in `idem_tenant_claims_total`;
//! - [`HotKeys`]: the heaviest keys and tenants of the recent past, in bounded memory, read
//!   by `Admin.TopKeys`/`TopTenants` (`idemctl top`);
//! - [`key_shape`]: keys built from counters, clocks or too few characters, which collide
//!   across callers: the claim response warns about them (`key_warnings`).

pub mod hot_keys;
pub mod key_shape;
mod signal;

pub use hot_keys::{HotKey, HotKeys, TenantActivity};
pub use key_shape::{classify, KeyWarning};
pub use signal::{Signal, SIGNALS};
