use std::fs;
use std::sync::Arc;
use std::time::{Duration, Instant};

use memoria_shared::FixedClock;

use super::*;
use crate::backup::BackupReason;
use crate::import;

const T0: i64 = 1_789_000_000_000;

struct World {
    _tmp: tempfile::TempDir,
    home: PathBuf,
    root: PathBuf,
    clock: Arc<FixedClock>,
}

impl World {
    fn new() -> World {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        World {
            home: root.join("home"),
            root,
            _tmp: tmp,
            clock: Arc::new(FixedClock::new(T0)),
        }
    }

    fn engine(&self, project: Option<&Path>) -> Engine {
        self.engine_with(project, Limits::default())
    }

    fn engine_with(&self, project: Option<&Path>, limits: Limits) -> Engine {
        Engine::open(OpenOptions {
            project_dir: project.map(Path::to_path_buf),
            clock: self.clock.clone(),
            limits,
            ..OpenOptions::without_model(&self.home)
        })
        .unwrap()
    }

    fn home(&self) -> Home {
        Home::resolve(Some(&self.home)).unwrap()
    }

    fn project(&self, name: &str, ty: Option<&str>) -> PathBuf {
        let dir = self.root.join(name);
        Project::init(&dir, ty).unwrap().root
    }
}

/// Ids of the notes that match `q` lexically (BM25 only: vector neighbours match anything).
fn lexical(e: &mut Engine, q: &str) -> Vec<String> {
    let opts = crate::recall::SearchOptions {
        mode: crate::recall::Mode::Bm25,
        ..Default::default()
    };
    e.hybrid_search(q, opts)
        .unwrap()
        .into_iter()
        .map(|h| h.id)
        .collect()
}

fn note(summary: &str, body: &str) -> NewNote {
    NewNote {
        summary: summary.into(),
        body: body.into(),
        ..Default::default()
    }
}

fn ids<B>(rows: &[IndexedNote<B>]) -> Vec<String> {
    let mut v: Vec<String> = rows.iter().map(|r| r.id.clone()).collect();
    v.sort();
    v
}

#[test]
fn add_show_edit_round_trip() {
    let w = World::new();
    let mut e = w.engine(None);
    let written = e
        .add(NewNote {
            summary: "Pricing cards use fills".into(),
            body: "See [[layout-a]].".into(),
            note_type: Some(NoteType::Feedback),
            tags: vec!["design".into()],
            id: Some("pricing".into()),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(written.scope, "user");
    e.add(NewNote {
        id: Some("layout-a".into()),
        ..note("Layout A", "grid")
    })
    .unwrap();
    let text = fs::read_to_string(&written.path).unwrap();
    assert_eq!(
        text,
        "---\n{\"id\":\"pricing\",\"summary\":\"Pricing cards use fills\",\"type\":\"feedback\",\"tags\":[\"design\"],\"createdAt\":1789000000000,\"updatedAt\":1789000000000}\n---\nSee [[layout-a]].\n"
    );
    let view = e.show("layout-a", None).unwrap();
    assert_eq!(
        view.backlinks,
        vec![("user".to_string(), "pricing".to_string())]
    );
    assert_eq!(e.index().usage("user", "layout-a").unwrap(), Some((1, T0)));

    w.clock.advance(1000);
    e.edit(
        "pricing",
        None,
        NoteEdit {
            tags: Some(vec!["design".into(), "ui".into()]),
            ..Default::default()
        },
    )
    .unwrap();
    let view = e.show("vt:pricing", None).unwrap();
    let n = view.note.unwrap();
    assert_eq!(n.tags, vec!["design", "ui"]);
    assert_eq!(n.created_at, Some(T0));
    assert_eq!(n.updated_at, Some(T0 + 1000));
    assert_eq!(lexical(&mut e, "fills"), vec!["pricing"]);
    assert!(matches!(
        e.add(NewNote {
            id: Some("pricing".into()),
            ..note("x", "")
        }),
        Err(Error::Exists(_))
    ));
    assert!(matches!(e.show("nope", None), Err(Error::NotFound(_))));
    assert!(matches!(e.show("../etc", None), Err(Error::InvalidId(_))));
    assert!(matches!(
        e.hybrid_search("  ", Default::default()),
        Err(Error::Invalid(_))
    ));
}

#[test]
fn projects_never_see_each_other() {
    let w = World::new();
    let a = w.project("a", Some("web"));
    let b = w.project("b", Some("web"));
    let c = w.project("c", Some("cli"));
    let mut ea = w.engine(Some(&a));
    ea.add(note("secret plan of project a", "alpha")).unwrap();
    ea.add(NewNote {
        note_type: Some(NoteType::User),
        ..note("user likes tea", "")
    })
    .unwrap();
    ea.add(NewNote {
        note_type: Some(NoteType::Domain),
        ..note("web apps need csp headers", "")
    })
    .unwrap();
    let mut eb = w.engine(Some(&b));
    let mut ec = w.engine(Some(&c));
    let mut en = w.engine(None);
    assert_eq!(ea.list(None, None, None).unwrap().len(), 3);
    let b_sees: Vec<String> = eb
        .list(None, None, None)
        .unwrap()
        .into_iter()
        .map(|r| r.summary)
        .collect();
    assert_eq!(b_sees.len(), 2, "{b_sees:?}");
    assert!(b_sees.contains(&"web apps need csp headers".to_string()));
    assert_eq!(ec.list(None, None, None).unwrap().len(), 1);
    assert_eq!(en.list(None, None, None).unwrap().len(), 1);
    for e in [&mut eb, &mut ec, &mut en] {
        assert!(lexical(e, "secret plan alpha").is_empty());
        let any = e
            .hybrid_search("secret plan alpha", Default::default())
            .unwrap();
        assert!(
            any.iter().all(|h| !h.scope.starts_with("project:")),
            "{any:?}"
        );
    }
    let id = ea
        .list(
            Some(&ea.scope_of(ScopeChoice::Project).unwrap()),
            None,
            None,
        )
        .unwrap()[0]
        .id
        .clone();
    assert!(matches!(
        w.engine(Some(&b)).show(&id, None),
        Err(Error::NotFound(_))
    ));
    assert!(matches!(
        en.scope_of(ScopeChoice::Project),
        Err(Error::NoProject)
    ));
    assert!(fs::read_dir(a.join("MEMORY")).unwrap().count() == 1);
}

#[test]
fn limits_and_collisions_are_refused_with_clear_errors() {
    let w = World::new();
    let mut e = w.engine_with(
        None,
        Limits {
            notes_per_scope: 2,
            ..Limits::default()
        },
    );
    let big = "x".repeat(128 * 1024 + 1);
    let err = e.add(note("big", &big)).unwrap_err();
    assert!(matches!(err, Error::BodyTooLarge { .. }));
    assert!(err.to_string().contains("128 KiB"), "{err}");
    assert!(matches!(e.add(note("  ", "")), Err(Error::Invalid(_))));
    assert!(matches!(
        e.add(note("two\nlines", "")),
        Err(Error::Invalid(_))
    ));
    assert!(matches!(
        e.add(NewNote {
            tags: vec!["a b".into()],
            ..note("t", "")
        }),
        Err(Error::Invalid(_))
    ));
    fs::write(w.home.join("memory/user/Foo.md"), "hand written").unwrap();
    let err = e
        .add(NewNote {
            id: Some("foo".into()),
            ..note("x", "")
        })
        .unwrap_err();
    assert!(
        matches!(err, Error::CaseCollision { .. } | Error::Exists(_)),
        "{err}"
    );
    e.add(note("one", "")).unwrap();
    let err = e.add(note("two", "")).unwrap_err();
    assert!(matches!(err, Error::ScopeFull { limit: 2, .. }), "{err}");
    let err = e.add(note("key", "AKIAIOSFODNN7EXAMPLE")).unwrap_err();
    assert!(matches!(
        err,
        Error::Secret {
            rule: "aws-access-key-id",
            ..
        }
    ));
    assert!(
        !err.to_string().contains("AKIA"),
        "the secret is never echoed: {err}"
    );
}

#[test]
fn every_backup_reason_is_restorable() {
    let w = World::new();
    let p = w.project("p", None);
    let mut e = w.engine(Some(&p));
    for (i, reason) in BackupReason::ALL.into_iter().enumerate() {
        let id = format!("n{i}");
        let scope = if i % 2 == 0 {
            ScopeChoice::User
        } else {
            ScopeChoice::Project
        };
        e.add(NewNote {
            id: Some(id.clone()),
            scope: Some(scope),
            ..note("original", "original body")
        })
        .unwrap();
        let (s, row) = e.resolve(&id, None).unwrap();
        let original = fs::read(&row.path).unwrap();
        let b = e.backup(&s, &row, reason).unwrap();
        assert_eq!(b.reason, reason);
        w.clock.advance(10);
        e.edit(
            &id,
            None,
            NoteEdit {
                body: Some("newer".into()),
                ..Default::default()
            },
        )
        .unwrap();
        let r = e.restore(&b.backup_id).unwrap();
        assert!(!r.unchanged);
        assert_eq!(fs::read(&row.path).unwrap(), original, "{reason:?}");
        // The newer version it replaced is itself restorable.
        let over = r.replaced_backup.unwrap();
        let (meta, bytes) = e.backups.read(&over).unwrap();
        assert_eq!(meta.reason, BackupReason::RestoreOver);
        assert!(String::from_utf8(bytes).unwrap().ends_with("newer\n"));
        assert!(e.restore(&b.backup_id).unwrap().unchanged);
    }
    let listed = e.backups(100).unwrap();
    assert_eq!(listed.len(), 2 * BackupReason::ALL.len());
    assert!(
        listed
            .windows(2)
            .all(|w| w[0].created_at >= w[1].created_at),
        "newest first"
    );
    assert!(matches!(e.restore("nope"), Err(Error::BackupNotFound(_))));
    assert!(matches!(
        e.restore("../../etc/passwd"),
        Err(Error::BackupNotFound(_))
    ));
}

#[test]
fn forget_then_restore_from_another_folder() {
    let w = World::new();
    let p = w.project("p", None);
    let mut e = w.engine(Some(&p));
    let written = e.add(note("project fact", "body")).unwrap();
    let meta = e.forget(&written.id, None).unwrap();
    assert!(!Path::new(&written.path).exists());
    assert!(e.list(None, None, None).unwrap().is_empty());
    // Restored from outside the project: it still goes back to the project's folder.
    let mut outside = w.engine(None);
    let r = outside.restore(&meta.backup_id).unwrap();
    assert_eq!(r.scope, written.scope);
    assert!(Path::new(&written.path).exists());
    assert_eq!(
        ids(&w.engine(Some(&p)).list(None, None, None).unwrap()),
        vec![written.id]
    );
}

#[test]
fn broken_files_are_listed_never_recalled_and_never_rewritten() {
    let w = World::new();
    let e = w.engine(None);
    drop(e);
    let path = w.home.join("memory/user/broken.md");
    let text = "---\n{\"id\": \"broken\", \"summary\": oops}\n---\nthe zebra body\n";
    fs::write(&path, text).unwrap();
    let mut e = w.engine(None);
    let rows = e.list(None, None, None).unwrap();
    assert_eq!(rows.len(), 1);
    assert!(
        rows[0].error.as_deref().unwrap().contains("JSON"),
        "{:?}",
        rows[0].error
    );
    // Its text is never searched: a broken file skips no never-recalled rule.
    assert_eq!(lexical(&mut e, "zebra"), Vec::<String>::new());
    let err = e
        .edit(
            "broken",
            None,
            NoteEdit {
                summary: Some("x".into()),
                ..Default::default()
            },
        )
        .unwrap_err();
    assert!(matches!(err, Error::Broken { .. }), "{err}");
    assert_eq!(fs::read_to_string(&path).unwrap(), text);
    let b = e.forget("broken", None).unwrap();
    assert_eq!(e.backups.read(&b.backup_id).unwrap().1, text.as_bytes());
}

#[test]
fn index_is_derived_and_rebuilds() {
    let w = World::new();
    let mut e = w.engine(None);
    for i in 0..5 {
        e.add(note(&format!("note number {i}"), "body")).unwrap();
    }
    let before = ids(&e.list(None, None, None).unwrap());
    drop(e);
    for ext in ["sqlite", "sqlite-wal", "sqlite-shm"] {
        let _ = fs::remove_file(w.home.join("index/memoria").with_extension(ext));
    }
    let e = w.engine(None);
    assert_eq!(ids(&e.list(None, None, None).unwrap()), before);
    drop(e);
    fs::write(
        w.home.join("index/memoria.sqlite"),
        b"this is not a database at all, not even close",
    )
    .unwrap();
    let _ = fs::remove_file(w.home.join("index/memoria.sqlite-wal"));
    let _ = fs::remove_file(w.home.join("index/memoria.sqlite-shm"));
    let e = w.engine(None);
    assert_eq!(ids(&e.list(None, None, None).unwrap()), before);
    assert_eq!(e.index().integrity().unwrap(), "ok");
}

#[test]
fn external_edits_are_picked_up_on_start() {
    let w = World::new();
    let mut e = w.engine(None);
    let a = e
        .add(NewNote {
            id: Some("a".into()),
            ..note("alpha", "first")
        })
        .unwrap();
    drop(e);
    fs::write(
        &a.path,
        fs::read_to_string(&a.path)
            .unwrap()
            .replace("first", "second"),
    )
    .unwrap();
    fs::create_dir_all(w.home.join("memory/user/feedback")).unwrap();
    fs::write(
        w.home.join("memory/user/feedback/Hand Made.md"),
        "# Always run tests\nbefore pushing\n",
    )
    .unwrap();
    let mut e = w.engine(None);
    assert_eq!(lexical(&mut e, "second"), vec!["a"]);
    let hand = e.list(None, Some("feedback"), None).unwrap();
    assert_eq!(hand[0].id, "hand-made");
    assert_eq!(hand[0].summary, "Always run tests");
    drop(e);
    fs::remove_file(&a.path).unwrap();
    assert_eq!(
        ids(&w.engine(None).list(None, None, None).unwrap()),
        vec!["hand-made"]
    );
}

#[test]
fn watcher_picks_up_edits_creations_renames_and_deletions() {
    let w = World::new();
    let mut e = w.engine(None);
    let a = e
        .add(NewNote {
            id: Some("a".into()),
            ..note("alpha", "first")
        })
        .unwrap();
    let handle = crate::watch::start(&e, |_, _| {}).unwrap();
    assert!(crate::fsx::FileLock::is_held(
        &e.watch_lock_path(&Scope::User)
    ));
    let wait_for = |e: &mut Engine, what: &str, cond: &dyn Fn(&mut Engine) -> bool| {
        let start = Instant::now();
        while !cond(e) {
            assert!(
                start.elapsed() < Duration::from_secs(2),
                "watcher missed: {what}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    fs::write(
        &a.path,
        fs::read_to_string(&a.path)
            .unwrap()
            .replace("first", "kumquat"),
    )
    .unwrap();
    wait_for(&mut e, "edit", &|e| lexical(e, "kumquat").len() == 1);
    let b = w.home.join("memory/user/b.md");
    fs::write(&b, "persimmon").unwrap();
    wait_for(&mut e, "create", &|e| lexical(e, "persimmon").len() == 1);
    fs::rename(&b, w.home.join("memory/user/c.md")).unwrap();
    wait_for(&mut e, "rename", &|e| {
        ids(&e.list(None, None, None).unwrap()) == vec!["a", "c"]
    });
    fs::remove_file(&a.path).unwrap();
    wait_for(&mut e, "delete", &|e| {
        ids(&e.list(None, None, None).unwrap()) == vec!["c"]
    });
    drop(handle);
    assert!(!crate::fsx::FileLock::is_held(
        &e.watch_lock_path(&Scope::User)
    ));
}

#[test]
fn reading_notes_and_listing_their_folder_sets_off_no_rescan() {
    let w = World::new();
    let mut e = w.engine(None);
    let a = e.add(note("alpha", "first")).unwrap();
    let handle = crate::watch::start(&e, |_, _| {}).unwrap();
    let dir = w.home.join("memory/user");
    // What searches, editors and the watcher's own rescans do: open and read, never write.
    for _ in 0..5 {
        let _ = fs::read_to_string(&a.path).unwrap();
        let _ = fs::read_dir(&dir).unwrap().count();
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(crate::watch::DEBOUNCE * 3);
    assert_eq!(handle.rescans(), 0, "reads were taken for changes");
    // A write still counts, and its rescan (which lists and reads the folder) sets off no
    // other: the count settles.
    fs::write(w.home.join("memory/user/b.md"), "persimmon").unwrap();
    let start = Instant::now();
    while lexical(&mut e, "persimmon").is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(2),
            "watcher missed a write"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(crate::watch::LONGEST_BATCH + crate::watch::DEBOUNCE * 3);
    let settled = handle.rescans();
    std::thread::sleep(crate::watch::LONGEST_BATCH + crate::watch::DEBOUNCE * 3);
    assert_eq!(handle.rescans(), settled, "a rescan set off another");
    assert!(
        (1..=2).contains(&settled),
        "{settled} rescans for one write"
    );
}

fn write(dir: &Path, rel: &str, text: &str) {
    let p = dir.join(rel);
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, text).unwrap();
}

#[test]
fn import_obsidian_and_openclaw_idempotently() {
    let w = World::new();
    let src = w.root.join("vault");
    write(&src, ".obsidian/workspace.md", "ignored");
    write(
        &src,
        "Books/Moby Dick.md",
        "---\ntype: book\ntags: [fiction]\n---\n# Moby Dick\nCall me Ishmael.\n",
    );
    write(&src, "Daily/notes.md", "daily notes\n");
    write(&src, "Work/notes.md", "work notes\n");
    write(&src, "feedback/Be Brief.md", "Be brief in reviews.\n");
    write(&src, "MEMORY.md", "# Curated memory\n- likes tea\n");
    write(&src, "memory/2026-01-05.md", "Worked on the parser.\n");
    write(&src, "Secrets.md", "db password: hunter22xyz\n");
    write(&src, "Broken.md", "---\n{\"id\": nope}\n---\nbody\n");
    write(&src, "app/CLAUDE.md", "# Project rules\nUse pnpm.\n");
    write(&src, "image.png", "not markdown");
    let mut e = w.engine(None);
    let mut calls = 0;
    let r = import::import(&mut e, &src, None, &mut |_, _, _| calls += 1).unwrap();
    assert_eq!(
        (r.added, r.updated, r.unchanged, r.skipped.len()),
        (8, 0, 0, 1),
        "{r:?}"
    );
    assert!(r.skipped[0].path.ends_with("Broken.md") && r.skipped[0].reason.contains("JSON"));
    assert_eq!(r.flagged_secrets, 1);
    assert!(calls >= 8);
    let all = e.list(None, None, None).unwrap();
    assert_eq!(
        ids(&all),
        vec![
            "2026-01-05",
            "be-brief",
            "claude",
            "daily-notes",
            "memory",
            "moby-dick",
            "secrets",
            "work-notes"
        ]
    );
    let tag_of = |id: &str| all.iter().find(|r| r.id == id).unwrap().tags.clone();
    assert!(tag_of("memory").contains(&"source:openclaw".to_string()));
    assert!(tag_of("2026-01-05").contains(&"source:openclaw".to_string()));
    assert!(tag_of("claude").contains(&"source:claude-code".to_string()));
    assert!(tag_of("moby-dick").contains(&"source:obsidian".to_string()));
    let daily = e.show("2026-01-05", None).unwrap().note.unwrap();
    assert_eq!(daily.created_at, crate::backup::date_to_ms("2026-01-05"));
    // A folder is where a note was kept, never its type.
    let brief = e.show("be-brief", None).unwrap().note.unwrap();
    assert_eq!(brief.note_type, None);
    assert_eq!(brief.extra["folder"], "feedback");
    assert_eq!(
        e.show("moby-dick", None)
            .unwrap()
            .indexed
            .note_type
            .as_deref(),
        Some("book")
    );
    assert!(e.list(None, None, Some(crate::guard::SECRETS_TAG)).unwrap()[0].id == "secrets");

    let again = import::import(&mut e, &src, None, &mut |_, _, _| {}).unwrap();
    assert_eq!(
        (again.added, again.updated, again.unchanged),
        (0, 0, 8),
        "{again:?}"
    );
    assert!(e.backups(10).unwrap().is_empty());

    write(&src, "MEMORY.md", "# Curated memory\n- likes green tea\n");
    let third = import::import(&mut e, &src, None, &mut |_, _, _| {}).unwrap();
    assert_eq!(
        (third.added, third.updated, third.unchanged),
        (0, 1, 7),
        "{third:?}"
    );
    let b = e.backups(10).unwrap();
    assert_eq!(
        (b.len(), b[0].reason.as_str(), b[0].note_id.as_str()),
        (1, "import-replace", "memory")
    );
    assert!(
        e.show("memory", None)
            .unwrap()
            .note
            .unwrap()
            .body
            .contains("green tea")
    );
    // A note of the user's own that has the same id is never overwritten by an import.
    let w2 = World::new();
    let mut e2 = w2.engine(None);
    e2.add(NewNote {
        id: Some("memory".into()),
        ..note("mine", "mine")
    })
    .unwrap();
    let r = import::import(&mut e2, &src, None, &mut |_, _, _| {}).unwrap();
    assert_eq!(r.added, 8);
    assert_eq!(
        e2.show("memory", None).unwrap().note.unwrap().body,
        "mine\n"
    );
}

#[test]
fn export_then_import_reproduces_the_notes() {
    let w = World::new();
    let mut e = w.engine(None);
    e.add(NewNote {
        tags: vec!["a".into()],
        note_type: Some(NoteType::Reference),
        ..note("first note", "body one")
    })
    .unwrap();
    e.add(note("定价卡片", "中文正文")).unwrap();
    let out = w.root.join("export");
    assert_eq!(import::export(&e, &out).unwrap().files, 2);
    let w2 = World::new();
    let mut e2 = w2.engine(None);
    let r = import::import(&mut e2, &out.join("user"), None, &mut |_, _, _| {}).unwrap();
    assert_eq!(r.added, 2);
    let hashes = |e: &Engine| {
        let mut v: Vec<_> = e
            .list(None, None, None)
            .unwrap()
            .into_iter()
            .map(|r| (r.id, r.hash))
            .collect();
        v.sort();
        v
    };
    assert_eq!(hashes(&e), hashes(&e2));
}

fn open_err(w: &World, project: &Path) -> Error {
    Engine::open(OpenOptions {
        project_dir: Some(project.to_path_buf()),
        clock: w.clock.clone(),
        limits: Limits::default(),
        ..OpenOptions::without_model(&w.home)
    })
    .expect_err("the engine opened")
}

#[test]
fn a_memory_link_out_of_the_project_is_refused() {
    let w = World::new();
    let victim = w.project("victim", None);
    let mut ev = w.engine(Some(&victim));
    let secret = ev
        .add(note("victim roadmap", "acquisition target"))
        .unwrap();
    drop(ev);
    let attacker = w.project("attacker", None);
    fs::remove_dir(attacker.join("MEMORY")).unwrap();
    std::os::unix::fs::symlink(victim.join("MEMORY"), attacker.join("MEMORY")).unwrap();
    let err = open_err(&w, &attacker);
    assert!(matches!(err, Error::LinkOutsideProject { .. }), "{err}");
    assert!(
        err.to_string().contains("outside the project folder"),
        "{err}"
    );
    assert!(Path::new(&secret.path).exists());
    // A link that stays inside the project is followed.
    let inside = w.project("inside", None);
    fs::remove_dir(inside.join("MEMORY")).unwrap();
    fs::create_dir_all(inside.join("docs/memory")).unwrap();
    std::os::unix::fs::symlink("docs/memory", inside.join("MEMORY")).unwrap();
    let mut ei = w.engine(Some(&inside));
    let own = ei.add(note("inside fact", "kept in docs")).unwrap();
    assert!(
        own.path
            .starts_with(inside.join("docs/memory").to_str().unwrap()),
        "{}",
        own.path
    );
    assert_eq!(ids(&ei.list(None, None, None).unwrap()), vec![own.id]);
}

#[test]
fn a_folder_claiming_a_known_id_sees_nothing_until_paired() {
    let w = World::new();
    let victim = w.project("victim", None);
    let mut ev = w.engine(Some(&victim));
    let secret = ev
        .add(note("victim roadmap", "acquisition target"))
        .unwrap();
    let victim_scope = ev.project().unwrap().scope();
    // The victim's watcher holds its lock: other processes skip their repair scan of it.
    let _watch = crate::watch::start(&ev, |_, _| {}).unwrap();
    let attacker = w.root.join("attacker");
    fs::create_dir_all(attacker.join(".memoria")).unwrap();
    fs::copy(
        Project::config_path(&victim),
        Project::config_path(&attacker),
    )
    .unwrap();
    let err = open_err(&w, &attacker);
    assert!(matches!(err, Error::ProjectClaimed { .. }), "{err}");
    assert!(err.to_string().contains(victim.to_str().unwrap()), "{err}");
    // The victim's folder is still the one bound to its scope.
    assert_eq!(
        crate::project::registered_scope(&w.home(), &victim).unwrap(),
        victim_scope.project_id().map(String::from)
    );
    assert!(w.engine(Some(&victim)).resolve(&secret.id, None).is_ok());

    // Confirmed: the folder gets a scope of its own and sees only its own MEMORY folder.
    let paired = crate::project::pair(&w.home(), &attacker).unwrap();
    assert!(!paired.unchanged && paired.took_over_from.is_none());
    assert_ne!(paired.scope, victim_scope.key());
    let mut ea = w.engine(Some(&attacker));
    assert_eq!(ea.project().unwrap().scope().key(), paired.scope);
    assert!(ea.list(None, None, None).unwrap().is_empty());
    assert!(matches!(ea.show(&secret.id, None), Err(Error::NotFound(_))));
    assert!(lexical(&mut ea, "acquisition target").is_empty());
    assert!(matches!(
        ea.forget(&secret.id, None),
        Err(Error::NotFound(_))
    ));
    assert!(Path::new(&secret.path).exists());
    let own = ea.add(note("attacker fact", "own words")).unwrap();
    assert!(own.path.starts_with(attacker.to_str().unwrap()));
    assert_eq!(
        ids(&w.engine(Some(&victim)).list(None, None, None).unwrap()),
        vec![secret.id.clone()]
    );
    assert_eq!(
        crate::project::pair(&w.home(), &attacker).unwrap().scope,
        paired.scope
    );
}

#[test]
fn two_worktrees_of_one_repository_each_see_their_own_notes_after_pairing() {
    let w = World::new();
    let main = w.root.join("repo");
    fs::create_dir_all(&main).unwrap();
    let git = |dir: &Path, args: &[&str]| {
        let out = std::process::Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(["-c", "user.name=t", "-c", "user.email=t@t"])
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
    };
    git(&main, &["init", "-q"]);
    git(&main, &["commit", "-q", "--allow-empty", "-m", "root"]);
    let tree = w.root.join("repo-feature");
    git(
        &main,
        &[
            "worktree",
            "add",
            "-q",
            "-b",
            "feature",
            tree.to_str().unwrap(),
        ],
    );
    let p1 = Project::init(&main, None).unwrap();
    let p2 = Project::init(&tree, None).unwrap();
    assert_eq!(p1.id, p2.id, "both checkouts share the root-commit id");
    let mut e1 = w.engine(Some(&main));
    e1.add(NewNote {
        id: Some("setup".into()),
        ..note("how to set up", "main branch uses make")
    })
    .unwrap();
    assert!(matches!(open_err(&w, &tree), Error::ProjectClaimed { .. }));
    crate::project::pair(&w.home(), &tree).unwrap();
    let mut e2 = w.engine(Some(&tree));
    assert!(e2.list(None, None, None).unwrap().is_empty());
    e2.add(NewNote {
        id: Some("setup".into()),
        ..note("how to set up", "feature branch uses just")
    })
    .unwrap();
    let body = |e: &mut Engine| e.show("setup", None).unwrap().note.unwrap().body;
    assert!(body(&mut e1).contains("make"));
    assert!(body(&mut e2).contains("just"));
    assert_eq!(lexical(&mut e1, "just"), Vec::<String>::new());
    assert_eq!(lexical(&mut e2, "just"), vec!["setup"]);
    assert_eq!(lexical(&mut e1, "make"), vec!["setup"]);
    assert_eq!(lexical(&mut e2, "make"), Vec::<String>::new());
    let s1 = e1.project().unwrap().scope();
    let s2 = e2.project().unwrap().scope();
    assert_ne!(s1, s2);
    assert_eq!(s1.project_id(), s2.project_id());
    assert_ne!(e1.watch_lock_path(&s1), e2.watch_lock_path(&s2));
    // Backups and restores stay with their folder.
    let meta = e2.forget("setup", None).unwrap();
    assert_eq!(meta.scope, s2.key());
    let r = w.engine(Some(&main)).restore(&meta.backup_id).unwrap();
    assert!(r.path.starts_with(tree.to_str().unwrap()), "{}", r.path);
    assert!(body(&mut e1).contains("make"));
}

#[test]
fn a_moved_project_takes_over_its_scope_once_confirmed() {
    let w = World::new();
    let old = w.project("old", None);
    let mut e = w.engine(Some(&old));
    let n = e.add(note("moved fact", "travels")).unwrap();
    let scope = e.project().unwrap().scope();
    drop(e);
    let new = w.root.join("new");
    fs::rename(&old, &new).unwrap();
    assert!(matches!(open_err(&w, &new), Error::ProjectClaimed { .. }));
    let paired = crate::project::pair(&w.home(), &new).unwrap();
    assert_eq!(paired.scope, scope.key());
    assert_eq!(paired.took_over_from.as_deref(), old.to_str());
    let e = w.engine(Some(&new));
    assert_eq!(ids(&e.list(None, None, None).unwrap()), vec![n.id]);
}

/// An editor saving `text` to the note at `path` at one step of a replacement.
fn editor_at(step: fsx::Step, path: &Path, text: &'static str) {
    let target = path.to_path_buf();
    fsx::set_hook(Some(Box::new(move |s, p| {
        if s == step && p == target {
            fs::write(p, text).unwrap();
        }
    })));
}

/// Every version of the note's text that exists anywhere: the file and every backup.
fn all_versions(e: &Engine, path: &Path) -> Vec<String> {
    let mut v: Vec<String> = e
        .backups(1000)
        .unwrap()
        .iter()
        .map(|b| String::from_utf8(e.backups.read(&b.backup_id).unwrap().1).unwrap())
        .collect();
    if let Ok(t) = fs::read_to_string(path) {
        v.push(t);
    }
    v
}

/// A fresh engine holding the note `id` ("a note", its body "first version"), with its world
/// (kept for the engine's lifetime) and its file.
fn first_version_of(id: &str) -> (World, Engine, PathBuf) {
    let w = World::new();
    let mut e = w.engine(None);
    let n = e
        .add(NewNote {
            id: Some(id.into()),
            ..note("a note", "first version")
        })
        .unwrap();
    (w, e, PathBuf::from(&n.path))
}

/// The note's first version is among `versions` (the file and its backups), unless the
/// editor saved at `step` before the file was moved aside, when the editor's save replaced it.
fn assert_first_version_kept(step: fsx::Step, versions: &[String]) {
    assert!(
        versions.iter().any(|v| v.contains("first version")) || step == fsx::Step::BeforeMoveAside,
        "{step:?}: {versions:?}"
    );
}

#[test]
fn an_editor_saving_during_a_replacement_loses_nothing() {
    use fsx::Step;
    for step in [Step::BeforeMoveAside, Step::MovedAside, Step::BeforeInstall] {
        let (_w, mut e, path) = first_version_of("n");
        editor_at(step, &path, "editor autosave\n");
        let result = e.edit_with_backup(
            "n",
            None,
            NoteEdit {
                body: Some("agent version".into()),
                ..Default::default()
            },
            Some(BackupReason::AgentUpdate),
        );
        fsx::set_hook(None);
        assert!(
            matches!(result, Err(Error::ChangedMeanwhile { .. })),
            "{step:?}: {result:?}"
        );
        assert_eq!(
            result.as_ref().unwrap_err().code(),
            crate::error::ErrorCode::ChangedSince
        );
        let versions = all_versions(&e, &path);
        assert!(
            fs::read_to_string(&path).unwrap() == "editor autosave\n",
            "{step:?}: the editor's save stays in place: {versions:?}"
        );
        assert_first_version_kept(step, &versions);
        assert!(
            !versions.iter().any(|v| v.contains("agent version")),
            "{step:?}: nothing overwrote the editor: {versions:?}"
        );
        let names: Vec<String> = fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|d| d.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, vec!["n.md"], "{step:?}: no leftovers");
        // The index shows the editor's version.
        assert_eq!(e.resolve("n", None).unwrap().1.body, "editor autosave\n");
    }
}

/// A sync download or merge (`swap_note_file`) racing an editor's save: the save is never
/// overwritten or lost, the download is refused (the next pass merges it), and the version the
/// pass read is backed up whenever it was displaced.
#[test]
fn an_editor_saving_during_a_sync_download_loses_nothing() {
    use fsx::Step;
    for step in [Step::BeforeMoveAside, Step::MovedAside, Step::BeforeInstall] {
        let (_w, mut e, path) = first_version_of("n");
        let read = fs::read(&path).unwrap();
        let (scope, row) = e.resolve("n", None).unwrap();
        let mut cloud = memoria_shared::Note::parse(
            &String::from_utf8(read.clone()).unwrap(),
            memoria_shared::note::FileContext {
                relative_path: &row.rel_path,
            },
        )
        .unwrap();
        cloud.body = "cloud version".into();
        editor_at(step, &path, "editor autosave\n");
        let written = e.swap_note_file(
            &scope,
            "n",
            &row.rel_path,
            Some(&read),
            Some(&cloud),
            Some(BackupReason::SyncDownload),
        );
        fsx::set_hook(None);
        assert!(!written.unwrap(), "{step:?}: the download must be refused");
        let versions = all_versions(&e, &path);
        assert_eq!(
            fs::read_to_string(&path).unwrap(),
            "editor autosave\n",
            "{step:?}: {versions:?}"
        );
        assert_first_version_kept(step, &versions);
        assert_eq!(e.resolve("n", None).unwrap().1.body, "editor autosave\n");
    }
    // Without an editor, the download lands and the version it replaced is backed up.
    let (_w, mut e, path) = first_version_of("m");
    let read = fs::read(&path).unwrap();
    let (scope, row) = e.resolve("m", None).unwrap();
    let mut cloud =
        memoria_shared::Note::new(memoria_shared::NoteId::new("m").unwrap(), "a note", "");
    cloud.body = "cloud version".into();
    assert!(
        e.swap_note_file(
            &scope,
            "m",
            &row.rel_path,
            Some(&read),
            Some(&cloud),
            Some(BackupReason::SyncDownload)
        )
        .unwrap()
    );
    assert!(fs::read_to_string(&path).unwrap().contains("cloud version"));
    assert!(
        all_versions(&e, &path)
            .iter()
            .any(|v| v.contains("first version"))
    );
    assert_eq!(e.resolve("m", None).unwrap().1.body, "cloud version");
}

#[test]
fn an_editor_saving_during_forget_keeps_its_text() {
    use fsx::Step;
    for step in [Step::BeforeMoveAside, Step::MovedAside] {
        let (_w, mut e, path) = first_version_of("n");
        editor_at(step, &path, "editor autosave\n");
        let result = e.forget("n", None);
        fsx::set_hook(None);
        assert!(
            matches!(result, Err(Error::ChangedMeanwhile { .. })),
            "{step:?}: {result:?}"
        );
        let versions = all_versions(&e, &path);
        assert!(
            versions.iter().any(|v| v == "editor autosave\n"),
            "{step:?}: {versions:?}"
        );
        assert_first_version_kept(step, &versions);
    }
    // Without interference, a rewrite keeps the file's mode.
    let w = World::new();
    let mut e = w.engine(None);
    let n = e.add(note("a note", "x")).unwrap();
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &str| fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&n.path), 0o600, "a new note in the home is private");
    fs::set_permissions(&n.path, fs::Permissions::from_mode(0o640)).unwrap();
    e.edit(
        &n.id,
        None,
        NoteEdit {
            body: Some("y".into()),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(mode(&n.path), 0o640, "a rewrite keeps the mode");
    // A note in a project's MEMORY/ is as readable as that folder, like the rest of the repo.
    let p = w.project("p", None);
    fs::set_permissions(p.join("MEMORY"), fs::Permissions::from_mode(0o755)).unwrap();
    let pn = w.engine(Some(&p)).add(note("project fact", "z")).unwrap();
    assert_eq!(mode(&pn.path), 0o644);
}

#[test]
fn backups_are_pruned_by_age_and_total_size() {
    let w = World::new();
    let mut e = w.engine(None);
    let n = e.add(NewNote {
        id: Some("n".into()),
        ..note("a note", "x")
    });
    n.unwrap();
    let (s, row) = e.resolve("n", None).unwrap();
    let old = e.backup(&s, &row, BackupReason::AgentUpdate).unwrap();
    assert_eq!(e.backup_policy(), crate::backup::BackupPolicy::default());
    w.clock.advance(91 * 86_400_000);
    let fresh = e.backup(&s, &row, BackupReason::AgentUpdate).unwrap();
    let ids: Vec<String> = e
        .backups(10)
        .unwrap()
        .into_iter()
        .map(|b| b.backup_id)
        .collect();
    assert_eq!(
        ids,
        vec![fresh.backup_id.clone()],
        "the 91-day-old backup is gone"
    );
    assert!(e.backups.read(&old.backup_id).is_err());
    // A size limit from the home's config file keeps the newest that fit.
    fs::write(
        w.home.join("config.json"),
        r#"{"backups": {"maxAgeDays": 0, "maxTotalMb": 1}}"#,
    )
    .unwrap();
    let e = w.engine(None);
    let big = "b".repeat(100 * 1024);
    for i in 0..12 {
        w.clock.advance(1000);
        e.backup_bytes(&s, "n", "n.md", big.as_bytes(), BackupReason::Merge)
            .unwrap();
        let _ = i;
    }
    // Writes in one burst prune once; the doctor (or the next burst) applies the policy.
    let report = e.prune_backups().unwrap();
    assert!(report.kept_bytes <= 1024 * 1024, "{report:?}");
    let kept = e.backups(100).unwrap();
    assert!(kept.len() < 12 && kept.len() >= 9, "{}", kept.len());
    fs::write(
        w.home.join("config.json"),
        r#"{"backups": {"maxAgeDays": "x"}}"#,
    )
    .unwrap();
    let err = Engine::open(OpenOptions {
        home: Some(w.home.clone()),
        ..Default::default()
    })
    .unwrap_err();
    assert!(err.to_string().contains("config.json"), "{err}");
}

/// The explanation of the only hit for `q`, or `None` when nothing matches.
fn explained(e: &mut Engine, q: &str) -> Option<crate::recall::Explain> {
    let opts = crate::recall::SearchOptions {
        explain: true,
        ..Default::default()
    };
    let hits = e.hybrid_search(q, opts).unwrap();
    assert!(hits.len() <= 1, "{hits:?}");
    hits.into_iter().next().and_then(|h| h.explain)
}

#[test]
fn hand_edits_outside_the_text_reach_ranking_and_visibility() {
    let w = World::new();
    let mut e = w.engine(None);
    let n = e
        .add(note("the heron nests by the weir", "herons"))
        .unwrap();
    let before = explained(&mut e, "heron weir").unwrap();
    assert_eq!((before.importance, before.trust), (1.0, 1.0));
    drop(e);
    let original = fs::read_to_string(&n.path).unwrap();
    let with = |extra: &str| original.replacen("{\"id\"", &format!("{{{extra},\"id\""), 1);
    // Only frontmatter facts outside the content hash change; the text stays the same.
    fs::write(&n.path, with("\"importance\":1.0,\"trust\":\"peer\"")).unwrap();
    let after = explained(&mut w.engine(None), "heron weir").expect("still found");
    assert_eq!((after.importance, after.trust), (1.25, 0.3), "{after:?}");
    fs::write(&n.path, with("\"trust\":\"quarantined\"")).unwrap();
    assert_eq!(explained(&mut w.engine(None), "heron weir"), None);
    fs::write(&n.path, &original).unwrap();
    let back = explained(&mut w.engine(None), "heron weir").expect("back after the quarantine");
    assert_eq!((back.importance, back.trust), (1.0, 1.0), "{back:?}");
}

/// A note's aliases are searched with it, and a change of its aliases alone reaches search.
#[test]
fn aliases_are_searched_and_an_edit_of_them_alone_reaches_search() {
    let w = World::new();
    let mut e = w.engine(None);
    let dir = e
        .scope_dir(&e.scope_of(ScopeChoice::User).unwrap())
        .unwrap();
    fs::create_dir_all(&dir).unwrap();
    let laws = dir.join("laws.md");
    fs::write(
        &laws,
        "---\naliases: [Newton]\n---\nA body stays at rest.\n",
    )
    .unwrap();
    e.rescan(true).unwrap();
    assert_eq!(lexical(&mut e, "newton"), ["laws"]);
    fs::write(
        &laws,
        "---\naliases: [Kepler]\n---\nA body stays at rest.\n",
    )
    .unwrap();
    e.rescan(true).unwrap();
    assert_eq!(lexical(&mut e, "kepler"), ["laws"]);
    assert!(lexical(&mut e, "newton").is_empty());
}
