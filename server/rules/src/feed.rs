//! Where a reader of the change feed goes on from, or why it must list again.

use crate::refusal::Refusal;

/// What one read of the feed after `since` found, besides its items.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FeedBounds {
    /// Every revision up to this one had committed when the read began.
    pub head: i64,
    /// The revision of the last item read (`since` when none was).
    pub last: i64,
    /// More changes follow the last item, up to the head.
    pub more: bool,
    /// History was pruned through this revision, read after the changes.
    pub pruned: i64,
}

/// The revision a reader passes as its next `since`: after a full page, its last change;
/// after one that read everything, the head. A reader behind the retained history is
/// refused (`410 gone`): it must list again.
pub fn next_since(since: i64, read: &FeedBounds) -> Result<i64, Refusal> {
    if since < read.pruned {
        return Err(Refusal::Gone {
            since,
            pruned: read.pruned,
            revision: read.head,
        });
    }
    Ok(if read.more {
        read.last
    } else {
        read.head.max(since)
    })
}
