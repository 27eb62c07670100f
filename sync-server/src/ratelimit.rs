//! Per-account token buckets. Time comes from the injected [`Clock`], so tests are exact.
//!
//! The buckets live in this process: with several instances behind a load balancer each
//! enforces its own share, which bounds an account to `instances × rate`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use memoria_shared::Clock;

use crate::config::RateLimit;

/// Buckets kept before idle (full) ones are forgotten.
const MAX_TRACKED: usize = 10_000;

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    last_ms: i64,
}

/// Token buckets keyed by account.
#[derive(Debug)]
pub struct RateLimiter {
    limit: RateLimit,
    clock: Arc<dyn Clock>,
    buckets: Mutex<HashMap<String, Bucket>>,
}

impl RateLimiter {
    pub fn new(limit: RateLimit, clock: Arc<dyn Clock>) -> Self {
        RateLimiter {
            limit,
            clock,
            buckets: Mutex::new(HashMap::new()),
        }
    }

    fn per_ms(&self) -> f64 {
        f64::from(self.limit.per_minute) / 60_000.0
    }

    /// Takes one token for `account`, or says how many whole seconds until one is available.
    pub fn check(&self, account: &str) -> Result<(), u64> {
        let now = self.clock.now_ms();
        let cap = f64::from(self.limit.burst.max(1));
        let rate = self.per_ms();
        let mut buckets = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        if buckets.len() > MAX_TRACKED {
            buckets.retain(|_, b| b.tokens + (now - b.last_ms) as f64 * rate < cap);
        }
        let b = buckets.entry(account.to_owned()).or_insert(Bucket {
            tokens: cap,
            last_ms: now,
        });
        let elapsed = (now - b.last_ms).max(0) as f64;
        b.tokens = (b.tokens + elapsed * rate).min(cap);
        b.last_ms = now;
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            return Ok(());
        }
        if rate <= 0.0 {
            return Err(60);
        }
        let wait_ms = (1.0 - b.tokens) / rate;
        Err(((wait_ms / 1000.0).ceil() as u64).max(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memoria_shared::FixedClock;

    #[test]
    fn bucket_empties_refills_and_is_per_account() {
        let clock = Arc::new(FixedClock::new(1_000));
        let rl = RateLimiter::new(
            RateLimit {
                burst: 3,
                per_minute: 6, // one token every 10 s
            },
            clock.clone(),
        );
        for _ in 0..3 {
            rl.check("a").unwrap();
        }
        assert_eq!(rl.check("a"), Err(10));
        rl.check("b").expect("another account has its own bucket");
        clock.advance(4_000);
        assert_eq!(rl.check("a"), Err(6));
        clock.advance(6_000);
        rl.check("a").unwrap();
        assert_eq!(rl.check("a"), Err(10));
        clock.advance(3_600_000);
        for _ in 0..3 {
            rl.check("a").unwrap();
        }
        assert!(rl.check("a").is_err(), "refill is capped at the burst");
    }
}
