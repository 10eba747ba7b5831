//! The external-call ledger handle a protected handler finds in its request extensions.
//!
//! A handler that calls a downstream (a card processor, a bank) records `CALLING` before the
//! call and `REMOTE_CONFIRMED` after it, and passes [`Ledger::downstream_key`] (the
//! operation id) as the downstream's own idempotency key. This is what makes a crash in the
//! middle safe: the next attempt is told the previous stage ([`Ledger::previous_stage`]) and
//! asks the downstream about the operation before calling again, and the layer never
//! releases a record whose external call began.

use std::sync::{Arc, Mutex};

use axum::extract::FromRequestParts;
use http::request::Parts;
use http::StatusCode;
use idem_client::{Client, ClientError, Target};
use idem_core::{OperationId, Stage};

/// Why a ledger entry could not be recorded. The handler must not make the external call.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LedgerError {
    /// The store refused or could not be reached (`STALE_FENCE`: another attempt took over).
    #[error("ledger entry not recorded: {0}")]
    Store(#[from] ClientError),
}

/// The ledger of the current attempt. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Ledger {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    client: Client,
    target: Target,
    fence: u64,
    operation_id: OperationId,
    previous_stage: Option<Stage>,
    previous_remote_ref: Option<String>,
    stage: Mutex<Stage>,
}

impl Ledger {
    /// The ledger of an attempt that owns `target` with `fence`.
    pub(crate) fn new(
        client: Client,
        target: Target,
        fence: u64,
        operation_id: OperationId,
        previous: Option<(Option<Stage>, Option<String>)>,
    ) -> Self {
        let (previous_stage, previous_remote_ref) = previous.unwrap_or((None, None));
        Ledger {
            inner: Arc::new(Inner {
                client,
                target,
                fence,
                operation_id,
                previous_stage,
                previous_remote_ref,
                stage: Mutex::new(Stage::NotCalled),
            }),
        }
    }

    /// The operation's id: stable across every attempt of one key.
    pub fn operation_id(&self) -> OperationId {
        self.inner.operation_id
    }

    /// The idempotency key to give the downstream (the operation id as text).
    pub fn downstream_key(&self) -> String {
        self.inner.operation_id.to_string()
    }

    /// The fence of this attempt.
    pub fn fence(&self) -> u64 {
        self.inner.fence
    }

    /// How far the previous attempt got, when this attempt took over: `Some(Calling)` means
    /// its external call may have happened (ask the downstream first), `Some(RemoteConfirmed)`
    /// that it did ([`Ledger::previous_remote_ref`]). `None` for a first attempt.
    pub fn previous_stage(&self) -> Option<Stage> {
        self.inner.previous_stage
    }

    /// The downstream's reference the previous attempt confirmed, if any.
    pub fn previous_remote_ref(&self) -> Option<&str> {
        self.inner.previous_remote_ref.as_deref()
    }

    /// The stage this attempt recorded so far (set before the store answers, so an unknown
    /// answer counts as begun).
    pub fn stage(&self) -> Stage {
        *self.inner.stage.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records `CALLING`; call the downstream only when this succeeds.
    pub async fn calling(&self) -> Result<(), LedgerError> {
        self.advance(Stage::Calling);
        let inner = &self.inner;
        inner
            .client
            .record_calling(&inner.target, inner.fence, None)
            .await?;
        Ok(())
    }

    /// Records `REMOTE_CONFIRMED` with the downstream's reference.
    pub async fn confirmed(&self, remote_ref: &str) -> Result<(), LedgerError> {
        self.advance(Stage::RemoteConfirmed);
        let inner = &self.inner;
        inner
            .client
            .record_confirmed(&inner.target, inner.fence, remote_ref)
            .await?;
        Ok(())
    }

    fn advance(&self, stage: Stage) {
        let mut current = self.inner.stage.lock().unwrap_or_else(|e| e.into_inner());
        if stage > *current {
            *current = stage;
        }
    }
}

/// An axum handler takes `ledger: Ledger` as an argument on a protected route.
impl<S: Send + Sync> FromRequestParts<S> for Ledger {
    type Rejection = (StatusCode, &'static str);

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        parts.extensions.get::<Ledger>().cloned().ok_or((
            StatusCode::INTERNAL_SERVER_ERROR,
            "no idempotency ledger: the route is not protected by the idempotency layer",
        ))
    }
}
