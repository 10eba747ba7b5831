//! Record statistics: counts by state and the oldest unfinished record.
//!
//! The store keeps no per-state counters (they would have to be maintained by apply and
//! snapshotted), so the numbers come from a scan of the applied records. The scan is bounded
//! ([`SCAN_LIMIT`]) and cached for a few seconds, so scraping `/metrics` or calling
//! `Admin.Status` in a loop cannot turn into a full-table scan per request; when the bound is
//! hit the result says so (`truncated`) instead of pretending to be complete.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use idem_core::{State, Timestamp};

use crate::backend::{Backend, RequestError};

/// Most records one statistics scan reads.
pub const SCAN_LIMIT: usize = 100_000;
/// Records read per scan page.
const PAGE: usize = 1000;
/// How long a scan result is reused.
pub const CACHE_FOR: Duration = Duration::from_secs(5);

/// Counts from one bounded scan.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecordStats {
    /// Records by state.
    pub by_state: BTreeMap<State, u64>,
    /// Creation time of the oldest PENDING or IN_PROGRESS record.
    pub oldest_active: Option<Timestamp>,
    /// Records read.
    pub scanned: u64,
    /// True when the scan stopped at its bound before the end.
    pub truncated: bool,
}

impl RecordStats {
    /// Age of the oldest PENDING or IN_PROGRESS record at `now_ms`, in ms (0 when none).
    pub fn oldest_active_age_ms(&self, now_ms: u64) -> u64 {
        self.oldest_active
            .map_or(0, |created| now_ms.saturating_sub(created.millis()))
    }

    /// Scans at most `limit` records of `backend`.
    pub fn collect(backend: &dyn Backend, limit: usize) -> Result<RecordStats, RequestError> {
        let mut stats = RecordStats::default();
        let mut after: Option<Vec<u8>> = None;
        loop {
            let page_limit = PAGE.min(limit.saturating_sub(stats.scanned as usize));
            if page_limit == 0 {
                stats.truncated = true;
                return Ok(stats);
            }
            let page = backend.scan(&[], after.as_deref(), page_limit)?;
            for record in &page {
                *stats.by_state.entry(record.state).or_default() += 1;
                if record.state.is_active() {
                    stats.oldest_active = Some(match stats.oldest_active {
                        Some(oldest) => oldest.min(record.created_at),
                        None => record.created_at,
                    });
                }
            }
            stats.scanned += page.len() as u64;
            match page.last() {
                Some(last) if page.len() == page_limit => after = Some(last.key.encode()),
                _ => return Ok(stats),
            }
        }
    }
}

/// A [`RecordStats`] reused for [`CACHE_FOR`].
#[derive(Default)]
pub struct StatsCache {
    last: Mutex<Option<(Instant, RecordStats)>>,
}

impl StatsCache {
    /// Fresh enough statistics: the cached ones, or a new scan on a blocking thread.
    pub async fn get(&self, backend: Arc<dyn Backend>) -> Result<RecordStats, RequestError> {
        if let Some((at, stats)) = self.lock().as_ref() {
            if at.elapsed() < CACHE_FOR {
                return Ok(stats.clone());
            }
        }
        let stats =
            tokio::task::spawn_blocking(move || RecordStats::collect(backend.as_ref(), SCAN_LIMIT))
                .await
                .map_err(|e| RequestError::Internal(format!("statistics scan failed: {e}")))??;
        *self.lock() = Some((Instant::now(), stats.clone()));
        Ok(stats)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<(Instant, RecordStats)>> {
        self.last
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}
