//! The Overview page: counts by scope, type and tier, the relevance distribution, the engine
//! card (with what the raw log of conversations holds and whether capture is on).

use std::collections::BTreeMap;

use memoria_engine::Engine;
use memoria_engine::api::{card, hygiene, notes};
use serde::Serialize;
use tauri::State;

use crate::{Shell, UiError};

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ScopeCount {
    pub scope: String,
    pub label: String,
    pub count: usize,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TypeCount {
    pub note_type: String,
    pub count: usize,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TierCount {
    pub tier: String,
    pub count: usize,
}

/// An engine switch: `key` names it (`sync`, `uploadSecrets`); the UI says it in its language.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Switch {
    pub key: &'static str,
    pub on: bool,
}

/// The raw log of conversations, as the engine card shows it.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RawLog {
    /// Its file on disk (0: nothing captured yet).
    pub bytes: u64,
    /// Messages older than this many days go (`conversations.maxAgeDays`; 0: no limit).
    pub max_age_days: u32,
    /// The oldest messages go beyond this many MB of text (`conversations.maxTotalMb`; 0: no
    /// limit).
    pub max_total_mb: u32,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct EngineCard {
    pub embedder: String,
    pub model_id: String,
    pub fallback_reason: Option<String>,
    pub fallback_fix: Option<String>,
    pub documents: usize,
    pub documents_with_vectors: usize,
    pub pending_embeddings: usize,
    pub last_vector_update_ms: Option<i64>,
    pub model_dir: Option<String>,
    /// Agents' conversations are captured automatically (Settings).
    pub capture: bool,
    /// Conversations and messages the raw log holds.
    pub conversations: usize,
    pub messages: usize,
    /// The raw log on this machine: its file's size and how long it keeps what it holds.
    pub raw_log: RawLog,
    pub switches: Vec<Switch>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Overview {
    pub total_notes: usize,
    pub by_scope: Vec<ScopeCount>,
    pub by_type: Vec<TypeCount>,
    pub by_tier: Vec<TierCount>,
    pub relevance: Vec<usize>,
    pub broken_notes: usize,
    pub engine: EngineCard,
}

/// Buckets of the relevance chart.
const BUCKETS: usize = 10;

/// What the engine card says to do when recall runs without the semantic model.
const FALLBACK_FIX: &str = "Install the embedding model with `memoria model install` (it goes \
    into the home's models/default folder), or choose its folder in Settings, then restart Memoria.";

pub fn build(engine: &Engine) -> Result<Overview, UiError> {
    let rows = notes::list(engine, &notes::ListQuery::default())?;
    let by_scope = notes::scopes(engine)?
        .into_iter()
        .map(|s| ScopeCount {
            label: super::notes::label(&s),
            count: s.notes,
            scope: s.key,
        })
        .collect();
    let mut types: BTreeMap<String, usize> = BTreeMap::new();
    for r in &rows {
        *types
            .entry(r.note_type.clone().unwrap_or_else(|| "untyped".into()))
            .or_default() += 1;
    }
    // A note's importance (0..1, a half when unset) is what its relevance starts from.
    let mut relevance = vec![0; BUCKETS];
    for r in rows.iter().filter(|r| r.error.is_none()) {
        let v = r.importance.unwrap_or(0.5).clamp(0.0, 1.0);
        relevance[((v * BUCKETS as f64) as usize).min(BUCKETS - 1)] += 1;
    }
    // Tiers: the archive (importance decayed below the threshold, out of recall) and the vault
    // notes still in recall. A note whose file does not parse is in neither.
    let archived = hygiene::archived(engine, None)?.notes.len();
    let readable = rows.iter().filter(|r| r.error.is_none()).count();
    let by_tier = [
        ("vault", readable.saturating_sub(archived)),
        ("archive", archived),
    ]
    .into_iter()
    .map(|(tier, count)| TierCount {
        tier: tier.into(),
        count,
    })
    .collect();
    let c = card::card(engine)?;
    Ok(Overview {
        total_notes: rows.len(),
        by_scope,
        by_type: types
            .into_iter()
            .map(|(note_type, count)| TypeCount { note_type, count })
            .collect(),
        by_tier,
        relevance,
        broken_notes: rows.iter().filter(|r| r.error.is_some()).count(),
        engine: EngineCard {
            fallback_fix: c.fallback_reason.as_ref().map(|_| FALLBACK_FIX.to_owned()),
            embedder: c.embedder,
            model_id: c.model_id,
            fallback_reason: c.fallback_reason,
            documents: c.notes,
            documents_with_vectors: c.notes_with_vectors,
            pending_embeddings: c.pending_vectors,
            last_vector_update_ms: c.last_vector_update_ms,
            model_dir: c.model_dir,
            capture: c.switches.capture,
            conversations: c.conversations,
            messages: c.messages,
            raw_log: RawLog {
                bytes: c.log_bytes,
                max_age_days: c.log_policy.max_age_days,
                max_total_mb: c.log_policy.max_total_mb,
            },
            switches: vec![
                Switch {
                    key: "sync",
                    on: c.switches.sync_on,
                },
                Switch {
                    key: "uploadSecrets",
                    on: c.switches.upload_secrets,
                },
            ],
        },
    })
}

#[tauri::command]
pub async fn overview(shell: State<'_, Shell>) -> Result<Overview, UiError> {
    shell.read(build).await
}

#[cfg(test)]
mod tests {
    use memoria_engine::{NewNote, OpenOptions};

    use super::*;

    #[test]
    fn counts_and_the_engine_card() {
        let tmp = tempfile::tempdir().unwrap();
        let mut engine = Engine::open(OpenOptions::without_model(tmp.path())).unwrap();
        for (s, t) in [("a", None), ("b", Some(memoria_shared::NoteType::Feedback))] {
            engine
                .add(NewNote {
                    summary: s.into(),
                    note_type: t,
                    ..Default::default()
                })
                .unwrap();
        }
        let o = build(&engine).unwrap();
        assert_eq!(o.total_notes, 2);
        assert_eq!(o.by_scope[0].count, 2);
        assert_eq!(o.relevance.iter().sum::<usize>(), 2);
        let tiers: Vec<(&str, usize)> = o
            .by_tier
            .iter()
            .map(|t| (t.tier.as_str(), t.count))
            .collect();
        assert_eq!(tiers, [("vault", 2), ("archive", 0)]);
        assert_eq!(o.engine.embedder, "hash");
        assert!(o.engine.capture, "capture is on unless turned off");
        assert_eq!((o.engine.conversations, o.engine.messages), (0, 0));
        assert_eq!(
            (o.engine.raw_log.max_age_days, o.engine.raw_log.max_total_mb),
            (0, 0),
            "no limit unless one is set"
        );
        memoria_engine::config::set(engine.home(), "conversations.maxAgeDays", Some("365"))
            .unwrap();
        let json = serde_json::to_value(build(&engine).unwrap()).unwrap();
        assert_eq!(json["engine"]["rawLog"]["maxAgeDays"], 365, "{json}");
        let fix = o.engine.fallback_fix.as_deref().unwrap();
        assert!(fix.contains("memoria model install"), "{fix}");
        assert!(!fix.contains(".sh"), "{fix}");
        let json = serde_json::to_value(&o).unwrap();
        assert!(json["byType"][0]["noteType"].is_string());
    }

    #[test]
    fn a_note_unused_for_long_counts_in_the_archive_tier() {
        const DAY: i64 = 86_400_000;
        let tmp = tempfile::tempdir().unwrap();
        let clock = std::sync::Arc::new(memoria_shared::FixedClock::new(1_700_000_000_000));
        let mut engine = Engine::open(OpenOptions {
            clock: clock.clone(),
            ..OpenOptions::without_model(tmp.path())
        })
        .unwrap();
        for s in ["Staging database", "Release day"] {
            engine
                .add(NewNote {
                    summary: s.into(),
                    ..Default::default()
                })
                .unwrap();
        }
        let tiers = |e: &Engine| -> Vec<(String, usize)> {
            build(e)
                .unwrap()
                .by_tier
                .into_iter()
                .map(|t| (t.tier, t.count))
                .collect()
        };
        assert_eq!(tiers(&engine), [("vault".into(), 2), ("archive".into(), 0)]);
        // The default importance halves every 90 days and falls below the archive line
        // after about 210 days unused.
        clock.set(1_700_000_000_000 + 300 * DAY);
        assert_eq!(tiers(&engine), [("vault".into(), 0), ("archive".into(), 2)]);
    }
}
