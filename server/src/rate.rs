//! A token bucket: refilled at `rate` units a second up to `capacity`. It bounds the calls
//! sent to the Kubernetes API and the bytes each pod may change.

use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
pub struct Bucket {
    /// What is left; below zero, what was spent ahead of the refill.
    level: f64,
    at: Instant,
    rate: f64,
    capacity: f64,
}

impl Bucket {
    pub fn full(rate: f64, capacity: f64) -> Self {
        Bucket {
            level: capacity,
            at: Instant::now(),
            rate,
            capacity,
        }
    }

    fn refill(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.level = (self.level + elapsed * self.rate).min(self.capacity);
        self.at = now;
    }

    /// Takes `amount` now, or reserves it for when the refill brings it if that is within
    /// `wait`: how long the caller must wait before using it. `None`: later than `wait`,
    /// and nothing was taken.
    pub fn reserve(&mut self, amount: f64, wait: Duration) -> Option<Duration> {
        self.refill(Instant::now());
        let after = self.level - amount;
        let delay = Duration::from_secs_f64((-after / self.rate).max(0.0));
        if delay > wait {
            return None;
        }
        self.level = after;
        Some(delay)
    }

    /// Whether anything is left to spend.
    pub fn has_some(&mut self) -> bool {
        self.refill(Instant::now());
        self.level > 0.0
    }

    /// Spends `amount`, going into debt if the bucket holds less.
    pub fn spend(&mut self, amount: f64) {
        self.refill(Instant::now());
        self.level -= amount;
    }

    /// Whether the bucket is full again, so that forgetting it changes nothing.
    pub fn is_full(&mut self) -> bool {
        self.refill(Instant::now());
        self.level >= self.capacity
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bucket_lends_within_the_wait_and_refills() {
        let mut bucket = Bucket::full(10.0, 2.0);
        assert_eq!(bucket.reserve(1.0, Duration::ZERO), Some(Duration::ZERO));
        assert_eq!(bucket.reserve(1.0, Duration::ZERO), Some(Duration::ZERO));
        // Empty: the next unit comes in 0.1 s, the one after in 0.2 s.
        assert_eq!(bucket.reserve(1.0, Duration::from_millis(50)), None);
        let delay = bucket
            .reserve(1.0, Duration::from_secs(1))
            .expect("reserved");
        assert!(delay > Duration::from_millis(50) && delay <= Duration::from_millis(100));
        assert!(!bucket.has_some());
        assert!(!bucket.is_full());

        let mut budget = Bucket::full(1.0, 100.0);
        assert!(budget.has_some());
        budget.spend(150.0);
        assert!(!budget.has_some(), "in debt");
    }
}
