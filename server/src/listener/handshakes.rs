//! New TLS connections per peer, rate-limited (`--max-tls-handshakes-per-peer`): a TLS
//! handshake costs the server about 0.3 ms of CPU with an ECDSA key and 0.5 ms with RSA,
//! so a peer that connects again and again would otherwise spend it without a token. A
//! peer may open as many connections at once as it may hold (`--max-connections-per-peer`),
//! then the rate's worth a second; past it, its new connections are closed as they arrive,
//! before the handshake. Clients keep their connections: a wait container opens one.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;

use crate::rate::Bucket;

/// Peers remembered at once; past it, those whose allowance is whole again are forgotten.
const PEERS_REMEMBERED: usize = 10_000;

#[derive(Debug)]
pub struct Handshakes {
    per_second: f64,
    burst: f64,
    peers: Mutex<HashMap<IpAddr, Bucket>>,
}

impl Handshakes {
    /// `per_second` handshakes a second from one peer after a burst of `burst`.
    pub fn new(per_second: u32, burst: usize) -> Self {
        let per_second = f64::from(per_second);
        Handshakes {
            per_second,
            burst: (burst as f64).max(per_second),
            peers: Mutex::new(HashMap::new()),
        }
    }

    /// Whether `peer` may start one more handshake now; it is counted if so.
    pub fn admit(&self, peer: IpAddr) -> bool {
        let mut peers = self.peers.lock().unwrap_or_else(|e| e.into_inner());
        if peers.len() >= PEERS_REMEMBERED && !peers.contains_key(&peer) {
            peers.retain(|_, allowance| !allowance.is_full());
            // Still full of peers that spent theirs: start over rather than grow.
            if peers.len() >= PEERS_REMEMBERED {
                peers.clear();
            }
        }
        let (per_second, burst) = (self.per_second, self.burst);
        let allowance = peers
            .entry(peer)
            .or_insert_with(|| Bucket::full(per_second, burst));
        allowance.reserve(1.0, std::time::Duration::ZERO).is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peer_gets_its_burst_then_its_rate_and_others_theirs() {
        let handshakes = Handshakes::new(2, 3);
        let (attacker, other): (IpAddr, IpAddr) = ([127, 0, 0, 2].into(), [127, 0, 0, 1].into());
        let admitted = (0..20).filter(|_| handshakes.admit(attacker)).count();
        assert_eq!(admitted, 3, "the burst, at once");
        assert!(
            handshakes.admit(other),
            "another peer keeps its own allowance"
        );
        std::thread::sleep(std::time::Duration::from_millis(600));
        assert!(handshakes.admit(attacker), "the rate refills it");
    }

    #[test]
    fn the_burst_is_at_least_a_seconds_worth() {
        let handshakes = Handshakes::new(5, 1);
        let peer: IpAddr = [127, 0, 0, 2].into();
        let admitted = (0..20).filter(|_| handshakes.admit(peer)).count();
        assert_eq!(admitted, 5, "a second's worth, at once");
    }
}
