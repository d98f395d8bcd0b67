//! Change notification: wakes long-polling feed readers when a commit lands, this
//! replica's (published by whoever committed) or, on Postgres, another's (published by
//! [`super::postgres::follow`]).
//!
//! It is only a hint. Readers always read the changes themselves from the database, so a
//! missed wake-up can delay a change but never lose one.

use tokio::sync::watch;

#[derive(Debug)]
pub struct Notifier {
    latest: watch::Sender<i64>,
}

impl Notifier {
    pub fn new(revision: i64) -> Self {
        Notifier {
            latest: watch::Sender::new(revision),
        }
    }

    /// Records that `revision` committed; wakes waiters if it is newer than what they saw.
    pub fn publish(&self, revision: i64) {
        self.latest.send_if_modified(|latest| {
            let newer = revision > *latest;
            if newer {
                *latest = revision;
            }
            newer
        });
    }

    /// The newest revision known to have committed.
    pub fn latest(&self) -> i64 {
        *self.latest.borrow()
    }

    /// The database's head went back to `revision` (a restore): what was newer is gone.
    pub fn rewind(&self, revision: i64) {
        self.latest.send_replace(revision);
    }

    pub fn subscribe(&self) -> watch::Receiver<i64> {
        self.latest.subscribe()
    }
}
