//! The side-effect ledger service: the downstream that workers "charge".
//!
//! It stands in for a payment provider: a separate service (HTTP on the hub namespace, so it
//! is reached over the network like a real downstream, and can be queried with curl) that
//! records every execution request with its key, operation id, fence and calling process into
//! a [`Ledger`]. Like a real idempotent downstream it deduplicates by operation id (a repeat
//! is recorded as a duplicate, without effect), and it answers "did operation X execute?",
//! which a worker that took over a key whose previous stage was `CALLING` must ask before
//! executing. Its record is what the at-most-once checker counts.
//!
//! | request | answer |
//! |---|---|
//! | `POST /execute?key=K&operation_id=O&fence=F&process=P` | `executed` or `duplicate` |
//! | `GET /executed?operation_id=O` | `true` or `false` |
//! | `GET /ledger` | the ledger as EDN lines |

mod client;

use std::sync::{Arc, Mutex, PoisonError};

use anyhow::Context as _;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::history::{Process, Recorder};
use crate::http::{self, Request};
use crate::ledger::Ledger;

pub use client::LedgerClient;

/// A running ledger service.
pub struct LedgerService {
    ledger: Arc<Mutex<Ledger>>,
    task: JoinHandle<()>,
    addr: String,
}

impl LedgerService {
    /// Starts the service on `addr`; entry times are taken from `recorder`'s clock, so they
    /// share the history's time base.
    pub async fn start(addr: &str, recorder: Arc<Recorder>) -> anyhow::Result<LedgerService> {
        let listener = TcpListener::bind(addr)
            .await
            .with_context(|| format!("ledger service: binding {addr}"))?;
        let addr = listener.local_addr()?.to_string();
        let ledger = Arc::new(Mutex::new(Ledger::new()));
        let state = (Arc::clone(&ledger), recorder);
        let task = tokio::spawn(http::serve(listener, move |req: Request| {
            let (ledger, recorder) = state.clone();
            async move { handle(&ledger, &recorder, &req) }
        }));
        Ok(LedgerService { ledger, task, addr })
    }

    /// The address it listens on.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// A copy of everything recorded so far.
    pub fn snapshot(&self) -> Ledger {
        self.ledger
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Stops serving and returns the ledger.
    pub fn stop(self) -> Ledger {
        self.task.abort();
        self.snapshot()
    }
}

fn handle(ledger: &Mutex<Ledger>, recorder: &Recorder, req: &Request) -> (u16, String) {
    let mut ledger = ledger.lock().unwrap_or_else(PoisonError::into_inner);
    let arg = |name: &str| req.query.get(name).filter(|v| !v.is_empty());
    match (req.method.as_str(), req.path.as_str()) {
        ("POST", "/execute") => {
            let (Some(key), Some(op)) = (arg("key"), arg("operation_id")) else {
                return (400, "key and operation_id are required\n".into());
            };
            let fence = arg("fence").and_then(|f| f.parse().ok());
            let process = arg("process")
                .and_then(|p| p.parse().ok())
                .map(Process::Client);
            let entry = ledger.record(key, op, fence, process, recorder.now());
            let answer = if entry.duplicate {
                "duplicate"
            } else {
                "executed"
            };
            (200, answer.into())
        }
        ("GET", "/executed") => {
            let Some(op) = arg("operation_id") else {
                return (400, "operation_id is required\n".into());
            };
            let done = ledger.entries().iter().any(|e| &e.operation_id == op);
            (200, done.to_string())
        }
        ("GET", "/ledger") => (200, ledger.to_edn()),
        _ => (404, "unknown request\n".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn records_executions_and_deduplicates_by_operation_id() {
        let recorder = Arc::new(Recorder::new());
        let service = LedgerService::start("127.0.0.1:0", recorder).await.unwrap();
        let client = LedgerClient::new(service.addr(), Duration::from_secs(5));
        assert!(!client.executed("op1").await.unwrap());
        assert!(!client.execute("k1", "op1", Some(1), 3).await.unwrap());
        assert!(client.execute("k1", "op1", Some(2), 4).await.unwrap());
        assert!(client.executed("op1").await.unwrap());
        let ledger = service.stop();
        assert_eq!(ledger.entries().len(), 2);
        assert_eq!(ledger.entries()[0].process, Some(Process::Client(3)));
        assert!(ledger.entries()[1].duplicate);
    }
}
