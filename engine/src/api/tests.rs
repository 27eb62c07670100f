//! The DTOs' JSON shapes: camelCase, stable, and read back as written.

use serde_json::json;

use super::NoteRef;
use super::backups::BackupEntry;
use super::conflicts::{KeepChoice, ResolveRequest};
use super::notes::{AddNote, EditNote, ListQuery, NoteDetail, NoteRow};
use super::projects::ProjectRow;
use super::search::{ScoreParts, SearchHit, SearchMode, SearchRequest};
use super::sync::Switches;

fn round_trip<T>(value: &T, expected: serde_json::Value)
where
    T: serde::Serialize + serde::de::DeserializeOwned + PartialEq + std::fmt::Debug,
{
    let v = serde_json::to_value(value).unwrap();
    assert_eq!(v, expected);
    let back: T = serde_json::from_value(v).unwrap();
    assert_eq!(&back, value);
}

#[test]
fn note_dtos_are_camel_case_and_round_trip() {
    round_trip(
        &NoteRow {
            scope: "user".into(),
            id: "tea".into(),
            path: "/h/memory/user/tea.md".into(),
            rel_path: "tea.md".into(),
            summary: "Green tea".into(),
            note_type: Some("user".into()),
            tags: vec!["drink".into()],
            created_at: Some(1),
            updated_at: Some(2),
            hash: Some("h".into()),
            trust: None,
            source: None,
            importance: Some(0.5),
            error: None,
            status: None,
        },
        json!({"scope": "user", "id": "tea", "path": "/h/memory/user/tea.md", "relPath": "tea.md",
            "summary": "Green tea", "type": "user", "tags": ["drink"], "createdAt": 1,
            "updatedAt": 2, "hash": "h", "trust": null, "source": null, "importance": 0.5,
            "error": null}),
    );
    round_trip(
        &NoteDetail {
            scope: "user".into(),
            id: "tea".into(),
            path: "p".into(),
            summary: "s".into(),
            note_type: None,
            tags: vec![],
            created_at: None,
            updated_at: Some(3),
            hash: None,
            trust: Some("owner".into()),
            importance: None,
            error: None,
            status: None,
            held_back: None,
            links: vec!["milk".into()],
            backlinks: vec![NoteRef {
                scope: "user".into(),
                id: "cake".into(),
            }],
            body: "b\n".into(),
        },
        json!({"scope": "user", "id": "tea", "path": "p", "summary": "s", "type": null,
            "tags": [], "createdAt": null, "updatedAt": 3, "hash": null, "trust": "owner",
            "importance": null, "error": null,
            "links": ["milk"], "backlinks": [{"scope": "user", "id": "cake"}], "body": "b\n"}),
    );
}

#[test]
fn requests_read_with_defaults_for_what_is_left_out() {
    let add: AddNote = serde_json::from_value(json!({"summary": "s", "type": "user"})).unwrap();
    assert_eq!(add.note_type.as_deref(), Some("user"));
    assert!(add.tags.is_empty() && add.scope.is_none());
    let edit: EditNote = serde_json::from_value(json!({"tags": []})).unwrap();
    assert_eq!(edit.tags, Some(vec![]));
    assert_eq!(edit.summary, None);
    let q: ListQuery = serde_json::from_value(json!({"tag": "x"})).unwrap();
    assert_eq!(q.tag.as_deref(), Some("x"));
    let s: SearchRequest = serde_json::from_value(json!({"query": "tea"})).unwrap();
    assert_eq!(
        (s.limit, s.mode, s.explain),
        (10, SearchMode::Hybrid, false)
    );
    let r: ResolveRequest = serde_json::from_value(json!({"id": "n", "keep": "cloud"})).unwrap();
    assert_eq!(r.keep, Some(KeepChoice::Cloud));
    assert_eq!("both".parse::<KeepChoice>().unwrap(), KeepChoice::Both);
    assert!("mine".parse::<KeepChoice>().is_err());
}

#[test]
fn search_hits_carry_score_parts_only_when_asked() {
    let mut hit = SearchHit {
        scope: "user".into(),
        id: "tea".into(),
        summary: "s".into(),
        note_type: None,
        score: 0.5,
        relevance: Some(0.9),
        archived: false,
        explain: None,
        snippet: None,
    };
    round_trip(
        &hit,
        json!({"scope": "user", "id": "tea", "summary": "s", "type": null, "score": 0.5, "relevance": 0.9}),
    );
    hit.explain = Some(ScoreParts {
        bm25_rank: Some(1),
        bm25_score: Some(2.0),
        vector_rank: None,
        cosine: None,
        other_language: false,
        fused: 0.25,
        relevance: None,
        coverage: None,
        vector_weight: Some(0.5),
        decay: 1.0,
        trust: 1.0,
        importance: 1.0,
        access: 1.0,
        standing: 1.0,
    });
    let v = serde_json::to_value(&hit).unwrap();
    assert_eq!(
        v["explain"],
        json!({"bm25Rank": 1, "bm25Score": 2.0, "vectorRank": null, "cosine": null,
            "otherLanguage": false, "fused": 0.25, "relevance": null, "coverage": null, "vectorWeight": 0.5, "decay": 1.0, "trust": 1.0,
            "importance": 1.0, "access": 1.0, "standing": 1.0})
    );
}

#[test]
fn project_backup_and_switch_rows_are_camel_case() {
    round_trip(
        &ProjectRow {
            id: "p1".into(),
            root: "/code/app".into(),
            scope: "project:p1".into(),
            present: false,
        },
        json!({"id": "p1", "root": "/code/app", "scope": "project:p1", "present": false}),
    );
    round_trip(
        &BackupEntry {
            backup_id: "b1".into(),
            scope: "user".into(),
            note_id: "tea".into(),
            reason: "forget".into(),
            created_at: 7,
            summary: Some("Green tea".into()),
        },
        json!({"backupId": "b1", "scope": "user", "noteId": "tea", "reason": "forget",
            "createdAt": 7, "summary": "Green tea"}),
    );
    round_trip(
        &Switches {
            on: true,
            include_secrets: false,
        },
        json!({"on": true, "includeSecrets": false}),
    );
}

/// A fresh home with the hash embedder (the model folder does not exist).
pub(super) fn here(tmp: &tempfile::TempDir) -> super::Location {
    super::Location {
        home: Some(tmp.path().join("home")),
        model_dir: Some(tmp.path().join("no-model")),
        ..Default::default()
    }
}

#[test]
fn notes_go_through_the_api_from_add_to_forget() {
    use super::notes::{self, ForgetRequest, Forgotten};
    let tmp = tempfile::tempdir().unwrap();
    let loc = here(&tmp);
    let mut engine = loc.open().unwrap();
    let add = AddNote {
        summary: "Green tea".into(),
        body: "Brew at 80 degrees. See [[milk]].".into(),
        note_type: Some("user".into()),
        tags: vec![" drink ".into(), "".into()],
        id: Some("tea".into()),
        ..Default::default()
    };
    let written = notes::add(&mut engine, add).unwrap();
    assert_eq!(
        (written.scope.as_str(), written.id.as_str()),
        ("user", "tea")
    );
    let rows = notes::list(&engine, &ListQuery::default()).unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(
        rows[0].tags,
        vec!["drink".to_owned()],
        "tags are trimmed, empty ones dropped"
    );
    let shown = notes::show(&engine, "tea", Some("user")).unwrap();
    assert_eq!(shown.links, vec!["milk".to_owned()]);
    assert!(shown.body.starts_with("Brew at 80"));
    let nothing = notes::edit(&mut engine, "tea", None, EditNote::default());
    assert!(
        matches!(nothing, Err(crate::Error::Invalid(_))),
        "{nothing:?}"
    );
    let typo = AddNote {
        summary: "x".into(),
        note_type: Some("idea".into()),
        ..Default::default()
    };
    assert!(notes::add(&mut engine, typo).is_err());
    let unconfirmed = ForgetRequest {
        id: "tea".into(),
        ..Default::default()
    };
    assert!(notes::forget(&mut engine, &unconfirmed).is_err());
    assert_eq!(
        notes::list(&engine, &ListQuery::default()).unwrap().len(),
        1
    );
    let confirmed = ForgetRequest {
        confirm: true,
        ..unconfirmed
    };
    let Forgotten::Backup(b) = notes::forget(&mut engine, &confirmed).unwrap() else {
        panic!("a forget without purge keeps a backup");
    };
    let backups = super::backups::list(&engine, 10).unwrap();
    assert_eq!(backups[0].backup_id, b.backup_id);
    assert_eq!(backups[0].reason, "forget");
}

#[test]
fn a_credential_is_refused_by_the_api_like_every_write() {
    let tmp = tempfile::tempdir().unwrap();
    let mut engine = here(&tmp).open().unwrap();
    let add = AddNote {
        summary: "token".into(),
        body: "ghp_abcdefghijklmnopqrstuvwxyz0123456789".into(),
        ..Default::default()
    };
    let refused = super::notes::add(&mut engine, add);
    assert!(
        matches!(refused, Err(crate::Error::Secret { .. })),
        "{refused:?}"
    );
}

#[test]
fn sync_status_card_and_doctor_of_a_fresh_home() {
    let tmp = tempfile::tempdir().unwrap();
    let loc = here(&tmp);
    let mut engine = loc.open().unwrap();
    let status = super::sync::status(&engine).unwrap();
    assert!(!status.on && status.server.is_none());
    assert_eq!(status.scopes.len(), 1, "the user scope: no project here");
    let user = &status.scopes[0];
    assert_eq!(
        (user.scope.as_str(), user.on, user.conflicts),
        ("user", false, 0)
    );
    assert_eq!(status.last_synced_ms, None, "never synced");
    let switches = super::sync::turn_on(&engine, Some(true)).unwrap();
    assert!(switches.on && switches.include_secrets);
    assert!(super::sync::status(&engine).unwrap().on);
    let now = super::sync::now(&mut engine);
    assert!(now.is_err(), "not signed in: nothing to sync with");
    let card = super::card::card(&engine).unwrap();
    assert!(!card.semantic && card.embedder == "hash", "{card:?}");
    assert!(card.switches.sync_on && !card.switches.signed_in);
    assert!(card.switches.capture, "capture is on unless turned off");
    assert_eq!((card.conversations, card.messages), (0, 0));
    drop(engine);
    let report =
        super::doctor::doctor(&loc, super::doctor::DoctorRequest { rebuild: true }).unwrap();
    assert!(report.ok && !report.semantic_model, "{report:?}");
    assert!(super::projects::list(&loc).unwrap().is_empty());
}

#[test]
fn a_front_ends_file_is_written_whole_and_replaced_whole() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("desktop.json");
    super::write_file_atomically(&path, b"{\"a\": 1}").unwrap();
    super::write_file_atomically(&path, b"{}").unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), b"{}");
    let names: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().collect();
    assert_eq!(names.len(), 1, "no temporary file is left behind");
    let dir = tmp.path().join("dir");
    std::fs::create_dir(&dir).unwrap();
    assert!(
        super::write_file_atomically(&dir, b"x").is_err(),
        "a folder is not replaced"
    );
}

#[test]
fn a_scope_is_named_by_its_kind_or_by_a_visible_scopes_key() {
    use super::notes;
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("app");
    crate::project::Project::init(&project, Some("rust")).unwrap();
    let loc = super::Location {
        project: Some(project.clone()),
        ..here(&tmp)
    };
    let mut engine = loc.open().unwrap();
    let scopes = notes::scopes(&engine).unwrap();
    let keys: Vec<_> = scopes.iter().map(|s| s.key.clone()).collect();
    let project_key = keys[0].clone();
    assert!(project_key.starts_with("project:"), "{keys:?}");
    assert_eq!(keys[1..], ["domain:rust".to_owned(), "user".to_owned()]);
    assert_eq!(
        scopes[0].root.as_deref(),
        Some(super::path_text(&engine.project().unwrap().root).as_str())
    );
    assert_eq!(
        (scopes[2].kind.as_str(), scopes[2].root.as_deref()),
        ("user", None)
    );
    let add = |scope: &str| AddNote {
        summary: format!("In {scope}"),
        scope: Some(scope.to_owned()),
        ..Default::default()
    };
    let by_key = notes::add(&mut engine, add(&project_key)).unwrap();
    assert_eq!(by_key.scope, project_key);
    let by_kind = notes::add(&mut engine, add("domain")).unwrap();
    assert_eq!(by_kind.scope, "domain:rust");
    let counts: Vec<_> = notes::scopes(&engine)
        .unwrap()
        .iter()
        .map(|s| s.notes)
        .collect();
    assert_eq!(counts, [1, 1, 0]);
    let row = notes::row(&engine, &by_key.id, Some(&project_key)).unwrap();
    assert_eq!(row.summary, format!("In {project_key}"));
    assert!(matches!(
        notes::row(&engine, &by_key.id, Some("user")),
        Err(crate::Error::NotFound(_))
    ));
    for hidden in ["project:other", "domain:go"] {
        let e = notes::list(
            &engine,
            &ListQuery {
                scope: Some(hidden.into()),
                ..Default::default()
            },
        );
        assert!(
            matches!(e, Err(crate::Error::Invalid(_))),
            "{hidden}: {e:?}"
        );
    }
    assert!(notes::add(&mut engine, add("nowhere")).is_err());
}

#[test]
fn an_edit_sets_importance_and_a_note_shows_it() {
    use super::notes;
    let tmp = tempfile::tempdir().unwrap();
    let mut engine = here(&tmp).open().unwrap();
    let w = notes::add(
        &mut engine,
        AddNote {
            summary: "Tea".into(),
            ..Default::default()
        },
    )
    .unwrap();
    let edit = EditNote {
        importance: Some(0.9),
        ..Default::default()
    };
    notes::edit(&mut engine, &w.id, None, edit).unwrap();
    let shown = notes::show(&engine, &w.id, None).unwrap();
    assert_eq!(shown.importance, Some(0.9));
    assert_eq!(
        shown.trust, None,
        "a note written here carries no trust label"
    );
}

#[test]
fn search_hits_carry_a_snippet_of_the_body_when_asked() {
    use super::search::search;
    let tmp = tempfile::tempdir().unwrap();
    let mut engine = here(&tmp).open().unwrap();
    let body = format!(
        "{} Never on Fridays: the on-call week starts on Monday.",
        "word ".repeat(200)
    );
    super::notes::add(
        &mut engine,
        AddNote {
            summary: "Deploys go out on Tuesdays".into(),
            body,
            ..Default::default()
        },
    )
    .unwrap();
    let req = SearchRequest {
        query: "fridays deploy".into(),
        ..Default::default()
    };
    let plain = search(&engine, &req).unwrap();
    assert_eq!(plain[0].snippet, None, "only when asked");
    let hits = search(
        &engine,
        &SearchRequest {
            snippets: true,
            ..req
        },
    )
    .unwrap();
    let snippet = hits[0].snippet.as_deref().unwrap();
    assert!(
        snippet.starts_with('…') && snippet.contains("Fridays"),
        "{snippet}"
    );
    assert!(!snippet.contains('\n'));
}

#[test]
fn a_backup_is_listed_with_its_summary_and_previewed_against_the_note_today() {
    use super::backups;
    use super::notes::{self, ForgetRequest};
    let tmp = tempfile::tempdir().unwrap();
    let mut engine = here(&tmp).open().unwrap();
    let w = notes::add(
        &mut engine,
        AddNote {
            summary: "Keep me".into(),
            body: "body".into(),
            ..Default::default()
        },
    )
    .unwrap();
    let forget = ForgetRequest {
        id: w.id.clone(),
        confirm: true,
        ..Default::default()
    };
    notes::forget(&mut engine, &forget).unwrap();
    let rows = backups::list(&engine, 50).unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].summary.as_deref(), Some("Keep me"));
    let p = backups::preview(&engine, &rows[0].backup_id).unwrap();
    assert_eq!(p.backup, rows[0]);
    assert!(p.backup_text.contains("Keep me"));
    assert_eq!(p.current_text, None, "the note is gone");
    backups::restore(&mut engine, &rows[0].backup_id).unwrap();
    let p = backups::preview(&engine, &rows[0].backup_id).unwrap();
    assert_eq!(p.current_text.as_deref(), Some(p.backup_text.as_str()));
    assert!(matches!(
        backups::preview(&engine, "nope"),
        Err(crate::Error::BackupNotFound(_))
    ));
}

#[test]
fn the_sync_server_is_chosen_without_signing_in_and_a_blank_one_is_refused() {
    use super::sync;
    let tmp = tempfile::tempdir().unwrap();
    let engine = here(&tmp).open().unwrap();
    assert_eq!(sync::server(&engine).unwrap(), None);
    let set = sync::set_server(&engine, Some(" https://sync.example.com/ ")).unwrap();
    assert_eq!(set.as_deref(), Some("https://sync.example.com"));
    assert_eq!(sync::server(&engine).unwrap(), set);
    assert_eq!(sync::set_server(&engine, Some("  ")).unwrap(), None);
    assert_eq!(sync::server(&engine).unwrap(), None);
    // An address without a scheme or a host is refused, saying how to write it; nothing changes.
    let e = sync::set_server(&engine, Some("sync.example.com:8787")).unwrap_err();
    assert!(
        e.to_string()
            .contains("give it as http://sync.example.com:8787"),
        "{e}"
    );
    assert!(sync::set_server(&engine, Some("https://")).is_err());
    assert_eq!(sync::server(&engine).unwrap(), None);
    let blank = sync::LoginRequest {
        server: " ".into(),
        token: Some("t".into()),
    };
    let e = sync::login(&engine, &blank).unwrap_err();
    assert_eq!(e.code(), crate::ErrorCode::InvalidInput, "{e:?}");
}

#[test]
fn a_front_end_reads_the_engines_folders_and_a_scope_choice_through_the_api() {
    use crate::vault::ScopeChoice;
    let tmp = tempfile::tempdir().unwrap();
    let engine = here(&tmp).open().unwrap();
    let f = super::folders(&engine);
    assert_eq!(f.home, tmp.path().join("home"));
    assert_eq!(f.model_dir, Some(tmp.path().join("no-model")));
    assert_eq!(super::scope_choice(&engine, None).unwrap(), None);
    assert_eq!(
        super::scope_choice(&engine, Some("user")).unwrap(),
        Some(ScopeChoice::User)
    );
    let e = super::scope_choice(&engine, Some("project:elsewhere")).unwrap_err();
    assert_eq!(e.code(), crate::ErrorCode::InvalidInput, "{e:?}");
    assert!(super::scope_choice(&engine, Some("nonsense")).is_err());
}

#[test]
fn the_model_draft_is_offered_only_when_a_chat_model_is_configured() {
    use super::hygiene;
    let tmp = tempfile::tempdir().unwrap();
    let loc = here(&tmp);
    let engine = loc.open().unwrap();
    assert!(!hygiene::model_configured(&engine).unwrap());
    super::config::set(&loc, "model.url", Some("http://127.0.0.1:9")).unwrap();
    assert!(hygiene::model_configured(&engine).unwrap());
}

#[test]
fn capture_is_switched_through_the_api_and_the_card_counts_the_log() {
    let tmp = tempfile::tempdir().unwrap();
    let engine = here(&tmp).open().unwrap();
    let on = super::config::capture(&engine).unwrap();
    assert!(on.on);
    assert_eq!(on.source, super::config::Source::Default);
    super::config::require_capture(&engine).unwrap();
    let req = super::conversations::CaptureRequest {
        conversation: Some("trip".into()),
        ..Default::default()
    };
    super::conversations::capture_text(
        &engine,
        "{\"text\":\"Book the train to Porto\"}\n{\"role\":\"assistant\",\"text\":\"Done.\"}\n",
        &req,
    )
    .unwrap();

    let off = super::config::set_capture(&engine, false).unwrap();
    assert_eq!((off.on, off.source), (false, super::config::Source::File));
    let refused = super::config::require_capture(&engine).unwrap_err();
    assert_eq!(refused.code(), crate::ErrorCode::CaptureOff);
    let card = super::card::card(&engine).unwrap();
    assert!(!card.switches.capture);
    assert_eq!((card.conversations, card.messages), (1, 2));
    assert!(card.log_bytes > 0, "the raw log's file is on disk");
    assert_eq!(
        card.log_policy,
        crate::log::LogPolicy::default(),
        "no limit"
    );
    // A capture asked for by name still runs while automatic capture is off.
    super::conversations::capture_text(&engine, "{\"id\":\"m3\",\"text\":\"And a hotel\"}\n", &req)
        .unwrap();
    assert_eq!(super::card::card(&engine).unwrap().messages, 3);
    assert!(super::config::set_capture(&engine, true).unwrap().on);
}

#[test]
fn a_projects_model_capture_queue_holds_its_own_turns_and_the_users_not_another_projects() {
    use super::conversations::{
        CaptureRequest, capture_log, capture_text, model_captures_waiting, run_model_captures,
    };
    let tmp = tempfile::tempdir().unwrap();
    let (alpha, beta) = (tmp.path().join("alpha"), tmp.path().join("beta"));
    for dir in [&alpha, &beta] {
        crate::project::Project::init(dir, None).unwrap();
    }
    let open = |dir: &std::path::Path| {
        super::Location {
            project: Some(dir.to_path_buf()),
            ..here(&tmp)
        }
        .open()
        .unwrap()
    };
    let (mut a, b) = (open(&alpha), open(&beta));
    // A model that never answers: a queued turn stays pending until a process asks it.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    crate::config::set(a.home(), "model.url", Some(&dead)).unwrap();
    let turn = |conversation: &str| {
        let req = CaptureRequest {
            conversation: Some(conversation.into()),
            ..Default::default()
        };
        (
            "{\"text\":\"Remember that the release ships with the new installer.\"}\n\
             {\"role\":\"assistant\",\"text\":\"Noted.\"}\n",
            req,
        )
    };
    let (text, req) = turn("beta-plan");
    capture_text(&b, text, &req).unwrap();

    let root = a.home().root().to_path_buf();
    let waiting = |dir: Option<&std::path::Path>| model_captures_waiting(&root, dir).unwrap();
    assert!(waiting(Some(&beta)));
    assert!(
        !waiting(Some(&alpha)),
        "another project's turn is not this project's queue"
    );
    assert!(!waiting(None), "nor the user's");
    assert_eq!(capture_log(&b, 10).unwrap().len(), 1);
    assert!(capture_log(&a, 10).unwrap().is_empty());

    // Its own turn is: and what it counts is what a run here takes.
    let (text, req) = turn("alpha-plan");
    capture_text(&a, text, &req).unwrap();
    assert!(waiting(Some(&alpha)));
    let settled = run_model_captures(&mut a).unwrap();
    assert_eq!(
        settled
            .iter()
            .map(|r| r.conversation.as_str())
            .collect::<Vec<_>>(),
        ["alpha-plan"]
    );
    assert!(!waiting(Some(&alpha)));
    assert!(waiting(Some(&beta)), "beta's turn still waits for beta");
}
