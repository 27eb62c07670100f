//! Transcript formats, each read into [`Incoming`] messages: the generic JSON Lines format
//! (`docs/conversations.md`), Claude Code's transcript and OpenClaw's session and daily logs. Readers
//! are lenient about what they do not use and strict about what they do: a line that is not
//! JSON, or a message without text where text is required, is an error naming its line.

use memoria_store::backup::time_to_ms;
use memoria_store::log::Role;
use memoria_store::{Error, Result};
use serde_json::Value;

/// A message read from a transcript, before it is captured.
#[derive(Debug, Clone, PartialEq)]
pub struct Incoming {
    pub conversation: Option<String>,
    /// Its id in the transcript; `None`: its position in the conversation.
    pub id: Option<String>,
    /// Its place in the conversation; `None`: its position.
    pub seq: Option<i64>,
    /// When it was said, in ms since the epoch.
    pub at: Option<i64>,
    pub role: Role,
    pub speaker: Option<String>,
    pub host: Option<String>,
    pub model: Option<String>,
    pub text: String,
    /// Captions of what was shared with it (an image, a file).
    pub captions: Vec<String>,
}

impl Incoming {
    /// A message with only a role and text.
    pub fn new(role: Role, text: impl Into<String>) -> Incoming {
        Incoming {
            conversation: None,
            id: None,
            seq: None,
            at: None,
            role,
            speaker: None,
            host: None,
            model: None,
            text: text.into(),
            captions: Vec::new(),
        }
    }
}

fn bad_line(n: usize, why: impl std::fmt::Display) -> Error {
    Error::Invalid(format!("transcript line {n}: {why}"))
}

fn lines(text: &str) -> impl Iterator<Item = (usize, Result<Value>)> + '_ {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            (
                i + 1,
                serde_json::from_str::<Value>(l)
                    .map_err(|e| bad_line(i + 1, format!("not JSON ({e})"))),
            )
        })
}

fn str_of<'a>(v: &'a Value, keys: &[&str]) -> Option<&'a str> {
    keys.iter()
        .find_map(|k| v.get(*k).and_then(Value::as_str))
        .filter(|s| !s.trim().is_empty())
}

/// A time as transcripts write it: RFC 3339 text, or a number of ms (or s) since the epoch.
fn time_of(v: &Value, keys: &[&str], n: usize) -> Result<Option<i64>> {
    for k in keys {
        match v.get(*k) {
            None | Some(Value::Null) => continue,
            Some(Value::Number(x)) => {
                let x = x.as_f64().unwrap_or(0.0);
                // Seconds until the year 5138, milliseconds after.
                let ms = if x < 1e11 { x * 1000.0 } else { x };
                return Ok(Some(ms as i64));
            }
            Some(Value::String(s)) => {
                return time_to_ms(s).map(Some).ok_or_else(|| {
                    bad_line(
                        n,
                        format!(
                            "\"{k}\": {s:?} is not a time (use RFC 3339, e.g. 2024-05-08T13:56:00Z)"
                        ),
                    )
                });
            }
            Some(other) => return Err(bad_line(n, format!("\"{k}\": {other} is not a time"))),
        }
    }
    Ok(None)
}

/// The generic format: one JSON object per line with `conversation`, `id`, `role` (`user`,
/// `assistant`, `tool`, `system`, anything else is another person), `speaker`, `time`, `text`,
/// `captions`, `host` and `model`; only `text` (or `captions`) is required.
pub fn parse_jsonl(text: &str) -> Result<Vec<Incoming>> {
    parse_jsonl_from(text, 1)
}

/// [`parse_jsonl`] of a transcript's text from line `from_line` on: a message without an id
/// is known by its line number, the same on every capture of the file.
pub fn parse_jsonl_from(text: &str, from_line: usize) -> Result<Vec<Incoming>> {
    let mut out = Vec::new();
    for (n, v) in lines(text) {
        let n = n + from_line.saturating_sub(1);
        let v = v.map_err(|_| bad_line(n, "not JSON"))?;
        if !v.is_object() {
            return Err(bad_line(n, "each line must be a JSON object"));
        }
        let body = match v.get("text").or_else(|| v.get("content")) {
            Some(Value::String(s)) => s.clone(),
            None | Some(Value::Null) => String::new(),
            Some(_) => return Err(bad_line(n, "\"text\" must be a string")),
        };
        let mut captions: Vec<String> = match v.get("captions") {
            Some(Value::Array(a)) => a
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect(),
            Some(Value::String(s)) => vec![s.clone()],
            _ => Vec::new(),
        };
        if let Some(Value::Array(att)) = v.get("attachments") {
            captions.extend(
                att.iter()
                    .filter_map(|a| str_of(a, &["caption"]))
                    .map(str::to_owned),
            );
        }
        if body.trim().is_empty() && captions.is_empty() {
            return Err(bad_line(n, "the message has no \"text\""));
        }
        out.push(Incoming {
            conversation: str_of(&v, &["conversation", "conversation_id", "session"])
                .map(str::to_owned),
            id: match v.get("id").or_else(|| v.get("message_id")) {
                Some(Value::String(s)) if !s.is_empty() => Some(s.clone()),
                Some(Value::Number(x)) => Some(x.to_string()),
                _ => None,
            },
            seq: Some(n as i64),
            at: time_of(&v, &["time", "timestamp", "at"], n)?,
            role: str_of(&v, &["role"]).map_or(Role::User, Role::parse),
            speaker: str_of(&v, &["speaker", "author", "name"]).map(str::to_owned),
            host: str_of(&v, &["host"]).map(str::to_owned),
            model: str_of(&v, &["model"]).map(str::to_owned),
            text: body,
            captions,
        });
    }
    Ok(out)
}

/// Text of a message's content: a string, or the `text` blocks of a list of blocks. Returns
/// also whether the content held only tool results (a tool's output sent back as a user turn).
fn content_text(content: &Value) -> (String, bool) {
    match content {
        Value::String(s) => (s.clone(), false),
        Value::Array(blocks) => {
            let mut text = Vec::new();
            let mut tool_results = 0;
            for b in blocks {
                match b.get("type").and_then(Value::as_str) {
                    Some("text") => {
                        if let Some(t) = b.get("text").and_then(Value::as_str) {
                            text.push(t.to_owned());
                        }
                    }
                    Some("tool_result" | "toolResult") => tool_results += 1,
                    _ => {} // tool calls, reasoning, images: not what was said
                }
            }
            (text.join("\n"), text.is_empty() && tool_results > 0)
        }
        _ => (String::new(), false),
    }
}

/// Claude Code's transcript (`transcript_path` in a hook's input): JSON Lines where `user` and
/// `assistant` lines carry `message.content`. Tool calls, tool results, reasoning, meta lines
/// (`isMeta`), subagents' lines (`isSidechain`) and other line types are left out; a compaction
/// summary is the assistant's. `from_line` numbers the first line (for a file read from the
/// middle).
pub fn parse_claude_code(text: &str, from_line: usize) -> Result<Vec<Incoming>> {
    let mut out = Vec::new();
    for (n, v) in lines(text) {
        let n = n + from_line.saturating_sub(1);
        let v = v.map_err(|_| bad_line(n, "not JSON"))?;
        let kind = v.get("type").and_then(Value::as_str).unwrap_or("");
        if !matches!(kind, "user" | "assistant")
            || v.get("isMeta").and_then(Value::as_bool) == Some(true)
            || v.get("isSidechain").and_then(Value::as_bool) == Some(true)
        {
            continue;
        }
        let Some(message) = v.get("message") else {
            continue;
        };
        let (body, only_tools) = content_text(message.get("content").unwrap_or(&Value::Null));
        let compact = v.get("isCompactSummary").and_then(Value::as_bool) == Some(true);
        let role = if only_tools {
            Role::Tool
        } else if kind == "assistant" || compact {
            Role::Assistant
        } else {
            Role::User
        };
        // A slash command's echo and local command output are the host's, not the person's.
        let host_text = body.trim_start().starts_with("<command-")
            || body.trim_start().starts_with("<local-command-");
        out.push(Incoming {
            conversation: str_of(&v, &["sessionId"]).map(str::to_owned),
            id: str_of(&v, &["uuid"]).map(str::to_owned),
            seq: None,
            at: time_of(&v, &["timestamp"], n)?,
            role: if host_text { Role::System } else { role },
            speaker: None,
            host: Some("claude-code".into()),
            model: str_of(message, &["model"]).map(str::to_owned),
            text: body,
            captions: Vec::new(),
        });
    }
    Ok(out)
}

/// OpenClaw's session log (`sessions/<id>.jsonl`): a `session` line with the conversation's
/// id, then `message` lines whose `message` has a `role` (`user`, `assistant`, `toolResult`)
/// and `content` blocks. `conversation` names the session when no `session` line does.
pub fn parse_openclaw(text: &str, conversation: Option<&str>) -> Result<Vec<Incoming>> {
    let mut out = Vec::new();
    let mut session = conversation.map(str::to_owned);
    for (n, v) in lines(text) {
        let v = v?;
        match v.get("type").and_then(Value::as_str) {
            Some("session") => {
                if let Some(id) = str_of(&v, &["id", "sessionId"]) {
                    session = Some(id.to_owned());
                }
            }
            Some("message") => {
                let Some(message) = v.get("message") else {
                    continue;
                };
                let role_name = str_of(message, &["role"]).unwrap_or("user");
                let (body, only_tools) =
                    content_text(message.get("content").unwrap_or(&Value::Null));
                // Heartbeats and memory flushes are the host talking to itself.
                let host_turn = matches!(body.trim(), "HEARTBEAT_OK" | "NO_REPLY");
                let role = if only_tools || role_name == "toolResult" {
                    Role::Tool
                } else if host_turn {
                    Role::System
                } else {
                    Role::parse(role_name)
                };
                let at = match time_of(&v, &["timestamp"], n)? {
                    Some(at) => Some(at),
                    None => time_of(message, &["timestamp"], n)?,
                };
                out.push(Incoming {
                    conversation: session.clone(),
                    id: str_of(&v, &["id"]).map(str::to_owned),
                    seq: None,
                    at,
                    role,
                    speaker: None,
                    host: Some("openclaw".into()),
                    model: str_of(message, &["model"]).map(str::to_owned),
                    text: body,
                    captions: Vec::new(),
                });
            }
            _ => {}
        }
    }
    Ok(out)
}

/// OpenClaw's daily log (`memory/YYYY-MM-DD.md`): Markdown the agent appends to during the
/// day. Each entry is a message of the agent's (`assistant`, host `openclaw`): a top-level
/// list item with its continuation lines, a paragraph, or a fenced code block kept whole
/// (blank lines and all); headings are not entries. An entry is dated by the file's
/// name (`conversation`, e.g. `2026-02-10`), at the time a heading or the entry itself starts
/// with (`14:05`, `[14:05]`), else at the start of that day (UTC). A message without an id is
/// known by its text and time, so capturing the file again, or a longer one, adds only what is
/// new.
pub fn parse_openclaw_daily(text: &str, conversation: Option<&str>) -> Result<Vec<Incoming>> {
    let day = conversation.and_then(day_start_ms);
    let mut out = Vec::new();
    let mut entry: Vec<&str> = Vec::new();
    let mut clock: Option<i64> = None;
    let mut fenced = false;
    let flush = |entry: &mut Vec<&str>, clock: Option<i64>, out: &mut Vec<Incoming>| {
        let joined = entry.join("\n");
        entry.clear();
        let body = strip_list_marker(joined.trim());
        let (own, body) = leading_clock(body);
        if body.trim().is_empty() {
            return;
        }
        let mut m = Incoming::new(Role::Assistant, body.trim());
        m.conversation = conversation.map(str::to_owned);
        m.host = Some("openclaw".into());
        m.at = day.map(|d| d + own.or(clock).unwrap_or(0));
        out.push(m);
    };
    for line in text.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            fenced = !fenced;
            entry.push(line);
            continue;
        }
        if fenced {
            entry.push(line);
            continue;
        }
        if line.trim().is_empty() {
            flush(&mut entry, clock, &mut out);
        } else if let Some(heading) = heading(line) {
            flush(&mut entry, clock, &mut out);
            if let (Some(t), _) = leading_clock(heading) {
                clock = Some(t);
            }
        } else if line == trimmed && is_list_item(line) {
            flush(&mut entry, clock, &mut out);
            entry.push(line);
        } else {
            entry.push(line);
        }
    }
    flush(&mut entry, clock, &mut out);
    Ok(out)
}

/// The start of the day a file's name ends with (`2026-02-10`), in ms since the epoch (UTC).
fn day_start_ms(name: &str) -> Option<i64> {
    time_to_ms(name.get(name.len().checked_sub(10)?..)?)
}

/// A Markdown heading's text: one to six `#` at the start of the line, then a space or nothing.
fn heading(line: &str) -> Option<&str> {
    let hashes = line.chars().take_while(|&c| c == '#').count();
    let rest = &line[hashes..];
    ((1..=6).contains(&hashes) && (rest.is_empty() || rest.starts_with(' '))).then(|| rest.trim())
}

fn is_list_item(line: &str) -> bool {
    if let Some(rest) = line.strip_prefix(['-', '*', '+']) {
        return rest.starts_with(' ');
    }
    let digits = line.chars().take_while(char::is_ascii_digit).count();
    digits > 0 && matches!(&line[digits..].get(..2), Some(". ") | Some(") "))
}

fn strip_list_marker(s: &str) -> &str {
    if is_list_item(s) {
        let cut = s.find(' ').unwrap_or(0);
        let rest = s[cut..].trim_start();
        // A task list's box is part of the marker.
        for b in ["[ ] ", "[x] ", "[X] "] {
            if let Some(r) = rest.strip_prefix(b) {
                return r;
            }
        }
        rest
    } else {
        s
    }
}

/// A time of day at the start of a text (`14:05`, `[14:05]`, `14:05 -`), as ms after midnight,
/// and the text after it.
fn leading_clock(s: &str) -> (Option<i64>, &str) {
    let inner = s.strip_prefix('[').unwrap_or(s);
    let digits = inner.chars().take_while(char::is_ascii_digit).count();
    if !(1..=2).contains(&digits) || inner.as_bytes().get(digits) != Some(&b':') {
        return (None, s);
    }
    let minutes = &inner[digits + 1..];
    if minutes.len() < 2 || !minutes.as_bytes()[..2].iter().all(u8::is_ascii_digit) {
        return (None, s);
    }
    let (h, m): (i64, i64) = (
        inner[..digits].parse().unwrap_or(99),
        minutes[..2].parse().unwrap_or(99),
    );
    if h > 23 || m > 59 {
        return (None, s);
    }
    let mut rest = &minutes[2..];
    rest = rest.strip_prefix(']').unwrap_or(rest);
    let rest = rest
        .trim_start()
        .trim_start_matches(['-', '–', '—', ':'])
        .trim_start();
    (Some((h * 60 + m) * 60_000), rest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_generic_format_reads_every_field_and_names_a_bad_line() {
        let text = r#"{"conversation":"c1","id":"m1","role":"user","speaker":"Ana","time":"2024-05-08T13:56:00Z","text":"I moved to Lisbon"}

{"conversation":"c1","role":"assistant","time":1715176560000,"text":"Noted.","model":"m"}
{"conversation":"c1","speaker":"Ana","text":"","captions":["a photo of a tram"]}
"#;
        let got = parse_jsonl(text).unwrap();
        assert_eq!(got.len(), 3);
        assert_eq!(got[0].id.as_deref(), Some("m1"));
        assert_eq!(got[0].speaker.as_deref(), Some("Ana"));
        assert_eq!(got[0].at, Some(1_715_176_560_000));
        assert_eq!(got[1].role, Role::Assistant);
        assert_eq!(got[1].at, got[0].at);
        assert_eq!(got[2].captions, ["a photo of a tram"]);
        let err = parse_jsonl("{\"text\":\"ok\"}\nnot json\n").unwrap_err();
        assert!(err.to_string().contains("line 2"), "{err}");
        let err = parse_jsonl("{\"text\":\"ok\",\"time\":\"last tuesday\"}\n").unwrap_err();
        assert!(err.to_string().contains("RFC 3339"), "{err}");
        let err = parse_jsonl("{\"role\":\"user\"}\n").unwrap_err();
        assert!(err.to_string().contains("no \"text\""), "{err}");
    }

    #[test]
    fn claude_code_keeps_what_was_said_and_leaves_tools_and_reasoning_out() {
        let text = r#"{"type":"summary","summary":"Earlier work","leafUuid":"x"}
{"type":"user","uuid":"u1","sessionId":"s1","timestamp":"2025-06-01T10:00:00.000Z","message":{"role":"user","content":"We deploy on Tuesdays"}}
{"type":"assistant","uuid":"a1","sessionId":"s1","timestamp":"2025-06-01T10:00:05.000Z","message":{"role":"assistant","model":"claude-x","content":[{"type":"thinking","thinking":"hmm"},{"type":"text","text":"Got it."},{"type":"tool_use","id":"t1","name":"Bash","input":{}}]}}
{"type":"user","uuid":"u2","sessionId":"s1","timestamp":"2025-06-01T10:00:06.000Z","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"ok"}]}}
{"type":"user","uuid":"u3","sessionId":"s1","isMeta":true,"timestamp":"2025-06-01T10:00:07.000Z","message":{"role":"user","content":"Caveat: injected"}}
{"type":"user","uuid":"u4","sessionId":"s1","timestamp":"2025-06-01T10:00:08.000Z","message":{"role":"user","content":"<command-name>/clear</command-name>"}}
"#;
        let got = parse_claude_code(text, 1).unwrap();
        let said: Vec<(Role, &str)> = got.iter().map(|m| (m.role, m.text.as_str())).collect();
        assert_eq!(
            said,
            [
                (Role::User, "We deploy on Tuesdays"),
                (Role::Assistant, "Got it."),
                (Role::Tool, ""),
                (Role::System, "<command-name>/clear</command-name>"),
            ]
        );
        assert_eq!(got[0].conversation.as_deref(), Some("s1"));
        assert_eq!(got[1].model.as_deref(), Some("claude-x"));
    }

    #[test]
    fn openclaw_sessions_take_the_session_id_and_leave_tool_results_out() {
        let text = r#"{"type":"session","version":3,"id":"sess-9","timestamp":"2026-01-02T08:00:00.000Z","cwd":"/w"}
{"type":"model_change","id":"e1","timestamp":"2026-01-02T08:00:00.000Z","provider":"p","modelId":"m"}
{"type":"message","id":"e2","parentId":"e1","timestamp":"2026-01-02T08:00:01.000Z","message":{"role":"user","content":[{"type":"text","text":"Book the dentist for Friday"}],"timestamp":1767340801000}}
{"type":"message","id":"e3","parentId":"e2","timestamp":"2026-01-02T08:00:02.000Z","message":{"role":"assistant","content":[{"type":"text","text":"Booked."}],"model":"m"}}
{"type":"message","id":"e4","parentId":"e3","timestamp":"2026-01-02T08:00:03.000Z","message":{"role":"toolResult","toolCallId":"c","content":[{"type":"text","text":"{}"}]}}
"#;
        let got = parse_openclaw(text, None).unwrap();
        assert_eq!(got.len(), 3);
        assert!(
            got.iter()
                .all(|m| m.conversation.as_deref() == Some("sess-9"))
        );
        assert_eq!(got[0].text, "Book the dentist for Friday");
        assert_eq!(got[1].role, Role::Assistant);
        assert_eq!(got[2].role, Role::Tool);
    }

    #[test]
    fn openclaw_daily_logs_make_one_message_per_entry_dated_by_the_file() {
        let text = "# 2026-02-10\n\n- Configured the Omada router, VLAN 10 for IoT\n  (the old one is in the closet)\n* [x] Set up AdGuard DNS on 192.168.10.2\n\n## 14:05\nRod's standup moved to 14:15.\nHe pairs at 2pm.\n\n```\nvlan 10 name iot\n```\n\n1. [09:30] Called the ISP\n\n#not-a-heading tag line\n";
        let got = parse_openclaw_daily(text, Some("2026-02-10")).unwrap();
        let texts: Vec<&str> = got.iter().map(|m| m.text.as_str()).collect();
        assert_eq!(
            texts,
            [
                "Configured the Omada router, VLAN 10 for IoT\n  (the old one is in the closet)",
                "Set up AdGuard DNS on 192.168.10.2",
                "Rod's standup moved to 14:15.\nHe pairs at 2pm.",
                "```\nvlan 10 name iot\n```",
                "Called the ISP",
                "#not-a-heading tag line",
            ]
        );
        let day = time_to_ms("2026-02-10").unwrap();
        let at: Vec<i64> = got.iter().map(|m| m.at.unwrap() - day).collect();
        let hm = |h: i64, m: i64| (h * 60 + m) * 60_000;
        assert_eq!(at, [0, 0, hm(14, 5), hm(14, 5), hm(9, 30), hm(14, 5)]);
        assert!(got.iter().all(|m| m.role == Role::Assistant
            && m.host.as_deref() == Some("openclaw")
            && m.conversation.as_deref() == Some("2026-02-10")
            && m.id.is_none()));
        // A file not named by a date: no time.
        let got = parse_openclaw_daily("- a note\n", Some("network")).unwrap();
        assert_eq!(got[0].at, None);
    }
}
