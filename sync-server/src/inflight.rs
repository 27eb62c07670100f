//! Requests in flight per account: each account may have a few at once on this instance, so
//! one token cannot hold the server's memory with many large requests, whatever its rate limit
//! allows. A slot is taken once the token is verified, before the body is read, and held until
//! the request is answered (its body read, its handler done) — for a commit, until its store
//! work is done even when the client has gone. A request finding every slot taken waits a
//! little for one (an account's machines polling at once queue rather than fail), then is
//! refused.
//!
//! Only accounts with a request holding or waiting for a slot are tracked: an account's entry
//! is removed when its last such request ends, so the map never holds more entries than there
//! are requests.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// How long a request waits for one of its account's slots before it is refused. It holds only
/// its header meanwhile: the body is read once it has a slot.
pub const SLOT_WAIT: Duration = Duration::from_secs(2);

#[derive(Debug)]
struct Entry {
    slots: Arc<Semaphore>,
    /// Requests holding or waiting for one of these slots; the entry goes when it is 0.
    users: usize,
}

/// Each account's slots.
#[derive(Debug)]
pub struct InFlight {
    limit: u32,
    accounts: Mutex<HashMap<String, Entry>>,
}

/// One request's slot; given back when dropped.
#[derive(Debug)]
pub struct InFlightPermit {
    _slot: OwnedSemaphorePermit,
    _user: User,
}

/// A request counted in its account's entry, holding or waiting for a slot.
#[derive(Debug)]
struct User {
    owner: Arc<InFlight>,
    account: String,
}

impl Drop for User {
    fn drop(&mut self) {
        let mut accounts = self.owner.lock();
        if let Some(e) = accounts.get_mut(&self.account) {
            e.users = e.users.saturating_sub(1);
            if e.users == 0 {
                accounts.remove(&self.account);
            }
        }
    }
}

impl InFlight {
    pub fn new(limit: u32) -> Arc<Self> {
        Arc::new(InFlight {
            limit: limit.max(1),
            accounts: Mutex::new(HashMap::new()),
        })
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, Entry>> {
        self.accounts.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes a slot for `account`, waiting up to `wait` for one; or says how many the account
    /// has (all taken).
    pub async fn acquire(
        self: &Arc<Self>,
        account: &str,
        wait: Duration,
    ) -> Result<InFlightPermit, u32> {
        let slots = {
            let mut accounts = self.lock();
            let e = accounts.entry(account.to_owned()).or_insert_with(|| Entry {
                slots: Arc::new(Semaphore::new(self.limit as usize)),
                users: 0,
            });
            e.users += 1;
            e.slots.clone()
        };
        let user = User {
            owner: self.clone(),
            account: account.to_owned(),
        };
        let slot = match slots.clone().try_acquire_owned() {
            Ok(slot) => slot,
            Err(_) => match tokio::time::timeout(wait, slots.acquire_owned()).await {
                Ok(Ok(slot)) => slot,
                _ => return Err(self.limit),
            },
        };
        Ok(InFlightPermit {
            _slot: slot,
            _user: user,
        })
    }

    /// Accounts with a request holding or waiting for a slot.
    pub fn tracked(&self) -> usize {
        self.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn slots_are_per_account_given_back_and_untracked_when_idle() {
        let f = InFlight::new(2);
        let now = Duration::ZERO;
        let a1 = f.acquire("a", now).await.unwrap();
        let a2 = f.acquire("a", now).await.unwrap();
        assert_eq!(f.acquire("a", now).await.unwrap_err(), 2);
        let b = f
            .acquire("b", now)
            .await
            .expect("another account has its own slots");
        assert_eq!(f.tracked(), 2);
        // A request waiting for a slot gets the one given back.
        let waiting = tokio::spawn({
            let f = f.clone();
            async move { f.acquire("a", Duration::from_secs(5)).await.map(|_| ()) }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        drop(a1);
        waiting
            .await
            .unwrap()
            .expect("the waiting request got the slot");
        drop((a2, b));
        assert_eq!(f.tracked(), 0, "idle accounts are forgotten");
    }
}
