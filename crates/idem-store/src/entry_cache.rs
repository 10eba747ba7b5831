//! The most recent Raft log entries, in memory.
//!
//! Every committed entry is read back from the log at least three times right after it was
//! appended: once by the state machine (openraft applies from the log, not from the
//! proposal) and once per follower by the replication tasks. From RocksDB each read is a
//! hop to the blocking pool, a new iterator and a decode; on the claim path, where a single
//! entry is appended, replicated, committed and applied within a millisecond, those hops
//! were a large share of the latency and of the context switches. Serving the tail of the
//! log from memory makes them a lock and a clone.
//!
//! The cache holds a contiguous *suffix* of the log: the entries appended since the node
//! started (or since the cache last had to be reset), bounded in entries and bytes by
//! dropping the oldest. Every change to the log goes through [`LogStore`](crate::LogStore),
//! which updates the cache in the same order as the log (append, truncate, purge), so a
//! range that starts at or after the cache's first index is answered exactly: whatever the
//! log holds from there on, the cache holds too. Anything older is read from RocksDB.

use std::collections::VecDeque;

use openraft::entry::RaftEntry;

use crate::types::Entry;

/// Default bound on the entries kept.
pub(crate) const MAX_ENTRIES: usize = 16 * 1024;

/// Default bound on the encoded bytes kept.
pub(crate) const MAX_BYTES: usize = 16 << 20;

/// A cached entry and its encoded size.
struct Cached {
    entry: Entry,
    bytes: usize,
}

/// A bounded, contiguous suffix of the Raft log.
pub(crate) struct EntryCache {
    entries: VecDeque<Cached>,
    bytes: usize,
    max_entries: usize,
    max_bytes: usize,
}

impl EntryCache {
    /// An empty cache keeping at most `max_entries` entries and `max_bytes` encoded bytes
    /// (and always the last entry appended).
    pub(crate) fn new(max_entries: usize, max_bytes: usize) -> Self {
        EntryCache {
            entries: VecDeque::new(),
            bytes: 0,
            max_entries: max_entries.max(1),
            max_bytes,
        }
    }

    fn first_index(&self) -> Option<u64> {
        self.entries.front().map(|c| c.entry.index())
    }

    fn next_index(&self) -> Option<u64> {
        self.entries.back().map(|c| c.entry.index() + 1)
    }

    /// Records entries appended to the log (with their encoded sizes), in order. An append
    /// that starts inside the cached range replaces what follows (the log was overwritten
    /// there); one that does not continue the cached range restarts the cache.
    pub(crate) fn append(&mut self, appended: Vec<(Entry, usize)>) {
        let Some(start) = appended.first().map(|(entry, _)| entry.index()) else {
            return;
        };
        if self.next_index() != Some(start) {
            match self.first_index() {
                Some(first) if first < start && Some(start) < self.next_index() => {
                    self.truncate_from(start)
                }
                _ => self.clear(),
            }
        }
        for (entry, bytes) in appended {
            self.bytes += bytes;
            self.entries.push_back(Cached { entry, bytes });
        }
        self.evict();
    }

    /// Forgets entries with index `>= from` (the log was truncated there).
    pub(crate) fn truncate_from(&mut self, from: u64) {
        while self.entries.back().is_some_and(|c| c.entry.index() >= from) {
            if let Some(dropped) = self.entries.pop_back() {
                self.bytes -= dropped.bytes;
            }
        }
    }

    /// Forgets entries with index `<= upto` (the log was purged up to there).
    pub(crate) fn purge_upto(&mut self, upto: u64) {
        while self
            .entries
            .front()
            .is_some_and(|c| c.entry.index() <= upto)
        {
            self.pop_front();
        }
    }

    /// The log's entries from `start` (up to `end`, exclusive, when given), if the cache
    /// holds the log from `start` on; `None` when part of the range is older than the cache.
    /// Stops once `max_bytes` were returned (after at least one entry).
    pub(crate) fn range(
        &self,
        start: u64,
        end: Option<u64>,
        max_bytes: usize,
    ) -> Option<Vec<Entry>> {
        let first = self.first_index()?;
        if start < first {
            return None;
        }
        let skip = usize::try_from(start - first).ok()?;
        let mut out = Vec::new();
        let mut bytes = 0;
        for cached in self.entries.iter().skip(skip) {
            let full = !out.is_empty() && bytes >= max_bytes;
            if full || end.is_some_and(|end| cached.entry.index() >= end) {
                break;
            }
            bytes += cached.bytes;
            out.push(cached.entry.clone());
        }
        Some(out)
    }

    fn clear(&mut self) {
        self.entries.clear();
        self.bytes = 0;
    }

    fn pop_front(&mut self) {
        if let Some(dropped) = self.entries.pop_front() {
            self.bytes -= dropped.bytes;
        }
    }

    /// Drops the oldest entries past the bounds, keeping at least the newest one.
    fn evict(&mut self) {
        while self.entries.len() > 1
            && (self.entries.len() > self.max_entries || self.bytes > self.max_bytes)
        {
            self.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use openraft::entry::RaftEntry;

    use super::*;
    use crate::types::TypeConfig;

    fn entry(term: u64, index: u64) -> (Entry, usize) {
        let log_id = openraft::testing::log_id::<TypeConfig>(term, 1, index);
        (Entry::new_blank(log_id), 10)
    }

    fn entries(term: u64, range: std::ops::Range<u64>) -> Vec<(Entry, usize)> {
        range.map(|i| entry(term, i)).collect()
    }

    fn ids(entries: &[Entry]) -> Vec<(u64, u64)> {
        entries
            .iter()
            .map(|e| (e.log_id().committed_leader_id().term, e.index()))
            .collect()
    }

    fn cache() -> EntryCache {
        EntryCache::new(MAX_ENTRIES, MAX_BYTES)
    }

    #[test]
    fn an_empty_cache_answers_nothing() {
        assert!(cache().range(0, None, usize::MAX).is_none());
    }

    #[test]
    fn ranges_inside_the_suffix_are_answered_and_older_ones_are_not() {
        let mut c = cache();
        c.append(entries(1, 5..10));
        assert_eq!(
            ids(&c.range(5, None, usize::MAX).unwrap()),
            (5..10).map(|i| (1, i)).collect::<Vec<_>>()
        );
        assert_eq!(
            ids(&c.range(7, Some(9), usize::MAX).unwrap()),
            vec![(1, 7), (1, 8)]
        );
        assert!(
            c.range(4, None, usize::MAX).is_none(),
            "index 4 is older than the cache"
        );
        assert!(
            c.range(12, None, usize::MAX).unwrap().is_empty(),
            "past the log's end"
        );
    }

    #[test]
    fn an_overwriting_append_replaces_the_tail() {
        let mut c = cache();
        c.append(entries(1, 1..6));
        c.append(entries(2, 3..5));
        assert_eq!(
            ids(&c.range(1, None, usize::MAX).unwrap()),
            vec![(1, 1), (1, 2), (2, 3), (2, 4)]
        );
    }

    #[test]
    fn an_append_that_does_not_continue_the_cache_restarts_it() {
        let mut c = cache();
        c.append(entries(1, 1..4));
        c.append(entries(1, 10..12));
        assert!(c.range(3, None, usize::MAX).is_none());
        assert_eq!(
            ids(&c.range(10, None, usize::MAX).unwrap()),
            vec![(1, 10), (1, 11)]
        );
        c.append(entries(2, 0..2));
        assert_eq!(
            ids(&c.range(0, None, usize::MAX).unwrap()),
            vec![(2, 0), (2, 1)]
        );
    }

    #[test]
    fn truncate_and_purge_follow_the_log() {
        let mut c = cache();
        c.append(entries(1, 1..10));
        c.truncate_from(7);
        c.purge_upto(3);
        assert!(c.range(3, None, usize::MAX).is_none());
        assert_eq!(
            ids(&c.range(4, None, usize::MAX).unwrap()),
            vec![(1, 4), (1, 5), (1, 6)]
        );
        c.append(entries(1, 7..8));
        assert_eq!(c.range(4, None, usize::MAX).unwrap().len(), 4);
    }

    #[test]
    fn the_oldest_entries_are_evicted_past_the_bounds() {
        let mut c = EntryCache::new(4, 25);
        c.append(entries(1, 1..4)); // 30 bytes: over 25
        assert!(c.range(1, None, usize::MAX).is_none());
        assert_eq!(c.range(2, None, usize::MAX).unwrap().len(), 2);
        c.append(entries(1, 4..10));
        assert_eq!(
            ids(&c.range(8, None, usize::MAX).unwrap()),
            vec![(1, 8), (1, 9)]
        );
        let mut one = EntryCache::new(4, 0);
        one.append(entries(1, 1..3));
        assert_eq!(
            one.range(2, None, usize::MAX).unwrap().len(),
            1,
            "the newest entry stays"
        );
    }

    #[test]
    fn reads_stop_at_the_byte_limit_after_one_entry() {
        let mut c = cache();
        c.append(entries(1, 1..10));
        assert_eq!(c.range(1, None, 25).unwrap().len(), 3);
        assert_eq!(c.range(1, None, 0).unwrap().len(), 1);
    }
}
