//! Importance decay: a note's importance halves every half-life since it was last used, each
//! recall reinforces it by a factor (capped), and it never falls below a floor. Decay only
//! re-ranks; it never deletes. Pure: the time comes from an injected [`Clock`].

use memoria_shared::Clock;

const DAY_MS: f64 = 86_400_000.0;

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
}

impl Default for DecayRule {
    fn default() -> Self {
        DecayRule {
            half_life_days: 90.0,
            reinforce: 1.2,
            cap: 1.0,
            floor: 0.05,
        }
    }
}

impl DecayRule {
    /// `importance` as it stands now, `last_used_ms` being the last recall, opening or edit.
    /// A time in the future (a clock set back) counts as no time at all.
    pub fn decayed(&self, importance: f64, last_used_ms: i64, clock: &dyn Clock) -> f64 {
        let days = ((clock.now_ms() - last_used_ms).max(0) as f64) / DAY_MS;
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
