//! Holder identities: one per claim.
//!
//! The server gives a claim re-sent by the lease's current holder its ownership back (same
//! fence), so a holder must be unique per worker *attempt*: two workers, or two attempts of
//! one worker, sharing a holder would both believe they own the record. The generated form
//! `{hostname}-{pid}-{uuid}` is unique by its UUID and still tells an operator, in
//! `idemctl op show`, which machine and process held the lease. The `{hostname}-{pid}` part
//! is read once per process: a claim only pays for its UUID.

use std::sync::OnceLock;

use idem_core::record::MAX_HOLDER;
use idem_core::Holder;
use uuid::Uuid;

/// Longest hostname part kept in a generated holder.
const MAX_HOST: usize = 48;

/// A new holder, `{hostname}-{pid}-{uuid}` (hostname reduced to printable ASCII).
pub fn generate() -> Holder {
    let holder = format!("{}-{}", prefix(), Uuid::now_v7().simple());
    debug_assert!(holder.len() <= MAX_HOLDER);
    // Every part is printable ASCII without spaces and short enough, so this cannot fail;
    // fall back to the UUID alone rather than panic if that ever changes.
    Holder::new(holder).unwrap_or_else(|_| {
        Holder::new(Uuid::now_v7().simple().to_string()).expect("a UUID is a valid holder")
    })
}

/// `{hostname}-{pid}` of this process, computed on first use.
fn prefix() -> &'static str {
    static PREFIX: OnceLock<String> = OnceLock::new();
    PREFIX.get_or_init(|| format!("{}-{}", hostname(), std::process::id()))
}

/// This machine's name, from the kernel or `$HOSTNAME`, else `host`; reduced to the
/// characters a holder allows.
fn hostname() -> String {
    let raw = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_default();
    let clean: String = raw
        .trim()
        .chars()
        .filter(|c| c.is_ascii_graphic())
        .take(MAX_HOST)
        .collect();
    if clean.is_empty() {
        "host".to_owned()
    } else {
        clean
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_holders_are_unique_and_valid() {
        let a = generate();
        let b = generate();
        assert_ne!(a, b);
        assert!(a.as_str().contains(&format!("-{}-", std::process::id())));
        assert!(a.as_str().len() <= MAX_HOLDER);
    }
}
