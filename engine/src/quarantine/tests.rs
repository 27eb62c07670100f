use super::*;
use crate::api::conversations::{CaptureRequest, capture_text};
use crate::vault::OpenOptions;

/// Two hosts' conversations: grok's assistant states facts of its own; the person's words are
/// in both.
const SAID: &str = r#"{"conversation":"g1","id":"1","role":"user","speaker":"Ana","host":"grok","time":"2024-03-01T09:00:00Z","text":"I live in Lisbon and I work at the harbour office."}
{"conversation":"g1","id":"2","role":"assistant","speaker":"Grok","host":"grok","model":"grok-3","time":"2024-03-01T09:01:00Z","text":"My favourite book is Dune. The harbour office moves to the north pier in May."}
{"conversation":"g1","id":"3","role":"user","speaker":"Ana","host":"grok","time":"2024-03-01T09:02:00Z","text":"The north pier move worries me, the harbour office is small."}
{"conversation":"g1","id":"4","role":"assistant","speaker":"Grok","host":"grok","model":"grok-3","time":"2024-03-01T09:03:00Z","text":"The north pier office has room for the harbour team."}
{"conversation":"c1","id":"1","role":"user","speaker":"Ana","host":"claude","time":"2024-04-01T09:00:00Z","text":"I moved to Porto last week."}
{"conversation":"c1","id":"2","role":"assistant","speaker":"Claude","host":"claude","model":"opus","time":"2024-04-01T09:01:00Z","text":"My favourite city is Porto."}
"#;

const CAPTURED: &str = "---\nid: grok-pier\nsummary: The harbour office moves to the north pier\norigin:\n  via: capture\n  host: grok\n  model: grok-3\n  conversation: g1\ncreated: 2024-03-01T09:05:00Z\n---\nThe harbour office moves to the north pier in May.\n";

fn engine(dir: &Path) -> Engine {
    Engine::open(OpenOptions::without_model(dir)).unwrap()
}

fn grok() -> Selection {
    Selection {
        hosts: vec!["grok".into()],
        ..Selection::default()
    }
}

/// Keys and their labels.
type Labels = Vec<(String, Option<String>)>;

/// Every label of the log: each message's mark and each derived item's trust.
fn labels(e: &Engine) -> (Labels, Labels) {
    let log = e.log().unwrap();
    let mut m: Vec<_> = log
        .message_marks()
        .unwrap()
        .into_iter()
        .map(|m| (m.key, m.quarantined))
        .collect();
    m.sort();
    let mut d: Vec<_> = log
        .derived_links()
        .unwrap()
        .into_iter()
        .map(|d| (d.key, d.trust))
        .collect();
    d.sort();
    (m, d)
}

#[test]
fn apply_hides_the_providers_memory_and_release_restores_it_exactly() {
    let tmp = tempfile::tempdir().unwrap();
    let mut e = engine(tmp.path());
    capture_text(&e, SAID, &CaptureRequest::default()).unwrap();
    let notes = e.scope_dir(&Scope::User).unwrap();
    std::fs::write(notes.join("grok-pier.md"), CAPTURED).unwrap();
    e.rescan(false).unwrap();
    let before = labels(&e);

    // What grok's assistant said, what was derived from it, its captured note.
    let grok_keys: HashSet<String> = e
        .log()
        .unwrap()
        .message_marks()
        .unwrap()
        .into_iter()
        .filter(|m| m.conversation == "g1" && m.role == Role::Assistant)
        .map(|m| m.key)
        .collect();
    assert_eq!(grok_keys.len(), 2);
    let from_grok: Vec<_> = e
        .log()
        .unwrap()
        .derived_links()
        .unwrap()
        .into_iter()
        .filter(|d| d.sources.iter().any(|s| grok_keys.contains(s)))
        .collect();
    let facts = from_grok
        .iter()
        .filter(|d| d.kind == DerivedKind::Fact)
        .count();
    assert!(facts >= 1, "the assistant's own fact: {from_grok:?}");
    let counts = preview(&e, &grok()).unwrap();
    assert_eq!(
        counts,
        Counts {
            messages: 2,
            facts,
            summaries: from_grok.len() - facts,
            notes: 1,
            conversations: 1,
        }
    );
    // A preview changes nothing.
    assert_eq!(labels(&e), before);

    let applied = apply(&mut e, &grok()).unwrap();
    let id = applied.id.clone().expect("something quarantined");
    assert_eq!(applied.counts, counts);
    assert!(!notes.join("grok-pier.md").exists(), "moved aside");
    assert!(e.index().find("user", "grok-pier").unwrap().is_empty());
    {
        let log = e.log().unwrap();
        for m in log.message_marks().unwrap() {
            let hidden = m.quarantined.as_deref() == Some(&format!("quarantine:{id}"));
            assert_eq!(hidden, grok_keys.contains(&m.key), "{m:?}");
        }
        for d in log.derived_links().unwrap() {
            let lowered = from_grok.iter().any(|g| g.key == d.key);
            assert_eq!(d.trust.as_deref() == Some("quarantined"), lowered, "{d:?}");
        }
    }
    // Nothing left: applying again records nothing.
    let again = apply(&mut e, &grok()).unwrap();
    assert_eq!(again.id, None);
    assert_eq!(again.counts, Counts::default());

    // A new note took the captured note's path meanwhile: it stays, the old one comes back
    // beside it.
    std::fs::write(
        notes.join("grok-pier.md"),
        "---\nid: grok-pier-new\nsummary: new\n---\nnew\n",
    )
    .unwrap();
    e.rescan(false).unwrap();
    let released = release(&mut e, &id).unwrap();
    assert_eq!((released.messages, released.derived), (2, from_grok.len()));
    assert_eq!(
        released.renamed,
        vec![("grok-pier.md".into(), "grok-pier-restored.md".into())]
    );
    assert_eq!(labels(&e), before, "every label exactly as before");
    assert_eq!(
        std::fs::read_to_string(notes.join("grok-pier-restored.md")).unwrap(),
        CAPTURED
    );
    assert_eq!(e.index().find("user", "grok-pier").unwrap().len(), 1);
    assert!(matches!(release(&mut e, &id), Err(Error::Invalid(_))));
    let unknown = release(&mut e, "q-unknown").unwrap_err();
    assert_eq!(unknown.code(), crate::ErrorCode::NotFound);
    assert_eq!(
        unknown.detail(),
        Some(serde_json::json!({"quarantine": "q-unknown"}))
    );

    let history = history(&e).unwrap();
    assert_eq!(history.len(), 1);
    assert_eq!(history[0].selection, grok());
    assert_eq!(history[0].release.as_ref(), Some(&released));
    let audit = memoria_store::audit::entries(tmp.path()).unwrap();
    let actions: Vec<&str> = audit.iter().map(|a| a.action.as_str()).collect();
    assert_eq!(
        actions,
        ["memory.quarantine.apply", "memory.quarantine.release"]
    );
    assert_eq!(audit[0].detail["id"], id.as_str());
}

#[test]
fn a_selection_names_a_provider_and_takes_only_what_matches_all_it_names() {
    assert!(matches!(
        Selection::default().check(),
        Err(Error::Invalid(_))
    ));
    let backwards = Selection {
        since: Some(10),
        until: Some(5),
        ..grok()
    };
    assert!(matches!(backwards.check(), Err(Error::Invalid(_))));
    let sel = Selection {
        hosts: vec!["grok".into(), "kimi".into()],
        models: vec!["grok-3".into()],
        since: Some(100),
        until: Some(200),
    };
    assert!(sel.takes(Some("Grok"), Some("grok-3"), Some(100)));
    assert!(sel.takes(Some("kimi"), Some("grok-3"), Some(200)));
    assert!(
        !sel.takes(Some("grok"), Some("other"), Some(150)),
        "both named"
    );
    assert!(!sel.takes(None, Some("grok-3"), Some(150)));
    assert!(!sel.takes(Some("grok"), Some("grok-3"), Some(201)));
    assert!(
        !sel.takes(Some("grok"), Some("grok-3"), None),
        "no time, a range"
    );
    assert!(grok().takes(Some("grok"), None, None));
}

#[test]
fn a_promoted_fact_a_model_phrased_is_its_models_and_no_hosts() {
    let tmp = tempfile::tempdir().unwrap();
    let mut e = engine(tmp.path());
    let notes = e.scope_dir(&Scope::User).unwrap();
    std::fs::write(
        notes.join("ana-lives-in-lisbon.md"),
        "---\nid: ana-lives-in-lisbon\nsummary: Ana lives in Lisbon\norigin:\n  via: promotion\n  model: grok-3\ncreated: 2024-03-02T09:00:00Z\n---\nAna lives in Lisbon.\n",
    )
    .unwrap();
    std::fs::write(
        notes.join("hand.md"),
        "---\nid: hand\nsummary: written by hand\norigin:\n  via: import\n  model: grok-3\n---\nmine\n",
    )
    .unwrap();
    e.rescan(false).unwrap();
    assert_eq!(
        preview(&e, &grok()).unwrap().notes,
        0,
        "a promotion names no host"
    );
    let by_model = Selection {
        models: vec!["grok-3".into()],
        ..Selection::default()
    };
    assert_eq!(preview(&e, &by_model).unwrap().notes, 1);
    let id = apply(&mut e, &by_model).unwrap().id.unwrap();
    assert!(!notes.join("ana-lives-in-lisbon.md").exists());
    assert!(notes.join("hand.md").exists(), "not written by a model");
    release(&mut e, &id).unwrap();
    assert!(notes.join("ana-lives-in-lisbon.md").exists());
}

#[test]
fn a_note_removed_by_hand_from_the_quarantine_is_reported_missing_and_the_rest_restored() {
    let tmp = tempfile::tempdir().unwrap();
    let mut e = engine(tmp.path());
    capture_text(&e, SAID, &CaptureRequest::default()).unwrap();
    let notes = e.scope_dir(&Scope::User).unwrap();
    std::fs::write(notes.join("grok-pier.md"), CAPTURED).unwrap();
    e.rescan(false).unwrap();
    let before = labels(&e);
    let id = apply(&mut e, &grok()).unwrap().id.unwrap();
    let q = &history(&e).unwrap()[0];
    std::fs::remove_file(tmp.path().join(&q.notes[0].kept_at)).unwrap();
    let released = release(&mut e, &id).unwrap();
    assert_eq!(released.missing, vec!["grok-pier.md".to_owned()]);
    assert_eq!(labels(&e), before);
}

#[test]
fn a_note_that_cannot_go_back_is_reported_kept_and_the_rest_released() {
    let tmp = tempfile::tempdir().unwrap();
    let mut e = engine(tmp.path());
    capture_text(&e, SAID, &CaptureRequest::default()).unwrap();
    let notes = e.scope_dir(&Scope::User).unwrap();
    std::fs::create_dir_all(notes.join("sub")).unwrap();
    std::fs::write(notes.join("sub").join("grok-pier.md"), CAPTURED).unwrap();
    e.rescan(false).unwrap();
    let before = labels(&e);
    let id = apply(&mut e, &grok()).unwrap().id.unwrap();
    // A file now stands where the note's folder was.
    std::fs::remove_dir(notes.join("sub")).unwrap();
    std::fs::write(notes.join("sub"), "not a folder").unwrap();
    let released = release(&mut e, &id).unwrap();
    assert_eq!(released.failed.len(), 1, "{released:?}");
    assert_eq!(released.failed[0].0, "sub/grok-pier.md");
    assert_eq!(labels(&e), before, "the labels are back all the same");
    let kept = &history(&e).unwrap()[0].notes[0].kept_at;
    assert_eq!(
        std::fs::read_to_string(tmp.path().join(kept)).unwrap(),
        CAPTURED,
        "its file stays in the quarantine folder"
    );
}

#[test]
fn overlapping_quarantines_release_separately_and_a_shared_item_stays_hidden_until_both_go() {
    let tmp = tempfile::tempdir().unwrap();
    let mut e = engine(tmp.path());
    capture_text(&e, SAID, &CaptureRequest::default()).unwrap();
    let before = labels(&e);
    // The first takes grok's first reply (its time), the second the rest of grok-3's.
    let first = Selection {
        until: Some(crate::backup::time_to_ms("2024-03-01T09:01:30Z").unwrap()),
        ..grok()
    };
    let by_model = Selection {
        models: vec!["grok-3".into()],
        ..Selection::default()
    };
    let a = apply(&mut e, &first).unwrap();
    let b = apply(&mut e, &by_model).unwrap();
    assert_eq!((a.counts.messages, b.counts.messages), (1, 1));
    let hidden = labels(&e);
    release(&mut e, a.id.as_deref().unwrap()).unwrap();
    // An item from both quarantines' messages stays hidden while the second holds.
    let (_, derived) = labels(&e);
    let log = e.log().unwrap();
    let second_key: String = log
        .message_marks()
        .unwrap()
        .into_iter()
        .find(|m| m.quarantined.is_some())
        .unwrap()
        .key;
    let shared: Vec<_> = log
        .derived_links()
        .unwrap()
        .into_iter()
        .filter(|d| d.sources.contains(&second_key))
        .collect();
    assert!(!shared.is_empty(), "the summary quotes both replies");
    for d in shared {
        {
            let t = derived.iter().find(|(k, _)| *k == d.key).unwrap();
            assert_eq!(t.1.as_deref(), Some("quarantined"), "{d:?}");
        }
    }
    drop(log);
    assert_ne!(labels(&e), hidden);
    release(&mut e, b.id.as_deref().unwrap()).unwrap();
    assert_eq!(labels(&e), before);
}
