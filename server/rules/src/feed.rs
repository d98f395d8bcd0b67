//! Where a reader of the change feed goes on from, or why it must list again.

use crate::refusal::{Refusal, Stale};

/// What one read of the feed after `since` found, besides its items.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FeedBounds {
    /// Every revision up to this one had committed when the read began.
    pub head: i64,
    /// The store's epoch when the read began: it names the history the revisions count.
    pub epoch: String,
    /// The revision of the last item read (`since` when none was).
    pub last: i64,
    /// More changes follow the last item, up to the head.
    pub more: bool,
    /// History was pruned through this revision, read after the changes.
    pub pruned: i64,
}

/// The revision a reader passes as its next `since`: after a full page, its last change;
/// after one that read everything, the head. A reader whose position is not in the
/// store's retained history is refused (`410 gone`) and must list again: behind what
/// retention kept, ahead of the head, or read in another epoch (`epoch`, when the reader
/// says which): the database was restored or replaced since.
pub fn next_since(since: i64, epoch: Option<&str>, read: &FeedBounds) -> Result<i64, Refusal> {
    let stale = match epoch {
        Some(given) if given != read.epoch => Some(Stale::OtherEpoch {
            given: given.to_owned(),
        }),
        _ if since > read.head => Some(Stale::Ahead),
        _ if since < read.pruned => Some(Stale::Pruned {
            through: read.pruned,
        }),
        _ => None,
    };
    if let Some(stale) = stale {
        return Err(Refusal::Gone {
            since,
            stale,
            revision: read.head,
            epoch: read.epoch.clone(),
        });
    }
    Ok(if read.more { read.last } else { read.head })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(head: i64, pruned: i64) -> FeedBounds {
        FeedBounds {
            head,
            epoch: "e1".into(),
            last: head,
            more: false,
            pruned,
        }
    }

    /// Why the reader at `since` is gone; it resumes from the head, 7, of epoch `e1`.
    fn stale(given: i64, result: Result<i64, Refusal>) -> Stale {
        match result {
            Err(Refusal::Gone {
                since,
                stale,
                revision,
                epoch,
            }) => {
                assert_eq!(since, given);
                assert_eq!(
                    (revision, epoch.as_str()),
                    (7, "e1"),
                    "the current revision to resume from"
                );
                stale
            }
            other => panic!("expected gone, got {other:?}"),
        }
    }

    #[test]
    fn a_position_in_the_retained_history_reads_on() {
        assert_eq!(next_since(3, Some("e1"), &read(7, 2)).ok(), Some(7));
        assert_eq!(next_since(2, None, &read(7, 2)).ok(), Some(7));
        assert_eq!(next_since(7, Some("e1"), &read(7, 2)).ok(), Some(7));
        let full = FeedBounds {
            last: 5,
            more: true,
            ..read(7, 2)
        };
        assert_eq!(next_since(3, None, &full).ok(), Some(5));
    }

    #[test]
    fn a_position_outside_it_is_gone() {
        assert_eq!(
            stale(1, next_since(1, None, &read(7, 2))),
            Stale::Pruned { through: 2 }
        );
        // Ahead of the head: a database restored behind the reader.
        assert_eq!(stale(8, next_since(8, None, &read(7, 0))), Stale::Ahead);
        // Restored, then written past the reader: only the epoch tells.
        assert_eq!(
            stale(5, next_since(5, Some("e0"), &read(7, 0))),
            Stale::OtherEpoch { given: "e0".into() }
        );
    }
}
