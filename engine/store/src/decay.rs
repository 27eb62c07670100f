//! Importance decay: a note's importance halves every half-life since it was last used, each
//! recall or opening reinforces it by a factor (capped), and it never falls below a floor.
//! Decay only re-ranks; it never deletes. A note whose importance has fallen below
//! [`DecayRule::archive_below`] is in the archive tier: out of recall and of search results
//! unless they are asked for, still listed, and back as soon as it is used or edited. Pure:
//! the time is passed in (an injected [`Clock`], or its reading).

use memoria_shared::Clock;

const DAY_MS: f64 = 86_400_000.0;

/// Days after which an unused note's importance is halved, unless the setting
/// `decay.halfLifeDays` says otherwise.
pub const HALF_LIFE_DAYS: u32 = 90;
/// The importance below which a note is archived, unless the setting `decay.archiveBelow`
/// says otherwise: a note of the default importance (0.5) that nobody recalls, opens or edits
/// gets there after about 2.3 half-lives.
pub const ARCHIVE_BELOW: f64 = 0.1;
/// The importance of a note that states none.
pub const DEFAULT_IMPORTANCE: f64 = 0.5;
/// Reinforcements past this many uses change nothing: the cap is reached from the floor.
const MAX_REINFORCEMENTS: i64 = 64;

/// The decay rule's parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DecayRule {
    /// Days after which importance is halved.
    pub half_life_days: f64,
    /// Factor each recall multiplies importance by.
    pub reinforce: f64,
    /// The most importance reinforcement can reach.
    pub cap: f64,
    /// The least importance decay can reach.
    pub floor: f64,
    /// A note whose importance now is below this is archived.
    pub archive_below: f64,
}

impl Default for DecayRule {
    fn default() -> Self {
        DecayRule {
            half_life_days: 90.0,
            reinforce: 1.2,
            cap: 1.0,
            floor: 0.05,
            archive_below: ARCHIVE_BELOW,
        }
    }
}

impl DecayRule {
    /// `importance` as it stands now, `last_used_ms` being the last recall, opening or edit.
    /// A time in the future (a clock set back) counts as no time at all.
    pub fn decayed(&self, importance: f64, last_used_ms: i64, clock: &dyn Clock) -> f64 {
        self.decayed_at(importance, last_used_ms, clock.now_ms())
    }

    /// [`Self::decayed`] at the time `now_ms`.
    pub fn decayed_at(&self, importance: f64, last_used_ms: i64, now_ms: i64) -> f64 {
        let days = ((now_ms - last_used_ms).max(0) as f64) / DAY_MS;
        let factor = if self.half_life_days > 0.0 {
            0.5f64.powf(days / self.half_life_days)
        } else {
            1.0
        };
        (importance * factor).clamp(self.floor, self.cap.max(self.floor))
    }

    /// `importance` after one recall.
    pub fn reinforced(&self, importance: f64) -> f64 {
        (importance * self.reinforce).clamp(self.floor, self.cap.max(self.floor))
    }

    /// A note's importance now: its own (`None`: [`DEFAULT_IMPORTANCE`]) reinforced once per
    /// use, then decayed since its last use or edit (`None`: never decayed). `decays: false`
    /// (kinds of note that stay true until changed) leaves out the decay.
    pub fn live(
        &self,
        importance: Option<f64>,
        uses: i64,
        last_used_ms: Option<i64>,
        decays: bool,
        now_ms: i64,
    ) -> f64 {
        let mut v = importance.unwrap_or(DEFAULT_IMPORTANCE).clamp(0.0, 1.0);
        for _ in 0..uses.clamp(0, MAX_REINFORCEMENTS) {
            v = self.reinforced(v);
        }
        match last_used_ms {
            Some(at) if decays => self.decayed_at(v, at, now_ms),
            _ => v,
        }
    }

    /// Whether a note of this importance now is in the archive tier.
    pub fn archives(&self, live: f64) -> bool {
        live < self.archive_below
    }
}

#[cfg(test)]
mod tests {
    use memoria_shared::FixedClock;

    use super::*;

    const T0: i64 = 1_700_000_000_000;
    const DAY: i64 = 86_400_000;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn importance_halves_every_half_life() {
        let rule = DecayRule::default();
        let clock = FixedClock::new(T0);
        assert!(close(rule.decayed(0.8, T0, &clock), 0.8));
        clock.set(T0 + 90 * DAY);
        assert!(close(rule.decayed(0.8, T0, &clock), 0.4));
        clock.set(T0 + 180 * DAY);
        assert!(close(rule.decayed(0.8, T0, &clock), 0.2));
        clock.set(T0 + 45 * DAY);
        assert!(close(rule.decayed(0.8, T0, &clock), 0.8 * 0.5f64.sqrt()));
    }

    #[test]
    fn decay_stops_at_the_floor_and_a_clock_set_back_changes_nothing() {
        let rule = DecayRule::default();
        let clock = FixedClock::new(T0 + 10_000 * DAY);
        assert!(close(rule.decayed(0.9, T0, &clock), 0.05));
        clock.set(T0 - 30 * DAY);
        assert!(close(rule.decayed(0.6, T0, &clock), 0.6));
    }

    #[test]
    fn live_importance_reinforces_per_use_then_decays_from_the_last_use() {
        let rule = DecayRule::default();
        let now = T0 + 90 * DAY;
        // Two uses: 0.5 → 0.6 → 0.72, then one half-life since the last one.
        assert!(close(rule.live(None, 2, Some(T0), true, now), 0.36));
        assert!(close(rule.live(Some(0.8), 0, Some(T0), true, now), 0.4));
        // Kinds that never decay keep their reinforced importance.
        assert!(close(rule.live(None, 2, Some(T0), false, now), 0.72));
        // Never used nor dated: as it stands.
        assert!(close(rule.live(None, 0, None, true, now), 0.5));
        // Very many uses reach the cap and stop there.
        assert!(close(
            rule.live(Some(0.0), 1_000_000, Some(now), true, now),
            1.0
        ));
        // Archived below the threshold: a default note unused for 2.3 half-lives.
        let old = T0 + 210 * DAY;
        assert!(rule.archives(rule.live(None, 0, Some(T0), true, old)));
        assert!(!rule.archives(rule.live(None, 0, Some(T0), true, T0 + 200 * DAY)));
        // A use or an edit at that time brings it back.
        assert!(!rule.archives(rule.live(None, 1, Some(old), true, old)));
    }

    #[test]
    fn each_recall_reinforces_up_to_the_cap() {
        let rule = DecayRule::default();
        assert!(close(rule.reinforced(0.5), 0.6));
        assert!(close(rule.reinforced(rule.reinforced(0.5)), 0.72));
        let mut v = 0.5;
        for _ in 0..20 {
            v = rule.reinforced(v);
        }
        assert!(close(v, 1.0));
        // Reinforcing a note at the floor lifts it off the floor.
        assert!(close(rule.reinforced(0.05), 0.06));
    }
}
