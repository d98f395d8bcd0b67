//! Pages of reads: at most `limit` items and 8 MiB of JSON, read in growing rounds, each
//! item held against the memory of answers as it is taken.

use argo_results_proto::{ResultState, Summary};

use super::error::StoreError;

/// What a page's items may weigh: docs/api.md, "4. Reading", allows 8 MiB of JSON in a page, of which
/// 4 KiB are kept for the page's envelope (summary, revision, continue token).
const PAGE_ITEMS_BYTES: usize = (8 << 20) - 4096;
/// Pages are read in rounds of rows, growing from the first to the last size: Postgres
/// sends every row a query asks for, so a page of large rows reads few rows past its
/// budget, and a page of small ones takes few rounds.
const FIRST_ROUND: usize = 16;
const LAST_ROUND: usize = 256;

/// The memory a page's items are held against from the moment each is taken until the
/// page is sent (the server's `--max-answer-memory`): a page grows by what it holds, so
/// that a small page takes little, and ends where the memory refuses more.
pub trait PageMemory: Sync {
    /// Holds `bytes` more for the page; `false` when the memory cannot take them.
    fn hold(&self, bytes: usize) -> bool;
}

/// The items of a page being read in rounds, within its limit, its byte budget and its
/// memory; the first item is always taken, however large, if the memory takes it.
pub(super) struct Filling<'m, T> {
    pub items: Vec<T>,
    memory: &'m dyn PageMemory,
    bytes: usize,
    limit: usize,
    /// An item was left out: more follow.
    pub more: bool,
    /// The rows the next round asks for, at most.
    round: usize,
    /// The rows the last round asked for, and how many it offered.
    asked: usize,
    offered: usize,
}

impl<'m, T> Filling<'m, T> {
    pub fn new(limit: u32, memory: &'m dyn PageMemory) -> Self {
        Filling {
            items: Vec::new(),
            memory,
            bytes: 0,
            limit: limit as usize,
            more: false,
            round: FIRST_ROUND,
            asked: 0,
            offered: 0,
        }
    }

    /// How many rows the next round reads (no more than fill the page, plus one that
    /// tells whether more follow), or `None` when the page is full or the rows ran out.
    pub fn next_round(&mut self) -> Option<usize> {
        if self.more || self.offered < self.asked {
            return None;
        }
        self.asked = self.round.min(self.limit + 1 - self.items.len());
        self.offered = 0;
        self.round = (self.round * 2).min(LAST_ROUND);
        Some(self.asked)
    }

    /// Takes `item`, which weighs `size` bytes of JSON, unless the page is full or its
    /// memory cannot hold the item: a page ends there and more follow, but a first item
    /// the memory refuses is [`StoreError::NoMemory`], the page being nothing.
    pub fn offer(&mut self, item: T, size: usize) -> Result<bool, StoreError> {
        self.offered += 1;
        // Each item after the first costs its separating comma too.
        let weight = size + usize::from(!self.items.is_empty());
        let full = self.items.len() == self.limit
            || (!self.items.is_empty() && self.bytes + weight > PAGE_ITEMS_BYTES);
        if full || !self.memory.hold(weight) {
            if self.items.is_empty() && !full {
                return Err(StoreError::NoMemory);
            }
            self.more = true;
            return Ok(false);
        }
        self.bytes += weight;
        self.items.push(item);
        Ok(true)
    }
}

/// A summary from a count per state.
pub(super) fn summarize(counts: Vec<(String, i64)>) -> Result<Summary, StoreError> {
    let mut summary = Summary::default();
    for (state, n) in counts {
        let n = u64::try_from(n).unwrap_or_default();
        match ResultState::parse(&state) {
            Some(ResultState::Expected) => summary.expected = n,
            Some(ResultState::Reporting) => summary.reporting = n,
            Some(ResultState::Completed) => summary.completed = n,
            Some(ResultState::Abandoned) => summary.abandoned = n,
            None => return Err(StoreError::Corrupt(format!("unknown state {state:?}"))),
        }
    }
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// Memory of `bytes`, as the page takes it.
    struct Budget(AtomicUsize);

    impl PageMemory for Budget {
        fn hold(&self, bytes: usize) -> bool {
            self.0
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| {
                    left.checked_sub(bytes)
                })
                .is_ok()
        }
    }

    /// Offers rows of `sizes` as the store reads them, round by round, with `memory`
    /// bytes; the page's sizes and whether more follow, or the error.
    fn fill_within(
        limit: u32,
        sizes: &[usize],
        memory: usize,
    ) -> Result<(Vec<usize>, bool, Vec<usize>), StoreError> {
        let memory = Budget(AtomicUsize::new(memory));
        let mut filling = Filling::new(limit, &memory);
        let mut rows = sizes.iter();
        let mut rounds = Vec::new();
        while let Some(asked) = filling.next_round() {
            rounds.push(asked);
            for &size in rows.by_ref().take(asked) {
                if !filling.offer(size, size)? {
                    break;
                }
            }
        }
        Ok((filling.items, filling.more, rounds))
    }

    fn fill(limit: u32, sizes: &[usize]) -> (Vec<usize>, bool, Vec<usize>) {
        fill_within(limit, sizes, usize::MAX).expect("memory enough")
    }

    #[test]
    fn pages_stop_at_their_limit_or_their_bytes() {
        let mb = 1_000_000;
        // Nine rows of a megabyte: eight fit in 8 MiB, the ninth says more follow.
        let (items, more, rounds) = fill(1000, &[mb; 9]);
        assert_eq!((items.len(), more, rounds), (8, true, vec![16]));
        // Larger than a page: alone on its page.
        let (items, more, _) = fill(1000, &[9 * mb, 10]);
        assert_eq!((items, more), (vec![9 * mb], true));
        // Small rows: rounds grow until the rows run out.
        let (items, more, rounds) = fill(1000, &[10; 40]);
        assert_eq!((items.len(), more, rounds), (40, false, vec![16, 32]));
        // The limit, then one row more tells that more follow.
        let (items, more, rounds) = fill(20, &[10; 21]);
        assert_eq!((items.len(), more, rounds), (20, true, vec![16, 5]));
        let (items, more, _) = fill(20, &[10; 20]);
        assert_eq!((items.len(), more), (20, false));
    }

    #[test]
    fn pages_end_where_their_memory_does() {
        // Room for two rows of 10 and their comma: the third waits for the next page.
        let (items, more, _) = fill_within(1000, &[10; 5], 21).expect("a page");
        assert_eq!((items, more), (vec![10, 10], true));
        // Room for exactly the rows: the page is whole.
        let (items, more, _) = fill_within(1000, &[10; 2], 21).expect("a page");
        assert_eq!((items, more), (vec![10, 10], false));
        // No room for the first row: no page at all, rather than an empty one that says
        // more follow from where it started.
        let refused = fill_within(1000, &[10; 5], 9).expect_err("no room");
        assert!(matches!(refused, StoreError::NoMemory), "{refused:?}");
        // No rows need no room.
        let (items, more, _) = fill_within(1000, &[], 0).expect("a page");
        assert_eq!((items, more), (vec![], false));
    }
}
