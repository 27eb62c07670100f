//! memoria-capture: conversations in. Transcripts from agents' hosts (Claude Code's transcript,
//! OpenClaw's session logs, the generic JSON Lines format of `docs/conversations.md`) become
//! messages of the raw log (`memoria_store::log`), which recall then searches beside notes.
//!
//! One path for every door (the CLI's `capture`, the hook, the MCP tool, the API, the eval
//! harness): [`capture`]. It keeps each message verbatim with its time, author and
//! conversation in the scope it is captured into; it drops tool output, system prompts and a
//! model's reasoning unless asked to keep them; it runs the credential guard and the poison
//! gate (`memoria_derive::gate`) on every text (a message that trips either is kept, marked and
//! never recalled, and nothing is derived from it); and capturing the same transcript twice
//! adds nothing.
//!
//! After a turn, [`model`] may ask the configured chat model for durable notes (model
//! capture), each turn's outcome kept in the capture ledger.
//!
//! **Invariant:** a conversation lives in one scope; nothing captured reaches another
//! project, and nothing captured leaves this machine except a turn sent to the model the
//! person configured (`model.url`), masked when that model is remote.

pub mod extract;
pub mod format;
pub mod model;
pub mod promote;

use std::collections::{HashMap, HashSet};

use memoria_derive::gate;
use memoria_store::log::{NewMessage, Role};
use memoria_store::{Error, Result, Scope, guard};
use memoria_vault::vault::Engine;
use serde::Serialize;

pub use format::{Incoming, parse_claude_code, parse_jsonl, parse_openclaw, parse_openclaw_daily};

/// How a capture runs.
#[derive(Debug, Clone, Default)]
pub struct CaptureOptions {
    /// The scope the conversation is kept in; `None`: the project's when the engine is opened
    /// in one, else the user's.
    pub scope: Option<Scope>,
    /// The conversation of messages that name none.
    pub conversation: Option<String>,
    /// The host that produced the transcript (`claude-code`, `openclaw`, …), for messages that
    /// name none.
    pub host: Option<String>,
    /// Keep tool output and system prompts too.
    pub keep_tools: bool,
    /// An automatic capture (the hook): a file is read from after what was passed over while
    /// capture was off ([`pass_over`]).
    pub automatic: bool,
    /// The door it came through, for the capture ledger.
    pub entry: model::Entry,
}

/// What a capture did.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CaptureReport {
    pub scope: String,
    /// Conversations the messages belong to.
    pub conversations: Vec<String>,
    /// Messages new to the log.
    pub added: usize,
    /// Messages the log already held (captured before).
    pub already: usize,
    /// Messages left out: tool output and system prompts (unless kept), empty texts.
    pub skipped: usize,
    /// Messages that tripped the credential guard: kept, never recalled.
    pub secret: usize,
    /// Messages that read as instructions to an assistant (the poison gate): kept, marked
    /// quarantined, never recalled, nothing derived from them.
    pub quarantined: usize,
    /// The keys of the messages added, in order.
    pub keys: Vec<String>,
    /// A turn waits for the model ([`model::run_pending`]).
    pub model_pending: bool,
}

/// Longest message kept, in bytes; a longer one is cut at a character boundary and marked.
pub const MAX_MESSAGE_BYTES: usize = 64 * 1024;

/// Captures messages into the raw log. An engine with its recall index open (a session's)
/// finds them by their words at once, their vectors following in the background; otherwise
/// the next search brings them in, so a capture never waits for the model.
pub fn capture(
    engine: &Engine,
    incoming: Vec<Incoming>,
    opts: &CaptureOptions,
) -> Result<CaptureReport> {
    let scope = match &opts.scope {
        Some(s) => {
            if !engine.visible_scopes().contains(s) {
                return Err(Error::Invalid(format!(
                    "{} is not visible from here: capture into this project's scope, the user's, or the project's domain",
                    s.key()
                )));
            }
            s.clone()
        }
        None => engine.project().map(|p| p.scope()).unwrap_or(Scope::User),
    };
    let mut report = CaptureReport {
        scope: scope.key(),
        ..Default::default()
    };
    // Messages without a place of their own follow what the log holds of their conversation.
    let mut seqs: HashMap<String, i64> = HashMap::new();
    let mut occurrences: HashMap<String, usize> = HashMap::new();
    let mut messages = Vec::new();
    for m in incoming {
        let Some(conversation) = m
            .conversation
            .clone()
            .or_else(|| opts.conversation.clone())
            .filter(|c| !c.trim().is_empty())
        else {
            return Err(Error::Invalid(
                "a message names no conversation: give each one a \"conversation\", or name the conversation for the whole transcript".into(),
            ));
        };
        let seq = match seqs.get_mut(&conversation) {
            Some(s) => s,
            None => {
                let last = engine.log()?.last_seq(&scope.key(), &conversation)?;
                seqs.entry(conversation.clone()).or_insert(last)
            }
        };
        *seq = m.seq.unwrap_or(*seq + 1).max(*seq + 1);
        let role = m.role;
        let mut text = m.text.trim().to_owned();
        for caption in &m.captions {
            if !caption.trim().is_empty() {
                text.push_str(&format!("\n[shared: {}]", caption.trim()));
            }
        }
        if text.is_empty() || (!opts.keep_tools && matches!(role, Role::Tool | Role::System)) {
            report.skipped += 1;
            continue;
        }
        if text.len() > MAX_MESSAGE_BYTES {
            let mut cut = MAX_MESSAGE_BYTES;
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            text.truncate(cut);
            text.push_str(" […]");
        }
        let secret = guard::scan(&text).map(|f| f.rule.to_owned());
        let quarantined = poisoned(&text, m.speaker.as_deref()).map(str::to_owned);
        if !report.conversations.contains(&conversation) {
            report.conversations.push(conversation.clone());
        }
        messages.push(NewMessage {
            scope: scope.key(),
            message_id: match (&m.id, m.seq) {
                (Some(id), _) => id.clone(),
                (None, Some(line)) => line.to_string(),
                (None, None) => content_id(&m, &mut occurrences),
            },
            conversation,
            seq: *seq,
            at: m.at,
            role,
            speaker: m.speaker,
            host: m.host.or_else(|| opts.host.clone()),
            model: m.model,
            text,
            secret,
            quarantined,
        });
    }
    let now = engine.now_ms();
    let added = engine.log()?.append(&messages, now)?;
    report.already = messages.len() - added.len();
    let new: HashSet<String> = added.iter().cloned().collect();
    let is_new = |m: &&NewMessage| {
        new.contains(&memoria_store::log::message_key(
            &m.scope,
            &m.conversation,
            &m.message_id,
        ))
    };
    report.secret = messages
        .iter()
        .filter(|m| m.secret.is_some())
        .filter(is_new)
        .count();
    for m in messages.iter().filter(is_new) {
        if let Some(detector) = &m.quarantined {
            // The detector's name and where, never the text.
            tracing::warn!(
                detector = %detector,
                scope = %m.scope,
                conversation = %m.conversation,
                "poison gate: a captured message is kept quarantined"
            );
            report.quarantined += 1;
        }
    }
    report.added = added.len();
    report.keys = added;
    // What the conversations say is derived where they gained messages.
    let mut gained: Vec<(String, Vec<String>)> = Vec::new();
    for m in &messages {
        let key = memoria_store::log::message_key(&m.scope, &m.conversation, &m.message_id);
        if !new.contains(&key) {
            continue;
        }
        match gained.iter_mut().find(|(c, _)| *c == m.conversation) {
            Some((_, keys)) => keys.push(key),
            None => gained.push((m.conversation.clone(), vec![key])),
        }
    }
    for (conversation, keys) in &gained {
        extract::derive_conversation(engine, &scope.key(), conversation, Some(keys))?;
    }
    report.model_pending = model::queue(
        engine,
        &scope.key(),
        &gained,
        opts.host.as_deref(),
        opts.entry,
    )?;
    apply_retention(engine)?;
    if report.added > 0 {
        engine.sync_recall_later()?;
    }
    Ok(report)
}

/// The poison gate's detector a message trips, as recall would show it: its text, and its
/// speaker's name as the label of a turn (a speaker named "SYSTEM" fakes a system turn).
pub fn poisoned(text: &str, speaker: Option<&str>) -> Option<&'static str> {
    gate::check(text)
        .or_else(|| speaker.and_then(|s| gate::check(&format!("{}: ", s.trim()))))
        .map(|d| d.detector)
}

/// The id of a message that has none and no line of its own: what it is (role, speaker, time,
/// text) and how many times the same was said before it in this capture, so capturing it
/// again changes nothing and "ok" said twice is kept twice.
fn content_id(m: &Incoming, seen: &mut HashMap<String, usize>) -> String {
    let what = format!(
        "{}\u{0}{}\u{0}{:?}\u{0}{}",
        m.role.as_str(),
        m.speaker.as_deref().unwrap_or(""),
        m.at,
        m.text
    );
    let digest = memoria_shared::hash::sha256_hex(what.as_bytes());
    let n = seen.entry(digest.clone()).or_insert(0);
    *n += 1;
    format!("h{}-{n}", &digest[..16])
}

/// The transcript formats [`capture_file`] reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Format {
    /// The generic JSON Lines format (`docs/conversations.md`).
    Jsonl,
    /// Claude Code's transcript.
    ClaudeCode,
    /// OpenClaw's session log.
    Openclaw,
    /// OpenClaw's daily log (`memory/YYYY-MM-DD.md`).
    OpenclawDaily,
}

impl Format {
    /// Reads a transcript's text; `from_line` numbers its first line in error messages and
    /// `conversation` names the conversation for formats whose lines may not.
    pub fn parse(
        self,
        text: &str,
        from_line: usize,
        conversation: Option<&str>,
    ) -> Result<Vec<Incoming>> {
        match self {
            Format::Jsonl => format::parse_jsonl_from(text, from_line),
            Format::ClaudeCode => parse_claude_code(text, from_line),
            Format::Openclaw => parse_openclaw(text, conversation),
            Format::OpenclawDaily => parse_openclaw_daily(text, conversation),
        }
    }
}

/// Largest transcript read in one capture.
pub const MAX_TRANSCRIPT_BYTES: u64 = 256 * 1024 * 1024;

/// Where each transcript file's capture stopped: its path → (bytes read, lines read, a hash of
/// the bytes read, up to [`PREFIX_BYTES`] of them from the start).
type Progress = std::collections::BTreeMap<String, (u64, usize, String)>;

/// How much of a transcript's start identifies it: a file replaced by another is read again
/// from its start, not from the middle of a line.
const PREFIX_BYTES: u64 = 4096;

fn prefix_hash(file: &mut std::fs::File, upto: u64) -> std::io::Result<String> {
    use std::io::{Read, Seek, SeekFrom};
    let mut head = vec![0u8; upto.min(PREFIX_BYTES) as usize];
    file.seek(SeekFrom::Start(0))?;
    file.read_exact(&mut head)?;
    Ok(memoria_shared::hash::sha256_hex(&head))
}

fn progress_path(root: &std::path::Path) -> std::path::PathBuf {
    root.join("log").join("transcripts.json")
}

fn load_progress(state_path: &std::path::Path) -> Progress {
    match std::fs::read(state_path) {
        Ok(b) => serde_json::from_slice(&b).unwrap_or_default(),
        Err(_) => Progress::new(),
    }
}

fn save_progress(state_path: &std::path::Path, progress: &Progress) -> Result<()> {
    let bytes = serde_json::to_vec_pretty(progress)
        .map_err(|e| Error::Internal(format!("encoding the transcripts' progress: {e}")))?;
    if let Some(dir) = state_path.parent() {
        if let Some(home) = dir.parent() {
            memoria_store::fsx::private_dir(home)?;
        }
        memoria_store::fsx::private_dir(dir)?;
    }
    memoria_store::fsx::write_atomic(state_path, &bytes)
}

/// A transcript file opened where its last capture stopped: its canonical path, the file,
/// and the (byte, line) it stopped at (0 when the file is new, shorter, or another file now).
/// With `passed`, a place [`pass_over`] marked later than that counts too.
type Opened = (std::path::PathBuf, std::fs::File, u64, usize);

/// The progress entry of what [`pass_over`] marked read without capturing.
fn passed_key(key: &str) -> String {
    format!("passed:{key}")
}

fn open_where_stopped(progress: &Progress, path: &std::path::Path, passed: bool) -> Result<Opened> {
    let abs = std::fs::canonicalize(path).map_err(Error::io("read", path))?;
    let key = abs.to_string_lossy().into_owned();
    let mut file = std::fs::File::open(&abs).map_err(Error::io("read", &abs))?;
    let len = file.metadata().map_err(Error::io("read", &abs))?.len();
    let mut at = |entry: Option<&(u64, usize, String)>| -> Result<(u64, usize)> {
        Ok(match entry {
            Some((offset, line, head))
                if *offset <= len
                    && prefix_hash(&mut file, *offset).map_err(Error::io("read", &abs))?
                        == *head =>
            {
                (*offset, *line)
            }
            _ => (0, 0),
        })
    };
    let mut stopped = at(progress.get(&key))?;
    if passed {
        stopped = stopped.max(at(progress.get(&passed_key(&key)))?);
    }
    Ok((abs, file, stopped.0, stopped.1))
}

/// The complete lines of `bytes` (read from where a capture stopped): a last line without its
/// newline is taken when it is whole JSON (a file written at once); else it is still being
/// written and waits. Returns the text to read and how many of the file's bytes it used.
fn complete_lines(mut bytes: Vec<u8>) -> (Vec<u8>, u64) {
    let read = bytes.len();
    let complete = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    if complete < bytes.len()
        && serde_json::from_slice::<serde_json::Value>(&bytes[complete..]).is_ok()
    {
        bytes.push(b'\n');
    } else {
        bytes.truncate(complete);
    }
    let consumed = bytes.len().min(read) as u64;
    (bytes, consumed)
}

fn read_rest(abs: &std::path::Path, file: &mut std::fs::File, offset: u64) -> Result<Vec<u8>> {
    use std::io::{Read, Seek, SeekFrom};
    let len = file.metadata().map_err(Error::io("read", abs))?.len();
    if len - offset.min(len) > MAX_TRANSCRIPT_BYTES {
        return Err(Error::Invalid(format!(
            "the transcript {} has {} MiB to read, more than the {} MiB one capture takes: split it",
            abs.display(),
            (len - offset) >> 20,
            MAX_TRANSCRIPT_BYTES >> 20
        )));
    }
    file.seek(SeekFrom::Start(offset))
        .map_err(Error::io("read", abs))?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)
        .map_err(Error::io("read", abs))?;
    Ok(bytes)
}

/// Captures a transcript file from where the last capture of the same file stopped (from the
/// start when the file is now shorter: rewritten or replaced). Only complete lines are read; a
/// line still being written is read next time. Capturing is idempotent anyway: this only
/// saves reading the file again.
pub fn capture_file(
    engine: &Engine,
    path: &std::path::Path,
    format: Format,
    opts: &CaptureOptions,
) -> Result<CaptureReport> {
    let state_path = progress_path(engine.home().root());
    let mut progress = load_progress(&state_path);
    let (abs, mut file, offset, line) = open_where_stopped(&progress, path, opts.automatic)?;
    let (bytes, consumed) = complete_lines(read_rest(&abs, &mut file, offset)?);
    let text = String::from_utf8_lossy(&bytes);
    let stem = abs.file_stem().map(|s| s.to_string_lossy().into_owned());
    let mut opts = opts.clone();
    if opts.conversation.is_none() {
        opts.conversation = stem.clone();
    }
    let incoming = format.parse(&text, line + 1, opts.conversation.as_deref())?;
    let mut report = capture(engine, incoming, &opts)?;
    if report.scope.is_empty() {
        report.scope = opts.scope.as_ref().map(Scope::key).unwrap_or_default();
    }
    let read_to = offset + consumed;
    let head = prefix_hash(&mut file, read_to).map_err(Error::io("read", &abs))?;
    progress.insert(
        abs.to_string_lossy().into_owned(),
        (read_to, line + text.lines().count(), head),
    );
    save_progress(&state_path, &progress)?;
    Ok(report)
}

/// Marks a transcript file of the home at `root` as read to its last complete line without
/// capturing any of it: what was said while capture was turned off is never captured later
/// by an automatic capture (the hook). A capture a person asks for by name still reads it.
/// Needs no engine, so a hook with capture off opens nothing else.
pub fn pass_over(root: &std::path::Path, path: &std::path::Path) -> Result<()> {
    if !path.exists() {
        return Ok(()); // nothing said yet, nothing to pass over
    }
    let state_path = progress_path(root);
    let mut progress = load_progress(&state_path);
    let (abs, mut file, offset, line) = open_where_stopped(&progress, path, true)?;
    let (bytes, consumed) = complete_lines(read_rest(&abs, &mut file, offset)?);
    let read_to = offset + consumed;
    let head = prefix_hash(&mut file, read_to).map_err(Error::io("read", &abs))?;
    let lines = String::from_utf8_lossy(&bytes).lines().count();
    progress.insert(
        passed_key(&abs.to_string_lossy()),
        (read_to, line + lines, head),
    );
    save_progress(&state_path, &progress)
}

/// Applies the home's retention policy for conversations (`LogPolicy`): what it removes from
/// the log leaves recall too, at once when this engine has the recall index open, else at the
/// index's next update. Returns how many messages went.
pub fn apply_retention(engine: &Engine) -> Result<usize> {
    let policy = memoria_store::log::LogPolicy::load(engine.home().root())?;
    if policy == memoria_store::log::LogPolicy::default() {
        return Ok(0);
    }
    let removed = engine.log()?.apply(&policy, engine.now_ms())?;
    if removed.is_empty() {
        return Ok(0);
    }
    // What was derived from the removed messages is derived again from what is left (or goes
    // with its conversation), and its old text folded out of the file.
    let mut before: HashMap<(String, String), HashSet<String>> = HashMap::new();
    let mut conversations: Vec<(String, String)> = removed
        .iter()
        .map(|r| (r.scope.clone(), r.conversation.clone()))
        .collect();
    conversations.sort();
    conversations.dedup();
    for (scope, conversation) in &conversations {
        let items = engine.log()?.derived_of(scope, conversation)?;
        before.insert(
            (scope.clone(), conversation.clone()),
            items.into_iter().map(|i| i.key).collect(),
        );
        extract::derive_conversation(engine, scope, conversation, None)?;
    }
    let mut gone: Vec<(String, String)> = removed
        .iter()
        .map(|r| (r.scope.clone(), r.key.clone()))
        .collect();
    {
        let log = engine.log()?;
        for ((scope, conversation), keys) in before {
            let now: HashSet<String> = log
                .derived_of(&scope, &conversation)?
                .into_iter()
                .map(|i| i.key)
                .collect();
            gone.extend(
                keys.into_iter()
                    .filter(|k| !now.contains(k))
                    .map(|k| (scope.clone(), k)),
            );
        }
        log.checkpoint()?;
    }
    // An engine with the recall index open purges them from it now; otherwise the index's next
    // update drops them (a capture, the hook among them, never loads the model for this).
    if engine.recall_index.get().is_some() {
        let mut by_scope: HashMap<String, Vec<String>> = HashMap::new();
        for (scope, key) in &gone {
            by_scope.entry(scope.clone()).or_default().push(key.clone());
        }
        for (scope, keys) in by_scope {
            engine.forget_messages(&scope, &keys)?;
        }
    }
    Ok(removed.len())
}

/// What [`forget_conversation`] removed.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Forgotten {
    pub scope: String,
    pub conversation: String,
    pub messages: usize,
    /// Facts and summaries derived from it.
    pub derived: usize,
}

/// Removes a conversation of `scope` and everything kept of it: its messages and texts from
/// the log and their documents (and vectors) from recall.
pub fn forget_conversation(
    engine: &Engine,
    scope: &Scope,
    conversation: &str,
) -> Result<Forgotten> {
    let removed = {
        let mut log = engine.log()?;
        let stated = extract::stated(&log, &scope.key(), conversation)?;
        let removed = log.purge_conversation(&scope.key(), conversation)?;
        // Facts of other conversations its facts had closed are current again.
        extract::settle(&mut log, &scope.key(), &stated)?;
        removed
    };
    if removed.is_empty() {
        return Err(Error::NotFound(format!(
            "no conversation {conversation} in {}",
            scope.key()
        )));
    }
    engine.forget_messages(&scope.key(), &removed)?;
    Ok(Forgotten {
        scope: scope.key(),
        conversation: conversation.to_owned(),
        messages: removed
            .iter()
            .filter(|k| memoria_store::log::is_message_key(k))
            .count(),
        derived: removed
            .iter()
            .filter(|k| memoria_store::log::is_derived_key(k))
            .count(),
    })
}

#[cfg(test)]
mod tests;
