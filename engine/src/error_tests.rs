//! Each engine code from a real failure: real files, a real index, real processes' locks.

use std::fs;
use std::path::{Path, PathBuf};

use crate::error::*;
use crate::vault::{Engine, Limits, NewNote, NoteEdit, OpenOptions, ScopeChoice};
use crate::{Project, Scope};
use serde_json::json;

struct World {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    home: PathBuf,
}

impl World {
    fn new() -> World {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        World {
            home: root.join("home"),
            root,
            _tmp: tmp,
        }
    }

    fn open(&self, project: Option<&Path>, limits: Limits) -> Result<Engine> {
        Engine::open(OpenOptions {
            project_dir: project.map(Path::to_path_buf),
            limits,
            ..OpenOptions::without_model(&self.home)
        })
    }

    fn engine(&self, project: Option<&Path>) -> Engine {
        self.open(project, Limits::default()).unwrap()
    }
}

fn note(summary: &str, body: &str) -> NewNote {
    NewNote {
        summary: summary.into(),
        body: body.into(),
        ..Default::default()
    }
}

/// The error's code, after checking that its body carries the same code and message and that
/// the message names no command.
fn code<T: std::fmt::Debug>(r: Result<T>) -> ErrorCode {
    let e = r.expect_err("the operation should fail");
    let body = e.body();
    assert_eq!(body.code, e.code());
    assert_eq!(body.message, e.to_string());
    assert!(!body.message.contains("memoria "), "{}", body.message);
    assert!(!body.message.contains(" --"), "{}", body.message);
    let json = serde_json::to_value(&body).unwrap();
    assert_eq!(json["code"], e.code().as_str());
    e.code()
}

#[test]
fn codes_serialize_as_their_names_and_every_code_is_documented() {
    let docs = fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/errors.md"))
        .expect("docs/errors.md");
    for c in ErrorCode::ALL {
        assert_eq!(serde_json::to_value(c).unwrap(), c.as_str());
        let back: ErrorCode = serde_json::from_value(c.as_str().into()).unwrap();
        assert_eq!(back, c);
        assert!(
            docs.contains(&format!("### `{c}`")),
            "docs/errors.md has no section for `{c}`"
        );
    }
}

#[test]
fn note_input_failures() {
    let w = World::new();
    let mut e = w.engine(None);
    assert_eq!(code(e.show("nope", None)), ErrorCode::NotFound);
    assert_eq!(code(e.show("../etc", None)), ErrorCode::InvalidId);
    assert_eq!(code(e.add(note("  ", ""))), ErrorCode::InvalidInput);
    e.add(NewNote {
        id: Some("pricing".into()),
        ..note("pricing", "")
    })
    .unwrap();
    let dup = e.add(NewNote {
        id: Some("pricing".into()),
        ..note("again", "")
    });
    assert_eq!(
        dup.as_ref().unwrap_err().detail(),
        Some(json!({ "id": "pricing" }))
    );
    assert_eq!(code(dup), ErrorCode::Exists);
    let secret = e.add(note("keys", "aws AKIAIOSFODNN7EXAMPLE"));
    let detail = secret.as_ref().unwrap_err().detail().unwrap();
    assert_eq!(detail["field"], "body");
    assert!(detail["rule"].is_string(), "{detail}");
    assert_eq!(code(secret), ErrorCode::CredentialRefused);
    let big = e.add(note("big", &"x".repeat(128 * 1024 + 1)));
    assert_eq!(
        big.as_ref().unwrap_err().detail().unwrap()["limit"],
        128 * 1024
    );
    assert_eq!(code(big), ErrorCode::TooLarge);
    let long = e.add(note(&"s".repeat(501), ""));
    assert_eq!(
        long.as_ref().unwrap_err().detail().unwrap()["field"],
        "summary"
    );
    assert_eq!(code(long), ErrorCode::TooLarge);
    assert_eq!(code(e.restore("nope")), ErrorCode::NotFound);
}

#[test]
fn a_full_scope_is_a_limit() {
    let w = World::new();
    let limits = Limits {
        notes_per_scope: 1,
        ..Limits::default()
    };
    let mut e = w.open(None, limits).unwrap();
    e.add(note("one", "")).unwrap();
    let full = e.add(note("two", ""));
    assert_eq!(
        full.as_ref().unwrap_err().detail(),
        Some(json!({ "scope": "user", "limit": 1 }))
    );
    assert_eq!(code(full), ErrorCode::LimitReached);
}

#[test]
fn a_broken_note_and_damaged_files() {
    let w = World::new();
    drop(w.engine(None));
    fs::write(
        w.home.join("memory/user/broken.md"),
        "---\n{\"id\": \"broken\", \"summary\": oops}\n---\nbody\n",
    )
    .unwrap();
    let mut e = w.engine(None);
    let edit = e.edit(
        "broken",
        None,
        NoteEdit {
            summary: Some("x".into()),
            ..Default::default()
        },
    );
    assert_eq!(code(edit), ErrorCode::BrokenNote);
    let dir = w.root.join("damaged");
    fs::create_dir_all(dir.join(".memoria")).unwrap();
    fs::write(Project::config_path(&dir), "{ not json").unwrap();
    let load = Project::load(&dir);
    assert_eq!(
        load.as_ref().unwrap_err().detail(),
        Some(json!({ "path": Project::config_path(&dir) }))
    );
    assert_eq!(code(load), ErrorCode::DamagedFile);
    fs::write(w.home.join("config.json"), "{ not json").unwrap();
    assert_eq!(
        code(w.open(None, Limits::default())),
        ErrorCode::DamagedFile
    );
}

#[test]
fn project_failures() {
    let w = World::new();
    let mut e = w.engine(None);
    let project_note = NewNote {
        scope: Some(ScopeChoice::Project),
        ..note("p", "")
    };
    assert_eq!(code(e.add(project_note)), ErrorCode::NoProject);
    let untyped = Project::init(&w.root.join("untyped"), None).unwrap().root;
    let mut e = w.engine(Some(&untyped));
    let domain_note = NewNote {
        scope: Some(ScopeChoice::Domain),
        ..note("d", "")
    };
    assert_eq!(code(e.add(domain_note)), ErrorCode::NoProjectType);
    let other = Scope::Project("someone-else".into());
    let hidden = e.list(Some(&other), None, None);
    assert_eq!(
        hidden.as_ref().unwrap_err().detail(),
        Some(json!({ "scope": "project:someone-else" }))
    );
    assert_eq!(code(hidden), ErrorCode::ScopeNotVisible);
    drop(e);

    let outside = w.root.join("outside");
    fs::create_dir_all(&outside).unwrap();
    let linked = Project::init(&w.root.join("linked"), None).unwrap().root;
    fs::remove_dir(linked.join("MEMORY")).unwrap();
    std::os::unix::fs::symlink(&outside, linked.join("MEMORY")).unwrap();
    assert_eq!(
        code(w.open(Some(&linked), Limits::default())),
        ErrorCode::LinkOutsideProject
    );

    let copy = w.root.join("copy");
    fs::create_dir_all(copy.join(".memoria")).unwrap();
    fs::copy(Project::config_path(&untyped), Project::config_path(&copy)).unwrap();
    let claimed = w.open(Some(&copy), Limits::default());
    assert_eq!(
        claimed.as_ref().unwrap_err().detail().unwrap()["path"],
        json!(copy)
    );
    assert_eq!(code(claimed), ErrorCode::ProjectClaimed);
}

#[test]
fn agent_refusals() {
    let w = World::new();
    let mut e = w.engine(None);
    let kept = e.add(note("kept", "a fact")).unwrap();
    assert_eq!(
        code(crate::agent::forget(&mut e, &kept.id, false)),
        ErrorCode::ConfirmationRequired
    );
    fs::write(
        w.home.join("memory/user/q.md"),
        "---\n{\"id\":\"q\",\"summary\":\"zebra q\",\"trust\":\"quarantined\"}\n---\nzebra\n",
    )
    .unwrap();
    let mut e = w.engine(None);
    assert_eq!(
        code(crate::agent::expand(&mut e, "q")),
        ErrorCode::Quarantined
    );
}

#[test]
fn a_folder_where_a_note_goes_failing_is_io_not_bad_input() {
    let w = World::new();
    let mut e = w.engine(None);
    let user = w.home.join("memory/user");
    fs::remove_dir_all(&user).unwrap();
    fs::write(&user, "a file where the folder was").unwrap();
    let add = e.add(note("fact", "body"));
    assert_eq!(code(add), ErrorCode::Io);
}

#[test]
fn a_damaged_index_database_is_index_not_bad_input() {
    let w = World::new();
    let mut e = w.engine(None);
    e.add(note("fact", "body")).unwrap();
    // Overwrite the open database in place: the next read finds no database.
    let db = w.home.join("index/memoria.sqlite");
    fs::write(&db, vec![0x5a; 64 * 1024]).unwrap();
    for ext in ["sqlite-wal", "sqlite-shm"] {
        let _ = fs::write(db.with_extension(ext), vec![0x5a; 64 * 1024]);
    }
    assert_eq!(code(e.list(None, None, None)), ErrorCode::Index);
}

#[test]
fn a_missing_embedding_model_is_model() {
    let w = World::new();
    let dir = w.root.join("not-a-model");
    fs::create_dir_all(&dir).unwrap();
    let r = crate::recall::embed::OnnxEmbedder::load(&dir, 1)
        .map(|_| ())
        .map_err(Error::from);
    assert_eq!(code(r), ErrorCode::Model);
}

#[test]
fn forget_purge_with_the_search_index_held_elsewhere_is_busy_not_bad_input() {
    let w = World::new();
    let mut e = w.engine(None);
    let n = e.add(note("purge me", "gone for good")).unwrap();
    e.recall().unwrap();
    // Another process's writer: tantivy's lock file, taken through tantivy itself.
    let lexical = w.home.join("index/recall/lexical");
    let other = tantivy::Index::open_in_dir(&lexical).unwrap();
    let _writer: tantivy::IndexWriter = other.writer_with_num_threads(1, 15_000_000).unwrap();
    let purge = e.forget_purge(&n.id, None);
    assert_eq!(code(purge), ErrorCode::Busy);
}

#[test]
fn sync_errors_map_into_the_same_codes() {
    let e: Error = crate::sync::SyncError::Off.into();
    assert_eq!(e.code(), ErrorCode::SyncOff);
    // The layer's own error is there to look at.
    assert!(matches!(
        e.layer::<crate::sync::SyncError>(),
        Some(crate::sync::SyncError::Off)
    ));
    assert!(e.layer::<crate::recall::Error>().is_none());
    // An engine failure inside a sync operation keeps its own code.
    let inner: Error = crate::sync::SyncError::Engine(Error::NotFound("n".into())).into();
    assert!(matches!(inner, Error::NotFound(_)));
}
