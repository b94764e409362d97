//! Failed authentication attempts per client address: past
//! [`MAX_FAILURES`] in a [`WINDOW`], an address is refused (429) until its
//! window ends, so guessing secrets over the network is slow. Memory is
//! bounded: at most [`MAX_ADDRESSES`] addresses are tracked, the oldest
//! windows forgotten first.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub const WINDOW: Duration = Duration::from_secs(60);
pub const MAX_FAILURES: u32 = 20;
const MAX_ADDRESSES: usize = 10_000;

#[derive(Default)]
pub struct FailureLimiter {
    by_ip: Mutex<HashMap<IpAddr, (Instant, u32)>>,
}

impl FailureLimiter {
    /// Counts a failure of `ip`.
    pub fn fail(&self, ip: IpAddr) {
        self.fail_at(ip, Instant::now());
    }

    /// Whether `ip` has failed too often lately.
    pub fn throttled(&self, ip: IpAddr) -> bool {
        self.throttled_at(ip, Instant::now())
    }

    fn fail_at(&self, ip: IpAddr, now: Instant) {
        let mut m = self.by_ip.lock().unwrap_or_else(|e| e.into_inner());
        if m.len() >= MAX_ADDRESSES && !m.contains_key(&ip) {
            m.retain(|_, (since, _)| now.duration_since(*since) < WINDOW);
            if m.len() >= MAX_ADDRESSES {
                let oldest = m.iter().min_by_key(|(_, (since, _))| *since).map(|(k, _)| *k);
                if let Some(k) = oldest {
                    m.remove(&k);
                }
            }
        }
        let e = m.entry(ip).or_insert((now, 0));
        if now.duration_since(e.0) >= WINDOW {
            *e = (now, 0);
        }
        e.1 += 1;
    }

    fn throttled_at(&self, ip: IpAddr, now: Instant) -> bool {
        let m = self.by_ip.lock().unwrap_or_else(|e| e.into_inner());
        m.get(&ip)
            .is_some_and(|(since, n)| *n >= MAX_FAILURES && now.duration_since(*since) < WINDOW)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_is_refused_after_too_many_failures_until_its_window_ends() {
        let l = FailureLimiter::default();
        let (a, b): (IpAddr, IpAddr) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        let t0 = Instant::now();
        for _ in 0..MAX_FAILURES - 1 {
            l.fail_at(a, t0);
        }
        assert!(!l.throttled_at(a, t0));
        l.fail_at(a, t0);
        assert!(l.throttled_at(a, t0));
        assert!(!l.throttled_at(b, t0));
        assert!(!l.throttled_at(a, t0 + WINDOW));
    }
}
