//! Conversations: capture a transcript into the raw log, list and read what was captured, and
//! forget a conversation for good. Captured messages are recalled beside notes by every search
//! (`api::search`, `api::agent`, the recall block).

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::scope_arg;
use crate::capture::{self, CaptureOptions, CaptureReport, Forgotten, Format};
use crate::error::{Error, Result};
use crate::log::{Conversation, LogMessage, LogStats};
use crate::vault::Engine;

pub use crate::capture::model::Entry;
pub use crate::capture::{Incoming, MAX_MESSAGE_BYTES};
pub use crate::log::{CaptureRun, RunNote, RunState, SkipReason};

/// A capture as a front end asks for it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CaptureRequest {
    /// `user`, `project`, `domain` or a visible scope's key; `None`: the project's when there
    /// is one, else the user's.
    pub scope: Option<String>,
    /// The conversation of messages that name none (a file's name when capturing a file).
    pub conversation: Option<String>,
    /// `jsonl` (the default), `claude-code` or `openclaw`.
    pub format: Option<Format>,
    /// Keep tool output and system prompts too.
    pub keep_tools: bool,
    /// An automatic capture (the hook), not one a person asked for: it skips what was said
    /// while capture was off.
    #[serde(default)]
    pub automatic: bool,
    /// The door it came through (`hook`, `cli`, `mcp`, `api`), as the capture ledger records it.
    #[serde(default)]
    pub entry: Entry,
}

fn options(engine: &Engine, req: &CaptureRequest, host: Option<&str>) -> Result<CaptureOptions> {
    Ok(CaptureOptions {
        scope: scope_arg(engine, req.scope.as_deref())?,
        conversation: req.conversation.clone(),
        host: host.map(str::to_owned),
        keep_tools: req.keep_tools,
        automatic: req.automatic,
        entry: req.entry,
    })
}

fn host_of(format: Format) -> Option<&'static str> {
    match format {
        Format::Jsonl => None,
        Format::ClaudeCode => Some("claude-code"),
        Format::Openclaw | Format::OpenclawDaily => Some("openclaw"),
    }
}

/// Captures a transcript's text (standard input, a pasted log).
pub fn capture_text(engine: &Engine, text: &str, req: &CaptureRequest) -> Result<CaptureReport> {
    let format = req.format.unwrap_or(Format::Jsonl);
    let incoming = format.parse(text, 1, req.conversation.as_deref())?;
    capture::capture(engine, incoming, &options(engine, req, host_of(format))?)
}

/// Captures a transcript file from where its last capture stopped.
pub fn capture_file(engine: &Engine, path: &Path, req: &CaptureRequest) -> Result<CaptureReport> {
    let format = req.format.unwrap_or(Format::Jsonl);
    capture::capture_file(
        engine,
        path,
        format,
        &options(engine, req, host_of(format))?,
    )
}

/// Captures messages a front end already read (the MCP tool, the app).
pub fn capture_messages(
    engine: &Engine,
    messages: Vec<Incoming>,
    req: &CaptureRequest,
) -> Result<CaptureReport> {
    capture::capture(engine, messages, &options(engine, req, None)?)
}

/// The conversations visible here, the latest first.
pub fn list(engine: &Engine) -> Result<Vec<Conversation>> {
    let visible: Vec<String> = engine.visible_scopes().iter().map(|s| s.key()).collect();
    engine.log()?.conversations(Some(&visible))
}

/// One conversation's messages, in order. A message the guard marked shows its rule in place
/// of its text.
pub fn show(engine: &Engine, conversation: &str, scope: Option<&str>) -> Result<Vec<LogMessage>> {
    let found = find(engine, conversation, scope)?;
    let mut messages = engine.log()?.messages(&found.scope, &found.id)?;
    for m in &mut messages {
        if let Some(rule) = &m.secret {
            m.text = format!("[held back: it looks like a credential ({rule})]");
        }
    }
    Ok(messages)
}

/// Removes a conversation and every copy of it: the log's messages and texts, and their
/// documents and vectors in the recall index. It cannot be undone.
pub fn forget(engine: &Engine, conversation: &str, scope: Option<&str>) -> Result<Forgotten> {
    let found = find(engine, conversation, scope)?;
    let scope = crate::project::Scope::from_key(&found.scope)?;
    capture::forget_conversation(engine, &scope, &found.id)
}

/// A conversation's summary, as a person reads it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SummaryView {
    pub text: String,
    /// The messages it quotes, in order.
    pub sources: Vec<String>,
}

/// A fact said in a conversation.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FactView {
    pub key: String,
    pub subject: String,
    pub attribute: String,
    pub value: String,
    /// When it was said.
    pub valid_from: Option<i64>,
    /// When a newer value replaced it (`None`: current).
    pub valid_to: Option<i64>,
    pub sources: Vec<String>,
    /// Its sources' lowest trust (`None`: the person's own words).
    pub trust: Option<String>,
}

/// What was derived from one conversation: its summary, facts and entities.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConversationExtract {
    pub summary: Option<SummaryView>,
    pub facts: Vec<FactView>,
    pub entities: Vec<crate::log::Entity>,
}

/// What was derived from a conversation (facts in the order said). Items derived from a
/// message the guard marked do not exist: nothing is derived from one.
pub fn extract(
    engine: &Engine,
    conversation: &str,
    scope: Option<&str>,
) -> Result<ConversationExtract> {
    let found = find(engine, conversation, scope)?;
    let log = engine.log()?;
    let items = log.derived_of(&found.scope, &found.id)?;
    let mut out = ConversationExtract {
        summary: None,
        facts: Vec::new(),
        entities: log.entities_of(&found.scope, &found.id)?,
    };
    for d in items.into_iter().filter(|d| !d.secret) {
        match d.kind {
            crate::log::DerivedKind::Summary => {
                out.summary = Some(SummaryView {
                    text: d.text,
                    sources: d.sources,
                })
            }
            crate::log::DerivedKind::Fact => out.facts.push(fact_view(d)),
        }
    }
    Ok(out)
}

fn fact_view(d: crate::log::DerivedItem) -> FactView {
    FactView {
        key: d.key,
        subject: d.subject.unwrap_or_default(),
        attribute: capture::extract::attribute_shown(d.attribute.as_deref().unwrap_or(""))
            .to_owned(),
        value: d.value.unwrap_or_default(),
        valid_from: d.at,
        valid_to: d.valid_to,
        sources: d.sources,
        trust: d.trust,
    }
}

/// The most facts [`facts`] returns at once unless asked for fewer.
pub const MAX_FACTS: usize = 500;

/// Which facts [`facts`] lists.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct FactQuery {
    /// Only facts whose subject, attribute or value holds this text (any case); blank: all.
    pub text: Option<String>,
    /// Also the facts a newer value replaced.
    pub replaced: bool,
    /// At most this many (at most [`MAX_FACTS`]; `None`: that many).
    pub limit: Option<usize>,
}

/// A message a fact came from, as a link to it shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FactSource {
    /// The message's key (`msg:…`).
    pub key: String,
    /// Its id in the conversation.
    pub message_id: String,
    pub seq: i64,
    pub role: crate::log::Role,
    pub speaker: Option<String>,
    /// When it was said, else when it was captured.
    pub at: i64,
}

/// A fact of the episodic tier: what a conversation said, where, and from which messages.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EpisodicFact {
    #[serde(flatten)]
    pub fact: FactView,
    /// The scope its conversation is kept in.
    pub scope: String,
    pub conversation: String,
    /// Its source messages still in the log, in conversation order.
    pub messages: Vec<FactSource>,
}

/// The facts [`facts`] found.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EpisodicFacts {
    /// The latest said first.
    pub facts: Vec<EpisodicFact>,
    /// How many matched, before the limit.
    pub total: usize,
}

/// The facts said in the conversations visible here, the latest said first: the current ones,
/// and on request those a newer value replaced (with when it did). Nothing derived from a
/// message the guard marked is listed: nothing is derived from one.
pub fn facts(engine: &Engine, query: &FactQuery) -> Result<EpisodicFacts> {
    let visible: Vec<String> = engine.visible_scopes().iter().map(|s| s.key()).collect();
    let needle = query
        .text
        .as_deref()
        .map(|t| t.trim().to_lowercase())
        .filter(|t| !t.is_empty());
    let log = engine.log()?;
    let matching: Vec<crate::log::DerivedItem> = log
        .facts(query.replaced)?
        .into_iter()
        .rev()
        .filter(|d| visible.contains(&d.scope))
        .filter(|d| {
            needle.as_deref().is_none_or(|n| {
                [&d.subject, &d.attribute, &d.value]
                    .iter()
                    .any(|field| field.as_deref().unwrap_or("").to_lowercase().contains(n))
            })
        })
        .collect();
    let total = matching.len();
    let limit = query.limit.unwrap_or(MAX_FACTS).min(MAX_FACTS);
    let mut out = Vec::with_capacity(total.min(limit));
    for d in matching.into_iter().take(limit) {
        let mut messages = Vec::with_capacity(d.sources.len());
        for key in &d.sources {
            if let Some(m) = log.get(key)? {
                messages.push(FactSource {
                    at: m.when(),
                    key: m.key,
                    message_id: m.message_id,
                    seq: m.seq,
                    role: m.role,
                    speaker: m.speaker,
                });
            }
        }
        out.push(EpisodicFact {
            scope: d.scope.clone(),
            conversation: d.conversation.clone(),
            fact: fact_view(d),
            messages,
        });
    }
    Ok(EpisodicFacts { facts: out, total })
}

pub use crate::capture::promote::{
    AUTO_PER_RUN, AutoPromotion, LeftProposed, PROMOTE_AFTER, Promoted, Promotion,
};

/// The facts ready to become durable notes: still current and stated in several
/// conversations of a visible scope, never promoted before.
pub fn promotions(engine: &Engine) -> Result<Vec<Promotion>> {
    crate::capture::promote::candidates(engine, &engine.visible_scopes())
}

/// Promotes one of [`promotions`] (by its key) into a note of its scope, written through the
/// derive path: as trusted as the least trusted message that stated it, naming them all.
pub fn promote(engine: &mut Engine, key: &str) -> Result<Promoted> {
    crate::capture::promote::promote(engine, key)
}

/// Promotes up to `limit` (else [`AUTO_PER_RUN`]) of [`promotions`] with the configured chat
/// model, which phrases each as a note (at most `derived` trust, `origin.model` naming it). A
/// fact whose answer is refused stays proposed, with the reason in [`AutoPromotion::left`].
/// Without `model.url` nothing is done ([`AutoPromotion::model`] is `None`).
pub fn promote_auto(engine: &mut Engine, limit: Option<usize>) -> Result<AutoPromotion> {
    crate::capture::promote::promote_auto(engine, limit)
}

/// What the log holds.
pub fn stats(engine: &Engine) -> Result<LogStats> {
    engine.log()?.stats()
}

/// Asks the configured model for the turns waiting in the capture ledger (model capture) and
/// settles their rows: notes written or reinforced, or skipped with a reason. Returns the rows
/// settled. Runs where waiting for a model is fine: never inside an agent's hook.
pub fn run_model_captures(engine: &mut Engine) -> Result<Vec<CaptureRun>> {
    capture::model::run_pending(engine)
}

/// Whether turns wait for the model in the scopes a process in `project_dir` sees (its
/// project's, its domain's and the user's; with no folder, the user's), in the home at `root`:
/// what [`run_model_captures`] there would take. Opens only the log and the project's file.
pub fn model_captures_waiting(root: &Path, project_dir: Option<&Path>) -> Result<bool> {
    if !crate::log::log_path(root).exists() {
        return Ok(false);
    }
    let home = crate::home::Home::resolve(Some(root))?;
    let project = match project_dir {
        Some(dir) => crate::project::Project::open(&home, dir)?,
        None => None,
    };
    let scopes: Vec<String> = crate::project::visible_scopes(project.as_ref())
        .iter()
        .map(crate::project::Scope::key)
        .collect();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    crate::log::Log::open(&home)?.runs_waiting(now, &scopes)
}

/// The capture ledger of the scopes visible here: its latest `limit` rows, the newest first.
pub fn capture_log(engine: &Engine, limit: usize) -> Result<Vec<CaptureRun>> {
    let scopes: Vec<String> = engine.visible_scopes().iter().map(|s| s.key()).collect();
    engine.log()?.runs(&scopes, limit)
}

fn find(engine: &Engine, conversation: &str, scope: Option<&str>) -> Result<Conversation> {
    let scope = scope_arg(engine, scope)?.map(|s| s.key());
    let all: Vec<Conversation> = list(engine)?
        .into_iter()
        .filter(|c| c.id == conversation && scope.as_ref().is_none_or(|s| *s == c.scope))
        .collect();
    match all.as_slice() {
        [] => Err(Error::NotFound(format!(
            "no conversation {conversation} visible here"
        ))),
        [one] => Ok(one.clone()),
        several => Err(Error::Invalid(format!(
            "conversation {conversation} is in several scopes ({}): name the scope",
            several
                .iter()
                .map(|c| c.scope.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vault::OpenOptions;

    const SAID: &str = r#"{"conversation":"spring","id":"1","role":"user","speaker":"Ana","time":"2024-03-01T09:00:00Z","text":"I live in Lisbon."}
{"conversation":"autumn","id":"1","role":"user","speaker":"Ana","time":"2024-10-01T09:00:00Z","text":"I moved to Porto!"}
{"conversation":"autumn","id":"2","role":"user","speaker":"Ana","time":"2024-10-01T09:01:00Z","text":"I live in Porto, my password: hunter2-porto-zz"}
"#;

    #[test]
    fn facts_list_the_current_ones_and_on_request_the_replaced_with_their_messages() {
        let tmp = tempfile::tempdir().unwrap();
        let e = Engine::open(OpenOptions::without_model(tmp.path())).unwrap();
        capture_text(&e, SAID, &CaptureRequest::default()).unwrap();
        let values = |q: &FactQuery| -> Vec<(String, Option<i64>)> {
            facts(&e, q)
                .unwrap()
                .facts
                .into_iter()
                .map(|f| (f.fact.value, f.fact.valid_to))
                .collect()
        };

        let now = facts(&e, &FactQuery::default()).unwrap();
        assert_eq!(now.total, 1, "{now:?}");
        let porto = &now.facts[0];
        assert_eq!(
            (porto.fact.value.as_str(), porto.fact.valid_to),
            ("Porto", None)
        );
        assert_eq!(
            (porto.scope.as_str(), porto.conversation.as_str()),
            ("user", "autumn")
        );
        // Its provenance names the message that said it, a link into its conversation.
        let said: Vec<(&str, Option<&str>)> = porto
            .messages
            .iter()
            .map(|m| (m.message_id.as_str(), m.speaker.as_deref()))
            .collect();
        assert_eq!(said, [("1", Some("Ana"))]);
        assert_eq!(porto.messages[0].key, porto.fact.sources[0]);
        assert_eq!(Some(porto.messages[0].at), porto.fact.valid_from);

        // The replaced fact, with when it stopped holding: when Porto was said.
        let all = values(&FactQuery {
            replaced: true,
            ..Default::default()
        });
        assert_eq!(
            all,
            [
                ("Porto".to_owned(), None),
                ("Lisbon".to_owned(), porto.fact.valid_from)
            ]
        );
        // Filtered by subject or value, in any case.
        let lisbon = FactQuery {
            text: Some(" LISB ".into()),
            replaced: true,
            limit: None,
        };
        assert_eq!(values(&lisbon).len(), 1);
        assert!(
            values(&FactQuery {
                replaced: false,
                ..lisbon.clone()
            })
            .is_empty(),
            "replaced facts only on request"
        );
        assert_eq!(
            values(&FactQuery {
                text: Some("ana".into()),
                replaced: true,
                limit: None,
            })
            .len(),
            2
        );
        let one = facts(
            &e,
            &FactQuery {
                replaced: true,
                limit: Some(1),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!((one.facts.len(), one.total), (1, 2));
        // Nothing is derived from the message the credential guard marked.
        let json = serde_json::to_string(&facts(&e, &lisbon.clone()).unwrap()).unwrap();
        assert!(!json.contains("hunter2"), "{json}");
        let all = serde_json::to_value(
            facts(
                &e,
                &FactQuery {
                    replaced: true,
                    ..Default::default()
                },
            )
            .unwrap(),
        )
        .unwrap();
        assert!(!all.to_string().contains("hunter2"), "{all}");
        assert_eq!(all["facts"][0]["conversation"], "autumn", "{all}");
        assert!(all["facts"][0]["validFrom"].is_i64(), "flattened: {all}");
    }

    #[test]
    fn a_project_s_facts_are_listed_in_that_project_only() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        let open = |project: Option<&Path>| {
            Engine::open(OpenOptions {
                project_dir: project.map(Path::to_path_buf),
                ..OpenOptions::without_model(root.join("home"))
            })
            .unwrap()
        };
        let a = crate::project::Project::init(&root.join("a"), None)
            .unwrap()
            .root;
        let b = crate::project::Project::init(&root.join("b"), None)
            .unwrap()
            .root;
        capture_text(&open(Some(&a)), SAID, &CaptureRequest::default()).unwrap();
        let all = FactQuery {
            replaced: true,
            ..Default::default()
        };
        let in_a = facts(&open(Some(&a)), &all).unwrap();
        assert_eq!(in_a.total, 2, "{in_a:?}");
        assert!(in_a.facts.iter().all(|f| f.scope.starts_with("project:")));
        assert_eq!(facts(&open(Some(&b)), &all).unwrap().total, 0);
        assert_eq!(facts(&open(None), &all).unwrap().total, 0);
    }
}
