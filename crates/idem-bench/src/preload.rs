//! Bulk loading of completed records through the public API.
//!
//! The retry workload needs completed keys to retry, and the 10-million-records check needs a
//! full store; both are made the way production makes them (claim, then complete, through
//! the same backend), only with high concurrency and without measurement. A key that is
//! already completed (a rerun with the same prefix) counts as loaded.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::backend::{Backend, CallError, ClaimResult};
use crate::progress::Progress;

/// Stop loading after this many failed calls: the store is not healthy.
const MAX_ERRORS: u64 = 100;

/// What a load did.
#[derive(Debug, Clone, Default)]
pub struct Loaded {
    /// Records claimed and completed (or found completed).
    pub records: u64,
    /// Failed calls.
    pub errors: u64,
    /// The first failure, if any.
    pub first_error: Option<String>,
    /// Time taken.
    pub elapsed: Duration,
}

impl Loaded {
    /// Records per second.
    pub fn rate(&self) -> f64 {
        self.records as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// Claims and completes keys `name(0) .. name(count - 1)` with `concurrency` tasks spread
/// over `conns`.
pub async fn load<B: Backend>(
    conns: &[Arc<B>],
    name: impl Fn(u64) -> String + Send + Sync + 'static,
    count: u64,
    concurrency: usize,
    progress: Option<Progress>,
) -> Loaded {
    let started = Instant::now();
    let next = Arc::new(AtomicU64::new(0));
    let name = Arc::new(name);
    let progress = progress.map(Arc::new);
    let outcome = Arc::new(Mutex::new(Loaded::default()));
    let mut tasks = Vec::with_capacity(concurrency);
    for i in 0..concurrency.max(1) {
        let conn = conns[i % conns.len()].clone();
        let (next, name, progress, outcome) = (
            next.clone(),
            name.clone(),
            progress.clone(),
            outcome.clone(),
        );
        tasks.push(tokio::spawn(async move {
            loop {
                let n = next.fetch_add(1, Ordering::Relaxed);
                if n >= count {
                    break;
                }
                let key = name(n);
                let done = match conn.claim(&key).await {
                    Ok(ClaimResult::Acquired(token)) => conn.complete(&key, token).await,
                    Ok(ClaimResult::Replayed) => Ok(()),
                    Ok(other) => Err(CallError::Unexpected(other)),
                    Err(e) => Err(e),
                };
                let mut o = outcome.lock().unwrap_or_else(|p| p.into_inner());
                match done {
                    Ok(()) => o.records += 1,
                    Err(e) => {
                        o.errors += 1;
                        o.first_error.get_or_insert(e.to_string());
                        if o.errors >= MAX_ERRORS {
                            next.store(count, Ordering::Relaxed);
                        }
                    }
                }
                drop(o);
                if let Some(p) = &progress {
                    p.inc(1);
                }
            }
        }));
    }
    for task in tasks {
        // A panicking task is a bug in this file; its keys simply count as not loaded.
        let _ = task.await;
    }
    let mut loaded = outcome.lock().unwrap_or_else(|p| p.into_inner()).clone();
    loaded.elapsed = started.elapsed();
    loaded
}
