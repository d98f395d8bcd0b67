//! A small bounded cache whose entries expire: verified tokens and answers of the
//! Kubernetes API.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A token's SHA-256: caches key on it so that no token is kept in memory.
pub type TokenDigest = [u8; 32];

pub fn token_digest(token: &str) -> TokenDigest {
    let mut out = [0; 32];
    out.copy_from_slice(
        aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, token.as_bytes()).as_ref(),
    );
    out
}

#[derive(Debug)]
pub struct TtlCache<K, V> {
    entries: Mutex<HashMap<K, (V, Instant)>>,
    capacity: usize,
}

impl<K: Hash + Eq, V: Clone> TtlCache<K, V> {
    pub fn new(capacity: usize) -> Self {
        TtlCache {
            entries: Mutex::new(HashMap::new()),
            capacity,
        }
    }

    pub fn get(&self, key: &K) -> Option<V> {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries
            .get(key)
            .filter(|(_, expires)| *expires > Instant::now())
            .map(|(value, _)| value.clone())
    }

    pub fn insert(&self, key: K, value: V, ttl: Duration) {
        let now = Instant::now();
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if entries.len() >= self.capacity {
            entries.retain(|_, (_, expires)| *expires > now);
        }
        // Still full of live entries: start over rather than grow without bound.
        if entries.len() >= self.capacity {
            entries.clear();
        }
        entries.insert(key, (value, now + ttl));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_expire_and_the_size_stays_bounded() {
        let cache = TtlCache::new(2);
        cache.insert("a", 1, Duration::from_secs(60));
        cache.insert("gone", 2, Duration::ZERO);
        assert_eq!(cache.get(&"a"), Some(1));
        assert_eq!(cache.get(&"gone"), None);
        cache.insert("b", 3, Duration::from_secs(60));
        cache.insert("c", 4, Duration::from_secs(60));
        assert!(cache.entries.lock().expect("lock").len() <= 2);
        assert_eq!(cache.get(&"c"), Some(4));
    }
}
