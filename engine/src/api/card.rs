//! The engine card: which embedder recall runs on, how many notes have vectors, when vectors
//! last changed, what the raw log of conversations holds, and the switches that shape what is
//! kept and what leaves the machine.

use serde::{Deserialize, Serialize};

use crate::sync::{Settings, SyncResult};
use crate::vault::Engine;

/// What the engine runs on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EngineCard {
    /// `onnx` (a semantic model) or `hash` (words only: no semantic model installed).
    pub embedder: String,
    pub model_id: String,
    /// A semantic model is in use.
    pub semantic: bool,
    /// Why recall runs without a semantic model, when it does.
    pub fallback_reason: Option<String>,
    /// Notes in the recall index.
    pub notes: usize,
    /// Of which have vectors for the model in use.
    pub notes_with_vectors: usize,
    /// Notes still waiting for their vectors.
    pub pending_vectors: usize,
    /// When the vector cache last changed (ms since the epoch); `None`: never written.
    pub last_vector_update_ms: Option<i64>,
    /// The model folder the engine looks in.
    pub model_dir: Option<String>,
    /// Conversations in the raw log, every scope's.
    pub conversations: usize,
    /// Their messages.
    pub messages: usize,
    /// The raw log's file on disk, in bytes (0: nothing captured yet).
    pub log_bytes: u64,
    /// How long the raw log keeps what it holds (0: no limit).
    pub log_policy: crate::log::LogPolicy,
    pub switches: CardSwitches,
}

/// The switches a user sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CardSwitches {
    /// Cloud sync is on.
    pub sync_on: bool,
    /// Signed in to a sync server.
    pub signed_in: bool,
    /// Notes tagged `contains-secrets` are uploaded too.
    pub upload_secrets: bool,
    /// Agents' conversations are captured automatically (the hook, MCP's `memory_log`).
    pub capture: bool,
}

/// The engine card (opens the recall index, loading the model, on first use).
pub fn card(engine: &Engine) -> SyncResult<EngineCard> {
    let settings = Settings::load(&crate::sync::sync_dir(engine.home().root()))?;
    let status = engine.recall()?.status();
    let cache = crate::recall::default_dir(engine.home().root()).join("vectors.sqlite");
    let last_vector_update_ms = std::fs::metadata(&cache)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_millis() as i64);
    let log = engine.log()?.stats()?;
    Ok(EngineCard {
        semantic: status.embedder == "onnx",
        embedder: status.embedder.to_owned(),
        model_id: status.model_id,
        fallback_reason: status.fallback_reason,
        notes: status.documents,
        notes_with_vectors: status.documents_with_vectors,
        pending_vectors: status.pending_embeddings,
        last_vector_update_ms,
        model_dir: engine.model_dir().map(super::path_text),
        conversations: log.conversations,
        messages: log.messages,
        log_bytes: log.file_bytes,
        log_policy: crate::log::LogPolicy::load(engine.home().root())?,
        switches: CardSwitches {
            sync_on: settings.is_on(),
            signed_in: settings.server.is_some(),
            upload_secrets: settings.include_secrets,
            capture: crate::config::capture_on(engine.home())?,
        },
    })
}
