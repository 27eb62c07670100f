//! Requests in flight per account: each account may have a few at once on this instance, so
//! one token cannot hold the server's memory with many large requests, whatever its rate limit
//! allows. A slot is taken once the token is verified and held until the request is answered
//! (its body read, its handler done) — for a commit, until its store work is done even when
//! the client has gone.
//!
//! Only accounts with a request in flight are tracked: an account's entry is removed when its
//! last slot is given back, so the map never holds more entries than there are requests.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

/// Slots in use per account.
#[derive(Debug)]
pub struct InFlight {
    limit: u32,
    held: Mutex<HashMap<String, u32>>,
}

/// One request's slot; given back when dropped.
#[derive(Debug)]
pub struct InFlightPermit {
    owner: Arc<InFlight>,
    account: String,
}

impl InFlight {
    pub fn new(limit: u32) -> Arc<Self> {
        Arc::new(InFlight {
            limit: limit.max(1),
            held: Mutex::new(HashMap::new()),
        })
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, u32>> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes a slot for `account`, or says the account already has `limit` requests in flight.
    pub fn try_acquire(self: &Arc<Self>, account: &str) -> Result<InFlightPermit, u32> {
        let mut held = self.lock();
        let n = held.entry(account.to_owned()).or_insert(0);
        if *n >= self.limit {
            return Err(self.limit);
        }
        *n += 1;
        Ok(InFlightPermit {
            owner: self.clone(),
            account: account.to_owned(),
        })
    }

    /// Accounts with at least one request in flight.
    pub fn tracked(&self) -> usize {
        self.lock().len()
    }
}

impl Drop for InFlightPermit {
    fn drop(&mut self) {
        let mut held = self.owner.lock();
        if let Some(n) = held.get_mut(&self.account) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                held.remove(&self.account);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_per_account_given_back_and_untracked_when_idle() {
        let f = InFlight::new(2);
        let a1 = f.try_acquire("a").unwrap();
        let a2 = f.try_acquire("a").unwrap();
        assert_eq!(f.try_acquire("a").unwrap_err(), 2);
        let b = f
            .try_acquire("b")
            .expect("another account has its own slots");
        assert_eq!(f.tracked(), 2);
        drop(a1);
        let a3 = f.try_acquire("a").expect("a slot given back is free again");
        drop((a2, a3, b));
        assert_eq!(f.tracked(), 0, "idle accounts are forgotten");
    }
}
