//! Conversations through the binary's doors: Claude Code's hook on a recorded-shape
//! transcript, `memoria capture` in the generic format and OpenClaw's, search beside notes,
//! scopes, and `forget --conversation --purge`.

use std::io::Write;

use serde_json::{Value, json};

use super::Memoria;

/// Lines in the shape Claude Code writes them (user prompts as strings, assistant content as
/// blocks, tool results as user lines, meta lines, a summary line).
fn claude_lines(session: &str, from: usize, texts: &[(&str, &str)]) -> String {
    let mut out = String::new();
    for (i, (kind, text)) in texts.iter().enumerate() {
        let n = from + i;
        let line = match *kind {
            "user" => json!({"type": "user", "uuid": format!("u{n}"), "parentUuid": null,
                "sessionId": session, "timestamp": format!("2025-06-01T10:{:02}:00.000Z", n % 60),
                "cwd": "/x", "isSidechain": false, "message": {"role": "user", "content": text}}),
            "assistant" => json!({"type": "assistant", "uuid": format!("a{n}"),
                "sessionId": session, "timestamp": format!("2025-06-01T10:{:02}:30.000Z", n % 60),
                "isSidechain": false, "message": {"role": "assistant", "model": "claude-test",
                "id": format!("msg_{n}"), "content": [{"type": "text", "text": text}]}}),
            "tool" => json!({"type": "user", "uuid": format!("t{n}"), "sessionId": session,
                "timestamp": "2025-06-01T10:00:40.000Z", "message": {"role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "x", "content": text}]}}),
            _ => json!({"type": "summary", "summary": text, "leafUuid": "u1"}),
        };
        out.push_str(&line.to_string());
        out.push('\n');
    }
    out
}

#[test]
fn the_claude_code_hook_captures_the_transcript_where_it_stopped_and_search_finds_it() {
    let m = Memoria::new();
    let proj = m.cwd.join("app");
    m.ok(&["init", proj.to_str().unwrap()]);
    let transcript = m.cwd.join("s1.jsonl");
    std::fs::write(
        &transcript,
        claude_lines(
            "s1",
            1,
            &[
                ("summary", "an earlier session"),
                ("user", "Our staging database is called heron-stage"),
                ("assistant", "Understood, heron-stage it is."),
                ("tool", "tool output nobody said"),
            ],
        ),
    )
    .unwrap();
    let stop = json!({"session_id": "s1", "transcript_path": transcript, "cwd": proj,
        "permission_mode": "default", "hook_event_name": "Stop", "stop_hook_active": false});
    let out = m.hook(&stop.to_string());
    assert_eq!(out.status.code(), Some(0));
    assert!(
        out.stdout.is_empty() && out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The session goes on; the end of the session captures only what is new.
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&transcript)
        .unwrap();
    f.write_all(
        claude_lines(
            "s1",
            5,
            &[(
                "user",
                "And production is heron-prod, never touch it on Fridays",
            )],
        )
        .as_bytes(),
    )
    .unwrap();
    drop(f);
    let end = json!({"session_id": "s1", "transcript_path": transcript, "cwd": proj,
        "hook_event_name": "SessionEnd", "reason": "prompt_input_exit"});
    assert_eq!(m.hook(&end.to_string()).status.code(), Some(0));
    assert_eq!(
        m.hook(&end.to_string()).status.code(),
        Some(0),
        "twice changes nothing"
    );
    let in_project = |args: &[&str]| -> Value {
        let out = m
            .command()
            .current_dir(&proj)
            .arg("--json")
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let convs = in_project(&["conversations"]);
    assert_eq!(convs.as_array().unwrap().len(), 1, "{convs}");
    assert_eq!(convs[0]["id"], "s1");
    assert_eq!(
        convs[0]["messages"], 3,
        "the tool result is left out: {convs}"
    );
    let messages = in_project(&["conversations", "s1"]);
    let texts: Vec<&str> = messages
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["text"].as_str().unwrap())
        .collect();
    assert_eq!(
        texts,
        [
            "Our staging database is called heron-stage",
            "Understood, heron-stage it is.",
            "And production is heron-prod, never touch it on Fridays"
        ]
    );
    // Outside the project, its conversation is not visible.
    assert_eq!(m.json(&["conversations"]), json!([]));
    let out = m
        .command()
        .current_dir(&proj)
        .args(["search", "what is the production database called"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("heron-prod"), "{text}");
}

#[test]
fn capture_reads_the_generic_format_and_openclaw_and_forget_purges_a_conversation() {
    let m = Memoria::new();
    let chat = m.cwd.join("chat.jsonl");
    std::fs::write(
        &chat,
        [
            json!({"conversation": "trip", "role": "user", "speaker": "Ana", "time": "2024-05-08T09:00:00Z", "text": "Book the hotel in Porto for the 12th"}),
            json!({"conversation": "trip", "role": "assistant", "time": "2024-05-08T09:00:05Z", "text": "Booked the Porto hotel."}),
        ]
        .map(|v| v.to_string())
        .join("\n"),
    )
    .unwrap();
    let r = m.json(&["capture", chat.to_str().unwrap()]);
    assert_eq!(
        (r["added"].as_u64(), r["scope"].as_str()),
        (Some(2), Some("user"))
    );
    let again = m.ok(&["capture", chat.to_str().unwrap()]);
    assert!(again.contains("captured 0 new messages"), "{again}");
    let session = m.cwd.join("4f2a.jsonl");
    std::fs::write(
        &session,
        [
            json!({"type": "session", "version": 3, "id": "4f2a", "timestamp": "2026-01-02T08:00:00.000Z", "cwd": "/w"}),
            json!({"type": "message", "id": "e1", "parentId": null, "timestamp": "2026-01-02T08:00:01.000Z", "message": {"role": "user", "content": [{"type": "text", "text": "Remind me the dentist is on Friday"}], "timestamp": 1767340801000_i64}}),
            json!({"type": "message", "id": "e2", "parentId": "e1", "timestamp": "2026-01-02T08:00:02.000Z", "message": {"role": "toolResult", "toolCallId": "c", "toolName": "cron", "content": [{"type": "text", "text": "{}"}], "isError": false}}),
        ]
        .map(|v| v.to_string())
        .join("\n")
            + "\n",
    )
    .unwrap();
    let r = m.json(&["capture", "--format", "openclaw", session.to_str().unwrap()]);
    assert_eq!(
        (r["added"].as_u64(), r["skipped"].as_u64()),
        (Some(1), Some(1))
    );
    let hits = m.json(&["search", "when is the dentist"]);
    assert!(hits.to_string().contains("dentist"), "{hits}");
    // A bad line is an error naming it, and nothing of that capture is kept.
    let bad = m.cwd.join("bad.jsonl");
    std::fs::write(
        &bad,
        "{\"text\": \"fine\", \"conversation\": \"b\"}\nnot json\n",
    )
    .unwrap();
    let out = m.run(&["capture", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("line 2"));
    assert_eq!(m.json(&["conversations"]).as_array().unwrap().len(), 2);
    // Forgetting needs --purge, then leaves nothing.
    let out = m.run(&["forget", "--conversation", "trip"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--purge"));
    let done = m.ok(&["forget", "--conversation", "trip", "--purge"]);
    assert!(done.contains("forgot conversation trip"), "{done}");
    let hits = m.json(&["search", "Porto hotel booking"]);
    assert!(!hits.to_string().contains("Porto"), "{hits}");
    let out = m.run(&["forget", "--conversation", "trip", "--purge"]);
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn openclaw_daily_logs_are_captured_entry_by_entry_and_again_only_what_was_appended() {
    let m = Memoria::new();
    let memory = m.cwd.join("memory");
    std::fs::create_dir_all(&memory).unwrap();
    let day = memory.join("2026-02-10.md");
    std::fs::write(
        &day,
        "# 2026-02-10\n\n- Configured the Omada router, VLAN 10 for IoT devices\n\n## 14:05\nRod's standup moved to 14:15.\n",
    )
    .unwrap();
    let path = day.to_str().unwrap();
    let r = m.json(&["capture", "--format", "openclaw-daily", path]);
    assert_eq!(r["added"].as_u64(), Some(2), "{r}");
    // The agent appends to the day's log; only the new entry is captured.
    let mut f = std::fs::OpenOptions::new().append(true).open(&day).unwrap();
    writeln!(f, "\n- [16:40] AdGuard DNS set up on 192.168.10.2").unwrap();
    drop(f);
    let r = m.json(&["capture", "--format", "openclaw-daily", path]);
    assert_eq!(
        (r["added"].as_u64(), r["already"].as_u64()),
        (Some(1), Some(0)),
        "{r}"
    );
    let r = m.json(&["capture", "--format", "openclaw-daily", path]);
    assert_eq!(r["added"].as_u64(), Some(0), "{r}");
    let list = m.json(&["conversations"]);
    let conv = list
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "2026-02-10")
        .unwrap_or_else(|| panic!("{list}"));
    assert_eq!(conv["messages"].as_u64(), Some(3), "{conv}");
    let hits = m.json(&["search", "which DNS server did we set up"]);
    let text = hits.to_string();
    assert!(
        text.contains("AdGuard") && text.contains("10 February 2026"),
        "{hits}"
    );
}

#[test]
fn search_lists_hits_in_the_order_of_the_number_shown_and_takes_the_agents_filters() {
    let m = Memoria::new();
    for (summary, tag, ty) in [
        ("Deploys go out on Tuesdays", "ops", "feedback"),
        ("Deploy freeze during the holidays", "ops", "project"),
        ("Deploy the docs site by hand", "docs", "project"),
        ("Tea over coffee", "food", "user"),
    ] {
        m.ok(&["add", "--summary", summary, "--tags", tag, "--type", ty]);
    }
    let out = m.ok(&["search", "deploy", "--all"]);
    let scores: Vec<f64> = out
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().next()?.parse().ok())
        .collect();
    assert!(scores.len() >= 3, "{out}");
    assert!(
        scores.windows(2).all(|w| w[0] >= w[1]),
        "the number shown first is the order: {out}"
    );
    let ids = |args: &[&str]| -> Vec<String> {
        let mut all = vec!["search", "deploy"];
        all.extend_from_slice(args);
        m.json(&all)
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["summary"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(ids(&["--tag", "docs"]), ["Deploy the docs site by hand"]);
    let projects = ids(&["--type", "project"]);
    assert_eq!(projects.len(), 2, "{projects:?}");
    assert!(ids(&["--after", "2999-01-01"]).is_empty());
    assert_eq!(ids(&["--before", "2999-01-01", "--tag", "ops"]).len(), 2);
    let out = m.run(&["search", "deploy", "--after", "soon"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("YYYY-MM-DD"));
}

#[test]
fn with_capture_turned_off_the_hook_keeps_nothing_and_capture_file_still_runs() {
    let m = Memoria::new();
    let set = m.json(&["config", "set", "conversations.capture", "false"]);
    assert_eq!(
        (set["value"].as_str(), set["source"].as_str()),
        (Some("false"), Some("file"))
    );
    let transcript = m.cwd.join("s2.jsonl");
    std::fs::write(
        &transcript,
        claude_lines("s2", 1, &[("user", "Say nothing of the surprise party")]),
    )
    .unwrap();
    let stop = json!({"session_id": "s2", "transcript_path": transcript, "cwd": m.cwd,
        "hook_event_name": "Stop", "stop_hook_active": false});
    let out = m.hook(&stop.to_string());
    assert_eq!(out.status.code(), Some(0));
    assert!(
        out.stdout.is_empty() && out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        m.json(&["conversations"]),
        json!([]),
        "the hook kept nothing"
    );
    // A capture the person asks for by name is not automatic: it runs.
    let r = m.json(&[
        "capture",
        "--format",
        "claude-code",
        transcript.to_str().unwrap(),
    ]);
    assert_eq!(r["added"].as_u64(), Some(1), "{r}");
    let listed = m.ok(&["config"]);
    assert!(
        listed.contains("conversations.capture = false  (config.json;"),
        "{listed}"
    );
}
