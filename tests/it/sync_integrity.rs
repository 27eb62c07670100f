//! Sync integrity against the sync server's router driven in-process, with a hook between the
//! server's answer and the client: metadata that syncs, a local edit racing a commitFirst
//! batch, a commit whose reply is lost while another machine changes the note, and a pass
//! stopped between two of its commits.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use axum::body::Body;
use memoria_engine::sync::client::{HttpReply, HttpRequest, SendError};
use memoria_engine::sync::{BatchChange, Settings, SyncClient, Syncer, Token, Transport};
use memoria_engine::vault::OpenOptions;
use memoria_engine::{Engine, NewNote, NoteEdit, Scope, ScopeChoice};
use memoria_shared::note::{FileContext, Note, Trust};
use memoria_shared::{ContentHash, FixedClock};
use memoria_sync_server::layout::UserId;
use memoria_sync_server::store::fs::FsStore;
use memoria_sync_server::{AppState, ObjectStore, SeededRandom, router};
use tower::ServiceExt;

const SERVER: &str = "http://in-process";

/// What the hook does once the server has answered a request.
type Hook = Box<dyn FnOnce() -> Delivery + Send>;

/// Whether the client gets the server's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Delivery {
    Reply,
    Lost,
}

/// The router in-process, with at most one hook on the next request whose path ends with a
/// given suffix.
struct Hooked {
    rt: tokio::runtime::Runtime,
    router: axum::Router,
    hook: Mutex<Option<(&'static str, Hook)>>,
}

impl std::fmt::Debug for Hooked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Hooked")
    }
}

impl Transport for Hooked {
    fn send(&self, req: &HttpRequest<'_>) -> Result<HttpReply, SendError> {
        let mut b = axum::http::Request::builder()
            .uri(req.path)
            .header("authorization", format!("Bearer {}", req.token));
        let body = match req.body {
            Some(bytes) => {
                b = b.method("POST").header("content-type", "application/json");
                Body::from(bytes.to_vec())
            }
            None => {
                b = b.method("GET");
                Body::empty()
            }
        };
        let resp = self
            .rt
            .block_on(self.router.clone().oneshot(b.body(body).unwrap()))
            .unwrap();
        let status = resp.status().as_u16();
        let body = self
            .rt
            .block_on(axum::body::to_bytes(resp.into_body(), usize::MAX))
            .unwrap()
            .to_vec();
        let hook = {
            let mut slot = self.hook.lock().unwrap();
            match slot.take() {
                Some((suffix, hook)) if req.path.ends_with(suffix) => Some(hook),
                other => {
                    *slot = other;
                    None
                }
            }
        };
        if let Some(hook) = hook
            && hook() == Delivery::Lost
        {
            return Err("reply lost".into());
        }
        Ok(HttpReply {
            status,
            retry_after_s: None,
            body,
        })
    }
}

/// One server and the machines of one account.
struct World {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    transport: Arc<Hooked>,
    clock: Arc<FixedClock>,
    token: String,
}

struct Machine {
    home: PathBuf,
    engine: Engine,
    syncer: Syncer,
}

impl World {
    fn new() -> World {
        World::with_settings(&memoria_sync_server::Settings::default())
    }

    fn with_settings(settings: &memoria_sync_server::Settings) -> World {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().to_path_buf();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let store: Arc<dyn ObjectStore> = Arc::new(FsStore::open(&root.join("store")).unwrap());
        let clock = Arc::new(FixedClock::new(1_800_000_000_000));
        let rng = Arc::new(SeededRandom::new(11));
        let state = AppState::new(settings, store.clone(), clock.clone(), rng.clone());
        let token = rt
            .block_on(memoria_sync_server::auth::create_token(
                store.as_ref(),
                rng.as_ref(),
                &UserId::new("alice").unwrap(),
                0,
            ))
            .unwrap();
        let transport = Arc::new(Hooked {
            rt,
            router: router(state),
            hook: Mutex::new(None),
        });
        World {
            _tmp: tmp,
            root,
            transport,
            clock,
            token,
        }
    }

    /// Machines `a` and `b` with a note `x` of `body` written on `a` and synced to both.
    fn pair_sharing_x(&self, body: &str) -> (Machine, Machine) {
        let (mut a, mut b) = (self.machine("a"), self.machine("b"));
        a.add("x", body);
        a.sync();
        b.sync();
        (a, b)
    }

    fn machine(&self, name: &str) -> Machine {
        let home = self.root.join(name);
        Settings::update(&memoria_engine::sync::sync_dir(&home), |s| {
            s.enabled = Some(true);
            s.server = Some(SERVER.into());
        })
        .unwrap();
        let engine = Engine::open(OpenOptions {
            home: Some(home.clone()),
            project_dir: None,
            clock: self.clock.clone(),
            ..Default::default()
        })
        .unwrap();
        let client = SyncClient::new(self.transport.clone(), Token::new(&self.token));
        let syncer = Syncer::new(&home, SERVER, client, self.clock.clone());
        Machine {
            home,
            engine,
            syncer,
        }
    }

    /// Runs `hook` once the server has answered the next request whose path ends with `suffix`.
    fn after(&self, suffix: &'static str, hook: impl FnOnce() -> Delivery + Send + 'static) {
        *self.transport.hook.lock().unwrap() = Some((suffix, Box::new(hook)));
    }
}

impl Machine {
    fn sync(&mut self) {
        self.syncer
            .sync_scope(&mut self.engine, &Scope::User)
            .unwrap();
    }

    fn add(&mut self, id: &str, body: &str) {
        self.engine
            .add(NewNote {
                summary: format!("summary of {id}"),
                body: body.into(),
                scope: Some(ScopeChoice::User),
                id: Some(id.into()),
                ..Default::default()
            })
            .unwrap();
    }

    fn path(&self, id: &str) -> PathBuf {
        note_path(&self.home, id)
    }

    /// The note as the file says, if any.
    fn note(&self, id: &str) -> Option<Note> {
        let text = std::fs::read_to_string(self.path(id)).ok()?;
        Some(
            Note::parse(
                &text,
                FileContext {
                    relative_path: &format!("{id}.md"),
                },
            )
            .unwrap(),
        )
    }

    /// Rewrites the note's file as an editor (or an agent) would: outside the engine.
    fn rewrite(&self, id: &str, change: impl FnOnce(&mut Note)) {
        let mut n = self.note(id).expect("the note exists");
        change(&mut n);
        std::fs::write(self.path(id), n.serialize()).unwrap();
    }
}

fn note_path(home: &Path, id: &str) -> PathBuf {
    home.join("memory/user").join(format!("{id}.md"))
}

/// A note quarantined on one machine is quarantined on the other after a sync, and a later
/// edit of its body (on either machine) does not undo the quarantine.
#[test]
fn a_quarantine_syncs_and_survives_a_later_edit() {
    let w = World::new();
    let (mut a, mut b) = w.pair_sharing_x("one\n");
    assert_eq!(b.note("x").unwrap().trust, a.note("x").unwrap().trust);

    a.rewrite("x", |n| n.trust = Some(Trust::Quarantined));
    a.sync();
    b.sync();
    assert_eq!(
        b.note("x").unwrap().trust,
        Some(Trust::Quarantined),
        "the quarantine reached the other machine"
    );

    b.engine
        .edit(
            "x",
            None,
            NoteEdit {
                body: Some("one\ntwo\n".into()),
                ..Default::default()
            },
        )
        .unwrap();
    b.sync();
    a.sync();
    for m in [&a, &b] {
        let n = m.note("x").unwrap();
        assert_eq!(n.body, "one\ntwo\n");
        assert_eq!(
            n.trust,
            Some(Trust::Quarantined),
            "the edit kept the quarantine"
        );
    }
}

/// Quarantined on one machine while the body is edited on the other, both offline: the merge
/// keeps both, and no download then replaces the merged result with the cloud's copy.
#[test]
fn a_merged_quarantine_is_not_overwritten_by_the_clouds_copy() {
    let w = World::new();
    let (mut a, mut b) = w.pair_sharing_x("one\ntwo\nthree\n");
    a.rewrite("x", |n| {
        n.trust = Some(Trust::Quarantined);
        n.importance = Some(0.1);
    });
    b.engine
        .edit(
            "x",
            None,
            NoteEdit {
                body: Some("one\ntwo\nthree\nfour\n".into()),
                ..Default::default()
            },
        )
        .unwrap();
    b.sync();
    a.sync();
    let merged = a.note("x").unwrap();
    assert_eq!(merged.body, "one\ntwo\nthree\nfour\n");
    assert_eq!(merged.trust, Some(Trust::Quarantined));
    assert_eq!(merged.importance, Some(0.1));
    b.sync();
    a.sync();
    for m in [&a, &b] {
        let n = m.note("x").unwrap();
        assert_eq!(
            ContentHash::of_synced_note(&n),
            ContentHash::of_synced_note(&merged),
            "every machine holds the merged note"
        );
    }
}

/// A commitFirst batch the server accepted, while an editor saved the same note before the
/// batch was written here: the editor's save stays, and the next pass merges it with the
/// batch — the batch's change is not silently reverted.
#[test]
fn a_local_edit_racing_a_commit_first_batch_merges_with_it() {
    let w = World::new();
    let (mut a, mut b) = w.pair_sharing_x("a\nb\nc\n");
    let mut batch_note = a.engine.show("x", None).unwrap().note.unwrap();
    let planned = ContentHash::of_synced_note(&batch_note).as_str().to_owned();
    batch_note.body = "A from the batch\nb\nc\n".into();
    let path = a.path("x");
    w.after("/v1/memory/commit", move || {
        // The editor's autosave lands between the server's answer and the local write.
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, text.replace("c\n", "C from the editor\n")).unwrap();
        Delivery::Reply
    });
    let applied = a
        .syncer
        .commit_first(
            &mut a.engine,
            &Scope::User,
            &[BatchChange::Put {
                note: Box::new(batch_note),
                planned: Some(planned),
            }],
        )
        .unwrap();
    assert_eq!(applied, 1);
    assert_eq!(
        a.note("x").unwrap().body,
        "a\nb\nC from the editor\n",
        "the editor's save is kept"
    );
    a.sync();
    b.sync();
    for m in [&a, &b] {
        assert_eq!(
            m.note("x").unwrap().body,
            "A from the batch\nb\nC from the editor\n",
            "both the batch and the editor's change"
        );
    }
}

/// A commit the server applied whose reply never arrived, then another machine deletes the
/// note: the first machine's next pass learns its commit applied (the commit's receipt), so
/// the delete merges against the right base and stays a delete.
#[test]
fn a_lost_commit_reply_then_a_delete_elsewhere_stays_deleted() {
    let w = World::new();
    let (mut a, mut b) = w.pair_sharing_x("one\n");
    a.rewrite("x", |n| n.body = "one\ntwo\n".into());
    w.after("/v1/memory/commit", || Delivery::Lost);
    assert!(
        a.syncer.sync_scope(&mut a.engine, &Scope::User).is_err(),
        "the pass cannot know its commit applied"
    );
    b.sync();
    assert_eq!(b.note("x").unwrap().body, "one\ntwo\n");
    b.engine.forget("x", Some(&Scope::User)).unwrap();
    b.sync();
    a.sync();
    b.sync();
    assert!(
        a.note("x").is_none(),
        "the delete reached the machine whose reply was lost"
    );
    assert!(b.note("x").is_none(), "and was not undone by it");
}

/// The same with a revert: after the lost reply, another machine puts the note back as it
/// was; the revert is the newest change and stays.
#[test]
fn a_lost_commit_reply_then_a_revert_elsewhere_stays_reverted() {
    let w = World::new();
    let (mut a, mut b) = w.pair_sharing_x("one\n");
    a.rewrite("x", |n| n.body = "one\ntwo\n".into());
    w.after("/v1/memory/commit", || Delivery::Lost);
    assert!(a.syncer.sync_scope(&mut a.engine, &Scope::User).is_err());
    b.sync();
    b.rewrite("x", |n| n.body = "one\n".into());
    b.sync();
    a.sync();
    b.sync();
    for m in [&a, &b] {
        assert_eq!(m.note("x").unwrap().body, "one\n", "the revert stands");
    }
}

/// A pass that found the cloud unchanged, uploaded in several commits and stopped between
/// two of them (cancelled; a killed process is the same) leaves a state the next pass can
/// build on: the notes it did not touch are neither deleted here nor in the cloud.
#[test]
fn a_pass_stopped_between_commits_after_an_unchanged_reply_deletes_nothing() {
    let w = World::with_settings(&memoria_sync_server::Settings {
        quotas: memoria_shared::protocol::Quotas {
            changes_per_commit: 2,
            ..Default::default()
        },
        ..Default::default()
    });
    let (mut a, mut b) = (w.machine("a"), w.machine("b"));
    let kept = ["k0", "k1", "k2", "k3", "k4"];
    for id in kept {
        a.add(id, &format!("{id} stays\n"));
    }
    a.sync();
    b.sync();
    // Three new notes: two commits, against a cloud that has not moved since the last pass.
    for id in ["n0", "n1", "n2"] {
        a.add(id, &format!("{id} is new\n"));
    }
    let stop = a.syncer.cancel_flag();
    let flag = stop.clone();
    w.after("/v1/memory/commit", move || {
        flag.store(true, std::sync::atomic::Ordering::SeqCst);
        Delivery::Reply
    });
    let r = a.syncer.sync_scope(&mut a.engine, &Scope::User);
    assert!(
        r.is_err(),
        "the pass stopped before its second commit: {r:?}"
    );
    stop.store(false, std::sync::atomic::Ordering::SeqCst);
    a.sync();
    b.sync();
    a.sync();
    for m in [&a, &b] {
        for id in kept.iter().chain(&["n0", "n1", "n2"]) {
            assert!(
                m.note(id).is_some(),
                "{id} is still on {}",
                m.home.display()
            );
        }
    }
}

/// splitmix64, to pick operations.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) % n
    }
}

/// One seed: three machines make metadata-only edits (trust, importance, status, relations)
/// and body edits, sync in random order with commit replies lost and the server's clock jumping
/// back and forth; at the end every machine holds the same notes, metadata included.
fn metadata_soak(seed: u64) {
    use memoria_shared::note::{Relation, RelationKind, Status};
    let w = World::new();
    let mut rng = Rng(seed);
    let mut ms: Vec<Machine> = ["a", "b", "c"].iter().map(|n| w.machine(n)).collect();
    for id in ["n0", "n1", "n2"] {
        ms[0].add(id, "l1\nl2\nl3\n");
    }
    for m in &mut ms {
        m.sync();
    }
    let start = 1_800_000_000_000;
    for _ in 0..30 {
        let m = &mut ms[rng.below(3) as usize];
        let id = ["n0", "n1", "n2"][rng.below(3) as usize];
        let pick = rng.below(6);
        let value = rng.below(4);
        if m.note(id).is_some() {
            m.rewrite(id, |n| match pick {
                0 => {
                    n.trust = [
                        Trust::Quarantined,
                        Trust::Peer,
                        Trust::Owner,
                        Trust::Derived,
                    ]
                    .get(value as usize)
                    .copied()
                }
                1 => n.importance = Some(value as f64 / 4.0),
                2 => {
                    n.status = [Status::Working, Status::Consolidated, Status::Archived]
                        .get(value as usize)
                        .copied()
                }
                3 => n.relations.push(Relation {
                    target: format!("n{value}"),
                    kind: RelationKind::Relates,
                }),
                _ => n.body = format!("l1\nl2 {value}\nl3\n"),
            });
        }
        // The server's clock jumps (a wall clock set back or forward).
        w.clock
            .set(start + rng.below(200) as i64 * 60_000 - 100 * 60_000);
        if rng.below(4) == 0 {
            w.after("/v1/memory/commit", || Delivery::Lost);
        }
        let _ = m.syncer.sync_scope(&mut m.engine, &Scope::User);
        *w.transport.hook.lock().unwrap() = None;
    }
    // Quiescence: resolve any conflict by keeping this machine's version, and sync until a
    // whole round changes nothing (each "keep mine" may conflict again on the next machine).
    let mut calm = false;
    for _ in 0..12 {
        calm = true;
        for m in &mut ms {
            for c in memoria_engine::sync::list_conflicts(&m.engine).unwrap() {
                calm = false;
                memoria_engine::sync::resolve(
                    &mut m.engine,
                    &c.id,
                    Some(&Scope::User),
                    memoria_engine::sync::Keep::Local,
                )
                .unwrap();
            }
            let r = m.syncer.sync_scope(&mut m.engine, &Scope::User).unwrap();
            calm &= !r.changed();
        }
        if calm {
            break;
        }
    }
    assert!(calm, "seed {seed}: still changing after 12 rounds");
    let replica = |m: &Machine| -> Vec<(String, String)> {
        ["n0", "n1", "n2"]
            .iter()
            .filter_map(|id| {
                m.note(id)
                    .map(|n| (id.to_string(), ContentHash::of_synced_note(&n).to_string()))
            })
            .collect()
    };
    let first = replica(&ms[0]);
    for m in &ms[1..] {
        if replica(m) != first {
            let files: Vec<Vec<Option<String>>> = ms
                .iter()
                .map(|m| {
                    ["n0", "n1", "n2"]
                        .iter()
                        .map(|id| std::fs::read_to_string(m.path(id)).ok())
                        .collect()
                })
                .collect();
            let reports: Vec<_> = ms
                .iter_mut()
                .map(|m| m.syncer.sync_scope(&mut m.engine, &Scope::User))
                .collect();
            let states: Vec<_> = ms
                .iter()
                .map(|m| {
                    std::fs::read_to_string(
                        memoria_engine::sync::sync_dir(&m.home).join("scopes/user/state.json"),
                    )
                    .unwrap_or_default()
                })
                .collect();
            panic!("seed {seed}: replicas differ: {files:#?} {reports:#?} {states:#?}");
        }
    }
}

/// `MEMORIA_SYNC_SEEDS=N` runs seeds 0..N (the normal run: 20) or `A..B` a slice;
/// `MEMORIA_SYNC_SEED=S` one seed.
#[test]
fn metadata_edits_lost_replies_and_clock_jumps_converge() {
    let seeds: Vec<u64> = match std::env::var("MEMORIA_SYNC_SEED") {
        Ok(s) => vec![s.parse().unwrap()],
        Err(_) => crate::sync_convergence::seed_range("MEMORIA_SYNC_SEEDS", 20).collect(),
    };
    for seed in seeds {
        metadata_soak(seed);
    }
}
