//! Change notification: wakes long-polling feed readers when a commit lands, this
//! replica's (published by whoever committed) or, on Postgres, another's (published by
//! `store/postgres/follow.rs`).
//!
//! It is only a hint. Readers always read the changes themselves from the database, so a
//! missed wake-up can delay a change but never lose one. A reader of one namespace is woken
//! only by commits that changed it (or whose namespaces are not known), so that watches on
//! a quiet namespace cost nothing while others write.

use std::collections::HashMap;
use std::sync::Mutex;

use tokio::sync::watch;

/// Where a commit made its changes.
#[derive(Debug, Clone, Copy)]
pub enum Changed<'a> {
    /// In these namespaces.
    In(&'a [&'a str]),
    /// Anywhere: a head read, a retention pass, a replica that did not say.
    Anywhere,
}

#[derive(Debug)]
pub struct Notifier {
    /// Every commit's revision: what readers of all namespaces wait on.
    latest: watch::Sender<i64>,
    /// One channel per namespace that a reader waits on now, made by [`Self::subscribe`]
    /// and dropped once nobody waits on it.
    namespaces: Mutex<HashMap<String, watch::Sender<i64>>>,
}

/// Moves `sender` to `revision` if that is newer, waking its receivers.
fn advance(sender: &watch::Sender<i64>, revision: i64) {
    sender.send_if_modified(|latest| {
        let newer = revision > *latest;
        if newer {
            *latest = revision;
        }
        newer
    });
}

impl Notifier {
    pub fn new(revision: i64) -> Self {
        Notifier {
            latest: watch::Sender::new(revision),
            namespaces: Mutex::new(HashMap::new()),
        }
    }

    fn namespaces(&self) -> std::sync::MutexGuard<'_, HashMap<String, watch::Sender<i64>>> {
        self.namespaces.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records that `revision` committed `changed`; wakes the readers it concerns if it is
    /// newer than what they saw.
    pub fn publish(&self, revision: i64, changed: Changed<'_>) {
        advance(&self.latest, revision);
        let mut namespaces = self.namespaces();
        namespaces.retain(|_, sender| sender.receiver_count() > 0);
        match changed {
            Changed::Anywhere => namespaces.values().for_each(|s| advance(s, revision)),
            Changed::In(changed) => changed
                .iter()
                .filter_map(|namespace| namespaces.get(*namespace))
                .for_each(|sender| advance(sender, revision)),
        }
    }

    /// The newest revision known to have committed.
    pub fn latest(&self) -> i64 {
        *self.latest.borrow()
    }

    /// The database's head went back to `revision` (a restore): what was newer is gone.
    pub fn rewind(&self, revision: i64) {
        self.latest.send_replace(revision);
        for sender in self.namespaces().values() {
            sender.send_replace(revision);
        }
    }

    /// Wakes on the commits that changed `namespace`, or on every commit for `None`.
    pub fn subscribe(&self, namespace: Option<&str>) -> watch::Receiver<i64> {
        let Some(namespace) = namespace else {
            return self.latest.subscribe();
        };
        let latest = self.latest();
        self.namespaces()
            .entry(namespace.to_owned())
            .or_insert_with(|| watch::Sender::new(latest))
            .subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_commit_wakes_the_readers_of_its_namespaces_and_of_all() {
        let notifier = Notifier::new(0);
        let mut all = notifier.subscribe(None);
        let mut quiet = notifier.subscribe(Some("quiet"));
        let mut busy = notifier.subscribe(Some("busy"));
        notifier.publish(1, Changed::In(&["busy"]));
        assert!(all.has_changed().expect("open"));
        assert!(busy.has_changed().expect("open"));
        assert!(!quiet.has_changed().expect("open"));
        assert_eq!(*busy.borrow_and_update(), 1);
        all.borrow_and_update();
        notifier.publish(2, Changed::Anywhere);
        for receiver in [&mut all, &mut quiet, &mut busy] {
            assert_eq!(*receiver.borrow_and_update(), 2);
        }
        // An older revision wakes nobody.
        notifier.publish(1, Changed::In(&["busy"]));
        assert!(!busy.has_changed().expect("open"));
    }

    #[test]
    fn a_namespace_nobody_waits_on_is_forgotten() {
        let notifier = Notifier::new(5);
        let reader = notifier.subscribe(Some("gone"));
        assert_eq!(*reader.borrow(), 5, "starts at the latest revision");
        drop(reader);
        notifier.publish(6, Changed::In(&["gone"]));
        assert!(notifier.namespaces().is_empty());
    }

    #[test]
    fn a_rewind_reaches_every_reader() {
        let notifier = Notifier::new(9);
        let mut reader = notifier.subscribe(Some("ns"));
        notifier.rewind(3);
        assert_eq!(*reader.borrow_and_update(), 3);
        assert_eq!(notifier.latest(), 3);
    }
}
