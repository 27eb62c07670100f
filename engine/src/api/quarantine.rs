//! Quarantining a provider's memory: preview what a host's or model's memory holds, hide it
//! from every door, release it exactly as it was, and list the quarantines and the audit log.
//! The person's doors only (the CLI, the app): the MCP server has no way to it, so no agent
//! can quarantine or release anything.

use serde::Serialize;

use crate::error::Result;
use crate::vault::Engine;

pub use crate::quarantine::{Applied, Counts, MovedNote, Quarantine, Release, Selection};
pub use memoria_store::audit::AuditEntry;

/// What `selection` would quarantine now; nothing changes.
pub fn preview(engine: &Engine, selection: &Selection) -> Result<Counts> {
    crate::quarantine::preview(engine, selection)
}

/// Quarantines what `selection` takes now; `id` is `None` when nothing is left to take.
pub fn apply(engine: &mut Engine, selection: &Selection) -> Result<Applied> {
    crate::quarantine::apply(engine, selection)
}

/// Releases quarantine `id`: every trust and place exactly as before it.
pub fn release(engine: &mut Engine, id: &str) -> Result<Release> {
    crate::quarantine::release(engine, id)
}

/// The quarantines and the providers there are to choose from.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct QuarantineOverview {
    /// Every quarantine, the latest first.
    pub quarantines: Vec<Quarantine>,
    /// The hosts and models that wrote messages visible here, with how many of their messages
    /// may still be recalled.
    pub providers: Vec<Provider>,
}

/// A host or model that wrote messages.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Provider {
    /// `host` or `model`.
    pub kind: &'static str,
    pub name: String,
    /// Its messages not held back.
    pub recallable: usize,
}

/// Every quarantine, the latest first, with the providers to choose from.
pub fn overview(engine: &Engine) -> Result<QuarantineOverview> {
    Ok(QuarantineOverview {
        quarantines: crate::quarantine::history(engine)?,
        providers: crate::quarantine::providers(engine)?
            .into_iter()
            .map(|(kind, name, recallable)| Provider {
                kind,
                name,
                recallable,
            })
            .collect(),
    })
}

/// Every quarantine, the latest first.
pub fn history(engine: &Engine) -> Result<Vec<Quarantine>> {
    crate::quarantine::history(engine)
}

/// The audit log's entries (quarantines applied and released), the latest first.
pub fn audit(engine: &Engine) -> Result<Vec<AuditEntry>> {
    let mut all = memoria_store::audit::entries(engine.home().root())?;
    all.reverse();
    Ok(all)
}
