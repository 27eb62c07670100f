//! When to sync: one schedule per process for all scopes, as a pure state machine over
//! injected time (milliseconds), so every rule is tested deterministically:
//! - a local write is uploaded ~3 s later; a burst of writes coalesces into one pass;
//! - otherwise a poll every minute, backing off (doubling) to 5 minutes while nothing changes;
//! - project scopes only while in use, plus 30 minutes;
//! - at most 20 requests per rolling minute for the whole process;
//! - a 429 pauses every scope until its Retry-After; a transient failure retries after 60 s;
//! - "sync now" makes every active scope due at once.
//!
//! The driver asks [`Schedule::due`] what to run, runs passes, and reports each with
//! [`Schedule::done`] (and the requests it made with [`Schedule::record_requests`]).

use std::collections::{BTreeMap, VecDeque};

use super::settings::MAX_RETRY_AFTER_S;

pub const WRITE_DELAY_MS: i64 = 3_000;
pub const POLL_MIN_MS: i64 = 60_000;
pub const POLL_MAX_MS: i64 = 5 * 60_000;
pub const PROJECT_IDLE_MS: i64 = 30 * 60_000;
pub const RETRY_MS: i64 = 60_000;
pub const REQUESTS_PER_MINUTE: usize = 20;

/// How a pass ended, as the schedule needs to know it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PassOutcome {
    /// Something moved in either direction.
    Changed,
    /// Nothing to do.
    Unchanged,
    /// Network or server trouble: retry after a minute.
    Transient,
    /// 429 (or 503 with Retry-After): pause every scope.
    RetryAfter { seconds: u64 },
    /// Needs the user (off, signed out, pinned elsewhere): stop polling this scope until
    /// something (a write, "sync now") asks again.
    Permanent,
}

#[derive(Debug, Clone)]
struct ScopeTimer {
    is_project: bool,
    /// Next poll.
    next_poll: i64,
    interval: i64,
    /// A local write waits for this time.
    write_due: Option<i64>,
    /// Projects: active until then.
    in_use_until: i64,
    stopped: bool,
}

/// The schedule of every scope of one process.
#[derive(Debug, Default)]
pub struct Schedule {
    scopes: BTreeMap<String, ScopeTimer>,
    requests: VecDeque<i64>,
    paused_until: i64,
}

impl Schedule {
    pub fn new() -> Schedule {
        Schedule::default()
    }

    /// Adds a scope; its first pass is due at once.
    pub fn add_scope(&mut self, key: &str, is_project: bool, now: i64) {
        self.scopes.entry(key.to_owned()).or_insert(ScopeTimer {
            is_project,
            next_poll: now,
            interval: POLL_MIN_MS,
            write_due: None,
            in_use_until: now + PROJECT_IDLE_MS,
            stopped: false,
        });
    }

    fn active(t: &ScopeTimer, now: i64) -> bool {
        !t.is_project || t.in_use_until > now
    }

    /// A project scope was used (a search, a write, an agent session).
    pub fn project_used(&mut self, key: &str, now: i64) {
        if let Some(t) = self.scopes.get_mut(key) {
            let was_idle = !Self::active(t, now);
            t.in_use_until = now + PROJECT_IDLE_MS;
            if was_idle {
                t.next_poll = now;
                t.interval = POLL_MIN_MS;
            }
        }
    }

    /// A local write in `key`: upload in ~3 s; later writes in the burst join the same pass.
    pub fn local_write(&mut self, key: &str, now: i64) {
        if let Some(t) = self.scopes.get_mut(key) {
            t.write_due.get_or_insert(now + WRITE_DELAY_MS);
            t.interval = POLL_MIN_MS;
            t.stopped = false;
            if t.is_project {
                t.in_use_until = now + PROJECT_IDLE_MS;
            }
        }
    }

    /// "Sync now": every active scope is due at once (still subject to a 429 pause).
    pub fn sync_now(&mut self, now: i64) {
        for t in self.scopes.values_mut() {
            if Self::active(t, now) {
                t.write_due = Some(now);
                t.stopped = false;
            }
        }
    }

    fn budget_left(&mut self, now: i64) -> usize {
        // Requests "after" now were counted before the clock was set back: they no longer
        // count, or they would hold the budget until the clock caught up.
        self.requests.retain(|&t| t > now - 60_000 && t <= now);
        REQUESTS_PER_MINUTE.saturating_sub(self.requests.len())
    }

    /// When `key`'s next poll is due, if it polls at all (not stopped, and in use if a project).
    pub fn next_poll(&self, key: &str, now: i64) -> Option<i64> {
        self.scopes
            .get(key)
            .filter(|t| !t.stopped && Self::active(t, now) && t.next_poll != i64::MAX)
            .map(|t| t.next_poll)
    }

    /// When `key` is tried next: its write or poll, not before a 429's pause ends; `None` when
    /// it waits for a write or "sync now" (stopped, or a project scope not in use).
    pub fn next_attempt(&mut self, key: &str, now: i64) -> Option<i64> {
        let pause_end = self.pause_end(now);
        let t = self.scopes.get(key)?;
        if t.stopped || !Self::active(t, now) {
            return None;
        }
        Some(Self::due_at(t).max(pause_end))
    }

    /// Counts requests a pass made (for the per-minute limit).
    pub fn record_requests(&mut self, n: u64, now: i64) {
        for _ in 0..n {
            self.requests.push_back(now);
        }
    }

    fn due_at(t: &ScopeTimer) -> i64 {
        t.write_due.map_or(t.next_poll, |w| w.min(t.next_poll))
    }

    /// Scopes to sync now, in key order. Empty while paused or out of request budget.
    pub fn due(&mut self, now: i64) -> Vec<String> {
        self.clamp_to(now);
        if now < self.pause_end(now) || self.budget_left(now) == 0 {
            return Vec::new();
        }
        self.scopes
            .iter()
            .filter(|(_, t)| !t.stopped && Self::active(t, now) && Self::due_at(t) <= now)
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// When the driver should wake next (the earliest due scope, a pause's end, or the time
    /// the request budget frees up).
    pub fn next_wake(&mut self, now: i64) -> Option<i64> {
        self.clamp_to(now);
        let earliest = self
            .scopes
            .values()
            .filter(|t| !t.stopped)
            .map(|t| {
                if Self::active(t, now) {
                    Self::due_at(t)
                } else {
                    i64::MAX
                }
            })
            .min()
            .filter(|&t| t != i64::MAX)?;
        let mut at = earliest.max(self.pause_end(now));
        if self.budget_left(now) == 0
            && let Some(first) = self.requests.front()
        {
            at = at.max(first + 60_000);
        }
        Some(at.max(now))
    }

    /// Brings timers set before the wall clock was set back within their longest reach of
    /// `now`, so no scope waits for the clock to catch up.
    fn clamp_to(&mut self, now: i64) {
        for t in self.scopes.values_mut() {
            if t.next_poll != i64::MAX && t.next_poll > now + MAX_RETRY_AFTER_S as i64 * 1000 {
                t.next_poll = now;
            }
            if let Some(w) = &mut t.write_due {
                *w = (*w).min(now + WRITE_DELAY_MS);
            }
            t.in_use_until = t.in_use_until.min(now + PROJECT_IDLE_MS);
        }
    }

    /// When a 429's pause ends. One reaching further ahead than the longest Retry-After
    /// honoured was started before the clock was set back, and is dropped.
    fn pause_end(&mut self, now: i64) -> i64 {
        if self.paused_until - now > MAX_RETRY_AFTER_S as i64 * 1000 {
            self.paused_until = now;
        }
        self.paused_until
    }

    /// Records how a pass over `key` ended.
    pub fn done(&mut self, key: &str, outcome: PassOutcome, now: i64) {
        if let PassOutcome::RetryAfter { seconds } = outcome {
            let until = now + seconds.min(MAX_RETRY_AFTER_S) as i64 * 1000;
            self.paused_until = self.pause_end(now).max(until);
        }
        let Some(t) = self.scopes.get_mut(key) else {
            return;
        };
        // Writes that arrived during the pass keep their (later) due time.
        if t.write_due.is_some_and(|w| w <= now) {
            t.write_due = None;
        }
        match outcome {
            PassOutcome::Changed => {
                t.interval = POLL_MIN_MS;
                t.next_poll = now + t.interval;
            }
            PassOutcome::Unchanged => {
                t.next_poll = now + t.interval;
                t.interval = (t.interval * 2).min(POLL_MAX_MS);
            }
            PassOutcome::Transient => t.next_poll = now + RETRY_MS,
            PassOutcome::RetryAfter { .. } => t.next_poll = self.paused_until,
            PassOutcome::Permanent => {
                // No poll until a write or "sync now" asks (and then only after its delay).
                t.stopped = true;
                t.next_poll = i64::MAX;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i64 = 1_000;
    const M: i64 = 60 * S;

    #[test]
    fn first_pass_at_once_then_polls_back_off_to_five_minutes() {
        let mut s = Schedule::new();
        s.add_scope("user", false, 0);
        assert_eq!(s.due(0), vec!["user"]);
        let mut now = 0;
        let mut gaps = Vec::new();
        for _ in 0..6 {
            s.done("user", PassOutcome::Unchanged, now);
            let next = s.next_wake(now).unwrap();
            assert!(s.due(next - 1).is_empty());
            assert_eq!(s.due(next), vec!["user"]);
            gaps.push((next - now) / M);
            now = next;
        }
        assert_eq!(gaps, vec![1, 2, 4, 5, 5, 5]);
        s.done("user", PassOutcome::Changed, now);
        assert_eq!(s.next_wake(now), Some(now + M));
    }

    #[test]
    fn writes_upload_after_three_seconds_and_bursts_coalesce() {
        let mut s = Schedule::new();
        s.add_scope("user", false, 0);
        s.done("user", PassOutcome::Unchanged, 0);
        s.local_write("user", 10 * S);
        s.local_write("user", 11 * S);
        s.local_write("user", 12 * S);
        assert!(s.due(12 * S).is_empty());
        assert_eq!(s.next_wake(12 * S), Some(13 * S));
        assert_eq!(s.due(13 * S), vec!["user"]);
        s.done("user", PassOutcome::Changed, 13 * S);
        assert!(s.due(14 * S).is_empty(), "one pass for the burst");
        assert_eq!(s.next_wake(14 * S), Some(13 * S + M));
    }

    #[test]
    fn project_scopes_only_while_in_use_plus_thirty_minutes() {
        let mut s = Schedule::new();
        s.add_scope("user", false, 0);
        s.add_scope("project:p", true, 0);
        assert_eq!(s.due(0), vec!["project:p", "user"]);
        s.done("project:p", PassOutcome::Unchanged, 0);
        s.done("user", PassOutcome::Unchanged, 0);
        let late = 31 * M;
        assert_eq!(s.due(late), vec!["user"]);
        s.project_used("project:p", late);
        assert_eq!(s.due(late), vec!["project:p", "user"]);
    }

    #[test]
    fn at_most_twenty_requests_a_minute() {
        let mut s = Schedule::new();
        s.add_scope("user", false, 0);
        s.record_requests(20, 0);
        assert!(s.due(0).is_empty());
        assert_eq!(s.next_wake(0), Some(60 * S));
        assert!(s.due(59 * S).is_empty());
        assert_eq!(s.due(60 * S), vec!["user"]);
    }

    #[test]
    fn rate_limit_pauses_every_scope_and_transient_failures_retry_after_a_minute() {
        let mut s = Schedule::new();
        s.add_scope("user", false, 0);
        s.add_scope("project:p", true, 0);
        s.done("user", PassOutcome::RetryAfter { seconds: 90 }, 0);
        assert!(s.due(0).is_empty());
        s.sync_now(S);
        assert!(
            s.due(89 * S).is_empty(),
            "sync now waits for Retry-After too"
        );
        assert_eq!(s.due(90 * S), vec!["project:p", "user"]);
        s.done("user", PassOutcome::Transient, 90 * S);
        s.done("project:p", PassOutcome::Changed, 90 * S);
        assert!(s.due(149 * S).is_empty());
        assert_eq!(s.due(150 * S), vec!["project:p", "user"]);
    }

    #[test]
    fn a_clock_set_back_holds_nothing_paused() {
        let day = 86_400 * S;
        let mut s = Schedule::new();
        s.add_scope("user", false, day);
        s.record_requests(20, day);
        s.done("user", PassOutcome::RetryAfter { seconds: 90 }, day);
        // The wall clock goes back a day: the pause, the polls and the request budget
        // recorded "in the future" hold nothing.
        assert_eq!(s.due(0), vec!["user"]);
        s.done("user", PassOutcome::Unchanged, 0);
        assert_eq!(s.next_wake(0), Some(POLL_MIN_MS));
        // A Retry-After longer than the longest honoured pauses for that longest only.
        s.done(
            "user",
            PassOutcome::RetryAfter {
                seconds: 10 * 86_400,
            },
            0,
        );
        let cap = MAX_RETRY_AFTER_S as i64 * 1000;
        assert!(s.due(cap - 1).is_empty());
        assert_eq!(s.due(cap), vec!["user"]);
    }

    #[test]
    fn sync_now_runs_at_once_and_permanent_errors_stop_polling() {
        let mut s = Schedule::new();
        s.add_scope("user", false, 0);
        s.done("user", PassOutcome::Permanent, 0);
        assert!(s.due(10 * M).is_empty());
        assert_eq!(s.next_wake(10 * M), None);
        s.sync_now(10 * M);
        assert_eq!(s.due(10 * M), vec!["user"]);
        s.done("user", PassOutcome::Permanent, 10 * M);
        s.local_write("user", 20 * M);
        assert!(s.due(20 * M).is_empty(), "a write waits its 3 s even then");
        assert_eq!(s.due(20 * M + 3 * S), vec!["user"]);
    }
}
