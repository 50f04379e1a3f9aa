//! Sources caught stalling HTTP/2 flow control, per worker. Cutting a stalled connection frees
//! what it held, but a client that reconnects at once fills the cluster's slots again for another
//! `stall_timeout`. So for [`PENALTY`] after a cut, the source address may hold at most
//! [`MAX_CONNECTIONS`] HTTP/2 connections on this worker, each allowed one stream at a time
//! (SETTINGS_MAX_CONCURRENT_STREAMS = 1); further connections get GOAWAY at once. HTTP/1.1 from
//! the same address is not affected, and a well-behaved HTTP/2 client behind the same address
//! (NAT) is slowed, not refused. The table is bounded ([`MAX_ENTRIES`]): when full, expired
//! entries go first, then the one closest to expiry.

use std::cell::RefCell;
use std::collections::HashMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// How long a source stays penalized after one of its connections was cut for stalling.
pub const PENALTY: Duration = Duration::from_secs(60);
/// HTTP/2 connections a penalized source may hold at once (per worker).
pub const MAX_CONNECTIONS: usize = 4;
/// Concurrent streams per connection of a penalized source.
pub const MAX_STREAMS: u32 = 1;
/// Sources remembered per worker.
pub const MAX_ENTRIES: usize = 4096;

#[derive(Debug, Clone, Copy)]
struct Entry {
    until: Instant,
    open: usize,
}

#[derive(Debug, Default)]
pub struct PenaltyBox {
    entries: RefCell<HashMap<IpAddr, Entry>>,
}

/// What a new HTTP/2 connection from a source may do.
#[derive(Debug, PartialEq, Eq)]
pub enum Admit {
    /// Not penalized.
    Free,
    /// Penalized: one stream at a time; call [`PenaltyBox::closed`] when the connection ends.
    Limited,
    /// Penalized and at its connection bound.
    Refused,
}

impl PenaltyBox {
    /// Penalizes `ip` until `now + PENALTY` (again, if it already was).
    pub fn penalize(&self, ip: IpAddr, now: Instant) {
        let mut entries = self.entries.borrow_mut();
        if !entries.contains_key(&ip) && entries.len() >= MAX_ENTRIES {
            entries.retain(|_, e| e.until > now || e.open > 0);
            if entries.len() >= MAX_ENTRIES {
                let soonest = entries.iter().filter(|(_, e)| e.open == 0).min_by_key(|(_, e)| e.until).map(|(k, _)| *k);
                match soonest {
                    Some(k) => {
                        entries.remove(&k);
                    }
                    None => return,
                }
            }
        }
        let e = entries.entry(ip).or_insert(Entry { until: now, open: 0 });
        e.until = now + PENALTY;
    }

    /// Decides for a new HTTP/2 connection from `ip` (counts it when `Limited`).
    pub fn admit(&self, ip: IpAddr, now: Instant) -> Admit {
        let mut entries = self.entries.borrow_mut();
        let Some(e) = entries.get_mut(&ip) else { return Admit::Free };
        if e.until <= now {
            if e.open == 0 {
                entries.remove(&ip);
            }
            return Admit::Free;
        }
        if e.open >= MAX_CONNECTIONS {
            return Admit::Refused;
        }
        e.open += 1;
        Admit::Limited
    }

    /// A `Limited` connection from `ip` ended.
    pub fn closed(&self, ip: IpAddr) {
        let mut entries = self.entries.borrow_mut();
        if let Some(e) = entries.get_mut(&ip) {
            e.open = e.open.saturating_sub(1);
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.borrow().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(n: u32) -> IpAddr {
        IpAddr::from(std::net::Ipv4Addr::from(n))
    }

    #[test]
    fn a_penalized_source_gets_a_few_limited_connections_until_the_penalty_ends() {
        let b = PenaltyBox::default();
        let now = Instant::now();
        assert_eq!(b.admit(ip(1), now), Admit::Free);
        b.penalize(ip(1), now);
        for _ in 0..MAX_CONNECTIONS {
            assert_eq!(b.admit(ip(1), now), Admit::Limited);
        }
        assert_eq!(b.admit(ip(1), now), Admit::Refused);
        assert_eq!(b.admit(ip(2), now), Admit::Free, "other sources are not affected");
        b.closed(ip(1));
        assert_eq!(b.admit(ip(1), now), Admit::Limited, "a closed connection frees its place");
        assert_eq!(b.admit(ip(1), now + PENALTY), Admit::Free, "the penalty ends");
    }

    #[test]
    fn the_table_stays_bounded() {
        let b = PenaltyBox::default();
        let now = Instant::now();
        for n in 0..(MAX_ENTRIES as u32 + 100) {
            b.penalize(ip(n), now + Duration::from_millis(u64::from(n)));
        }
        assert!(b.len() <= MAX_ENTRIES);
        // The newest are kept; the ones closest to expiry went first.
        assert_eq!(b.admit(ip(MAX_ENTRIES as u32 + 99), now), Admit::Limited);
        assert_eq!(b.admit(ip(0), now), Admit::Free);
    }
}
