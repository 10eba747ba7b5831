//! Which leader served a request that this node forwarded, so the response can say so.
//!
//! A follower forwards writes, read barriers and membership changes to the leader
//! transparently. The client should still learn where the leader is, so it can go there
//! directly next time: the response carries the leader's public address in the
//! `leader-addr` metadata. The backend knows that it forwarded; the service builds the
//! response. A task-local slot, set up per request by [`scope`] and filled by [`note`],
//! connects the two without threading a flag through every handler.

use std::cell::RefCell;
use std::future::Future;

tokio::task_local! {
    static FORWARDED_TO: RefCell<Option<String>>;
}

/// Runs `handler` and returns its output with the leader address noted during it, if any.
pub(crate) async fn scope<F: Future>(handler: F) -> (F::Output, Option<String>) {
    FORWARDED_TO
        .scope(RefCell::new(None), async {
            let output = handler.await;
            let addr = FORWARDED_TO.with(|slot| slot.borrow_mut().take());
            (output, addr)
        })
        .await
}

/// Records that the current request was served by the leader at `api_addr` (no effect
/// outside a [`scope`], e.g. in the expiry sweep).
pub fn note(api_addr: &str) {
    let _ = FORWARDED_TO.try_with(|slot| *slot.borrow_mut() = Some(api_addr.to_owned()));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_note_inside_the_scope_is_returned() {
        let ((), addr) = scope(async { note("10.0.0.1:7400") }).await;
        assert_eq!(addr.as_deref(), Some("10.0.0.1:7400"));
        let ((), none) = scope(async {}).await;
        assert_eq!(none, None);
        note("outside: ignored");
    }
}
