//! Quarantining a provider's memory end to end, through the real `memoria` binary: two hosts'
//! conversations captured, a note a model captured; the preview counts exactly what the
//! provenance says; applying hides the provider's messages, what was derived from them and its
//! note from every door an agent reads memory through while the other host's messages and the
//! person's own words stay found; releasing brings every label and the note's path back
//! exactly; the history and the audit log keep both.

use serde_json::Value;

use crate::privacy::{COLUMNS, Planted, World, message_ref};

/// Captures `lines` (role, speaker, model, text) as conversation `conversation` of host
/// `host`.
fn capture(w: &World, host: &str, conversation: &str, lines: &[(&str, &str, &str, &str)]) {
    let jsonl: Vec<String> = lines
        .iter()
        .enumerate()
        .map(|(n, (role, speaker, model, text))| {
            let mut m = serde_json::json!({"conversation": conversation, "id": n.to_string(),
                "role": role, "speaker": speaker, "host": host,
                "time": format!("2026-11-02T10:0{n}:00Z"), "text": text});
            if !model.is_empty() {
                m["model"] = Value::from(*model);
            }
            m.to_string()
        })
        .collect();
    let (ok, _, err) = w.memoria(&["--json", "capture", "-"], Some(&jsonl.join("\n")));
    assert!(ok, "capture: {err}");
}

fn json(w: &World, args: &[&str]) -> Value {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let (ok, out, err) = w.memoria(&all, None);
    assert!(ok, "memoria {args:?}: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

/// Every message's mark and every derived item's trust of a conversation.
fn labels(w: &World, conversation: &str) -> (Value, Value) {
    let messages: Vec<Value> = json(w, &["conversations", conversation])
        .as_array()
        .unwrap()
        .iter()
        .map(|m| serde_json::json!([m["key"], m["quarantined"]]))
        .collect();
    let x = json(w, &["conversations", conversation, "--facts"]);
    let facts: Vec<Value> = x["facts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| serde_json::json!([f["key"], f["trust"]]))
        .collect();
    (
        Value::from(messages),
        serde_json::json!({"facts": facts, "summary": x["summary"]}),
    )
}

fn found(w: &World, query: &str) -> String {
    let (ok, out, err) = w.memoria(&["--json", "search", query], None);
    assert!(ok, "search: {err}");
    out
}

const NOTE: &str = "---\nid: grok-pier\nsummary: The quokkagroknote harbour office moves\norigin:\n  via: capture\n  host: grok\n  model: grok-3\n  conversation: g1\ncreated: 2026-11-02T10:05:00Z\n---\nThe quokkagroknote harbour office moves to the north pier.\n";

#[test]
fn a_providers_memory_is_hidden_from_every_door_and_released_exactly_as_it_was() {
    let w = World::new();
    let control = w.write_user_file(
        "control.md",
        "---\n{\"id\":\"control\",\"summary\":\"The quokkapublic deploy checklist\"}\n---\nRun the quokkapublic checklist.\n",
    );
    capture(
        &w,
        "grok",
        "g1",
        &[
            (
                "user",
                "Ana",
                "",
                "I live in Lisbon. The quokkauser harbour plan is mine.",
            ),
            (
                "assistant",
                "Grok",
                "grok-3",
                "My favourite book is quokkagrokbook. The harbour office moves to the north pier.",
            ),
            (
                "user",
                "Ana",
                "",
                "The north pier quokkauser move worries me, the harbour office is small.",
            ),
            (
                "assistant",
                "Grok",
                "grok-3",
                "The north pier office has room for the quokkagrokpier harbour team.",
            ),
        ],
    );
    capture(
        &w,
        "claude",
        "c1",
        &[
            ("user", "Ana", "", "I moved to Porto last week."),
            (
                "assistant",
                "Claude",
                "opus",
                "My favourite city is quokkaclaude Porto.",
            ),
        ],
    );
    let note = w.project.join("MEMORY").join("grok-pier.md");
    std::fs::write(&note, NOTE).unwrap();
    let before = (labels(&w, "g1"), labels(&w, "c1"));
    // Before: the provider's memory is found like any other.
    for m in ["quokkagrokbook", "quokkagrokpier", "quokkagroknote"] {
        assert!(found(&w, m).contains(m), "{m} is found before");
    }

    // What the provenance says the quarantine takes: grok's two replies, each fact and summary
    // with one of them among its sources, its note, one conversation.
    let grok: Vec<String> = ["1", "3"]
        .iter()
        .map(|id| message_ref(&w, "g1", id))
        .collect();
    let x = json(&w, &["conversations", "g1", "--facts"]);
    let from_grok = |sources: &Value| {
        sources
            .as_array()
            .is_some_and(|s| s.iter().any(|k| grok.iter().any(|g| g == k)))
    };
    let facts = x["facts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| from_grok(&f["sources"]))
        .count();
    let summaries = usize::from(from_grok(&x["summary"]["sources"]));
    assert!(facts >= 1, "grok's own fact: {x}");
    let expected = serde_json::json!({"messages": 2, "facts": facts, "summaries": summaries,
        "notes": 1, "conversations": 1});
    let preview = json(&w, &["quarantine", "preview", "--host", "grok"]);
    assert_eq!(preview, expected);
    // A model names the same memory; a model of the other host's names nothing of it.
    assert_eq!(
        json(
            &w,
            &[
                "quarantine",
                "preview",
                "--model",
                "grok-3",
                "--since",
                "2026-11-02",
                "--until",
                "2026-11-02"
            ]
        ),
        expected
    );
    assert_eq!(
        json(
            &w,
            &[
                "quarantine",
                "preview",
                "--host",
                "grok",
                "--since",
                "2026-11-03"
            ]
        )["messages"],
        0
    );
    assert_eq!(
        before,
        (labels(&w, "g1"), labels(&w, "c1")),
        "a preview changes nothing"
    );

    let applied = json(&w, &["quarantine", "apply", "--host", "grok"]);
    let id = applied["id"].as_str().expect("a quarantine").to_owned();
    assert_eq!(applied["counts"], expected);
    assert!(!note.exists(), "the captured note moved aside");
    // The person still sees the conversation, each hidden reply under the quarantine's mark.
    let (ok, shown, err) = w.memoria(&["conversations", "g1"], None);
    assert!(ok, "{err}");
    let marked: Vec<&str> = shown.lines().filter(|l| l.contains(&id)).collect();
    assert_eq!(marked.len(), 2, "{shown}");
    assert!(
        marked
            .iter()
            .all(|l| l.contains("Grok:") && l.contains("provider's memory is hidden")),
        "{shown}"
    );

    // Every door: the other host's message (and a note) reach each; the provider's messages,
    // what was derived from them and its note reach none.
    let fact_keys: Vec<String> = x["facts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| from_grok(&f["sources"]))
        .map(|f| f["key"].as_str().unwrap().to_owned())
        .collect();
    let mut planted = vec![
        Planted {
            marker: "quokkapublic".into(),
            reference: "vt:user/control".into(),
            file: control,
        },
        Planted {
            marker: "quokkaclaude".into(),
            reference: message_ref(&w, "c1", "1"),
            file: note.clone(),
        },
        Planted {
            marker: "quokkagrokbook".into(),
            reference: grok[0].clone(),
            file: note.clone(),
        },
        Planted {
            marker: "quokkagrokpier".into(),
            reference: grok[1].clone(),
            file: note.clone(),
        },
        Planted {
            marker: "quokkagroknote".into(),
            reference: "vt:project/grok-pier".into(),
            file: note.clone(),
        },
    ];
    for key in &fact_keys {
        planted.push(Planted {
            marker: "quokkagrokbook".into(),
            reference: key.clone(),
            file: note.clone(),
        });
    }
    let mut problems = Vec::new();
    for column in COLUMNS {
        let reached = (column.reach)(&w, &planted);
        let messages_leave = column.name != "memoria export";
        if !reached[0].contains("quokkapublic") {
            problems.push(format!("the note control did not reach {}", column.name));
        }
        if messages_leave && !reached[1].contains("quokkaclaude") {
            problems.push(format!(
                "the other host's message did not reach {}:\n{}",
                column.name, reached[1]
            ));
        }
        for text in &reached {
            for m in ["quokkagrokbook", "quokkagrokpier", "quokkagroknote"] {
                if text.contains(m) {
                    problems.push(format!("{m} reached {}:\n{text}", column.name));
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
    // The person's own words in that conversation are never the provider's.
    assert!(found(&w, "quokkauser").contains("quokkauser"));
    let (ok, block, err) = w.memoria(&["recall", "how does the quokkauser plan work?"], None);
    assert!(ok && block.contains("quokkauser"), "{err}{block}");
    // The same selection again finds nothing left.
    assert_eq!(
        json(&w, &["quarantine", "apply", "--host", "grok"])["id"],
        Value::Null
    );

    let released = json(&w, &["quarantine", "release", &id]);
    assert_eq!(released["messages"], 2, "{released}");
    assert_eq!(released["notes"], 1, "{released}");
    assert_eq!(
        std::fs::read_to_string(&note).unwrap(),
        NOTE,
        "back at its path"
    );
    assert_eq!(
        before,
        (labels(&w, "g1"), labels(&w, "c1")),
        "every trust exactly as before"
    );
    for m in ["quokkagrokbook", "quokkagrokpier", "quokkagroknote"] {
        assert!(found(&w, m).contains(m), "{m} is found again");
    }
    let (ok, _, err) = w.memoria(&["quarantine", "release", &id], None);
    assert!(!ok && err.contains("released already"), "{err}");

    let history = json(&w, &["quarantine", "list"]);
    assert_eq!(history.as_array().unwrap().len(), 1, "{history}");
    assert_eq!(history[0]["id"], id.as_str());
    assert_eq!(
        history[0]["selection"]["hosts"],
        serde_json::json!(["grok"])
    );
    assert!(history[0]["releasedAt"].is_i64(), "{history}");
    let audit = json(&w, &["quarantine", "audit"]);
    let actions: Vec<&str> = audit
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["action"].as_str().unwrap())
        .collect();
    assert_eq!(
        actions,
        ["memory.quarantine.release", "memory.quarantine.apply"],
        "{audit}"
    );
    assert!(
        audit
            .as_array()
            .unwrap()
            .iter()
            .all(|a| a["detail"]["id"] == id.as_str())
    );
}
