//! Another project's notes never reach a folder that only claims to be that project: through a
//! `MEMORY` link, or through a copied `.memoria/project.json`. Each row is checked on every way
//! out of the engine this folder could use — search, the recall block, export — and the engine
//! itself (which the hook, the MCP server and sync all open) refuses to open before pairing.

use std::path::{Path, PathBuf};

use memoria_engine::{Engine, Error, NewNote, OpenOptions, Project};

const SECRET: &str = "zanzibar acquisition";

struct World {
    _tmp: tempfile::TempDir,
    root: PathBuf,
}

impl World {
    fn new() -> World {
        let tmp = tempfile::tempdir().unwrap();
        World {
            root: tmp.path().canonicalize().unwrap(),
            _tmp: tmp,
        }
    }

    fn open(&self, project: &Path) -> memoria_engine::Result<Engine> {
        Engine::open(OpenOptions {
            project_dir: Some(project.to_path_buf()),
            ..OpenOptions::without_model(self.root.join("home"))
        })
    }

    /// A project holding one private note.
    fn victim(&self) -> PathBuf {
        let dir = self.root.join("victim");
        Project::init(&dir, None).unwrap();
        self.open(&dir)
            .unwrap()
            .add(NewNote {
                summary: "victim roadmap".into(),
                body: SECRET.into(),
                id: Some("roadmap".into()),
                ..Default::default()
            })
            .unwrap();
        dir
    }
}

/// Nothing of the victim's note reaches search, the recall block or an export.
fn sees_nothing_of_the_victim(w: &World, engine: &mut Engine) {
    let hits = engine.hybrid_search(SECRET, Default::default()).unwrap();
    assert!(
        hits.iter().all(|h| h.id != "roadmap"),
        "search reached it: {hits:?}"
    );
    let block = engine.recall_block(SECRET, None, None).unwrap();
    assert!(!block.text.contains("zanzibar"), "{}", block.text);
    static EXPORTS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = EXPORTS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let out = w.root.join(format!("export-{n}"));
    memoria_engine::import::export(engine, &out).unwrap();
    let mut stack = vec![out];
    while let Some(d) = stack.pop() {
        // An export of nothing creates no folder.
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                assert!(
                    !std::fs::read_to_string(&p).unwrap().contains("zanzibar"),
                    "export holds it: {}",
                    p.display()
                );
            }
        }
    }
}

#[test]
fn a_memory_link_to_another_project_opens_nothing() {
    let w = World::new();
    let victim = w.victim();
    let linker = w.root.join("linker");
    Project::init(&linker, None).unwrap();
    std::fs::remove_dir(linker.join("MEMORY")).unwrap();
    std::os::unix::fs::symlink(victim.join("MEMORY"), linker.join("MEMORY")).unwrap();
    let err = w.open(&linker).unwrap_err();
    assert!(matches!(err, Error::LinkOutsideProject { .. }), "{err}");
    // The user's own notes stay reachable from elsewhere, and never the victim's.
    let mut elsewhere = Engine::open(OpenOptions::without_model(w.root.join("home"))).unwrap();
    sees_nothing_of_the_victim(&w, &mut elsewhere);
    assert!(victim.join("MEMORY/roadmap.md").exists());
}

#[test]
fn a_claimed_project_id_opens_nothing_and_after_pairing_sees_only_its_own_folder() {
    let w = World::new();
    let victim = w.victim();
    let claimer = w.root.join("claimer");
    std::fs::create_dir_all(claimer.join(".memoria")).unwrap();
    std::fs::copy(
        victim.join(".memoria/project.json"),
        claimer.join(".memoria/project.json"),
    )
    .unwrap();
    let err = w.open(&claimer).unwrap_err();
    assert!(matches!(err, Error::ProjectClaimed { .. }), "{err}");
    let home = memoria_engine::home::Home::resolve(Some(&w.root.join("home"))).unwrap();
    memoria_engine::project::pair(&home, &claimer).unwrap();
    let mut paired = w.open(&claimer).unwrap();
    sees_nothing_of_the_victim(&w, &mut paired);
    // The victim still sees its note: the pairing took nothing from it.
    let v = w.open(&victim).unwrap();
    assert_eq!(
        v.hybrid_search(SECRET, Default::default()).unwrap()[0].id,
        "roadmap"
    );
}

/// The other doors, through the real binary: the agent hook and the MCP server started in a
/// folder that links to or claims another project give nothing of it. The hook never blocks a
/// prompt (it answers with nothing); the MCP server refuses to start, naming why.
#[test]
fn the_hook_and_the_mcp_server_in_a_linking_or_claiming_folder_give_nothing() {
    use std::io::Write;
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    let w = World::new();
    let victim = w.victim();
    let linker = w.root.join("linker");
    Project::init(&linker, None).unwrap();
    std::fs::remove_dir(linker.join("MEMORY")).unwrap();
    std::os::unix::fs::symlink(victim.join("MEMORY"), linker.join("MEMORY")).unwrap();
    let claimer = w.root.join("claimer");
    std::fs::create_dir_all(claimer.join(".memoria")).unwrap();
    std::fs::copy(
        victim.join(".memoria/project.json"),
        claimer.join(".memoria/project.json"),
    )
    .unwrap();
    let run = |dir: &Path, args: &[&str], stdin: &str| {
        let mut child = Command::new(memoria_tests::workspace_bin("memoria"))
            .env("MEMORIA_HOME", w.root.join("home"))
            .env("MEMORIA_MODEL_DIR", w.root.join("no-model"))
            .current_dir(dir)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(stdin.as_bytes())
            .unwrap();
        let start = Instant::now();
        while child.try_wait().unwrap().is_none() {
            if start.elapsed() > Duration::from_secs(30) {
                child.kill().unwrap();
                panic!("memoria {args:?} in {} did not end", dir.display());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let out = child.wait_with_output().unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    for dir in [&linker, &claimer] {
        for event in [
            serde_json::json!({"hook_event_name": "SessionStart", "cwd": dir, "session_id": "s"}),
            serde_json::json!({
                "hook_event_name": "UserPromptSubmit",
                "prompt": format!("what is the {SECRET}? see the victim roadmap"),
                "cwd": dir,
                "session_id": "s",
            }),
        ] {
            let (ok, out, err) = run(dir, &["hook", "claude-code"], &event.to_string());
            assert!(ok, "the hook never blocks a prompt: {err}");
            assert!(
                !out.contains("zanzibar") && !out.contains("roadmap"),
                "{}: {out}",
                dir.display()
            );
        }
        // The MCP server is asked for the tool list and a search; it must refuse to start.
        let requests = [
            serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"}}}),
            serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
                "name": "memory_search", "arguments": {"query": SECRET}}}),
        ]
        .map(|r| r.to_string())
        .join("\n");
        let (ok, out, err) = run(dir, &["mcp"], &format!("{requests}\n"));
        assert!(!ok, "the MCP server started in {}: {out}", dir.display());
        assert!(
            !out.contains("zanzibar") && !err.contains("zanzibar"),
            "{out}{err}"
        );
        assert!(
            err.contains("claims project") || err.contains("MEMORY"),
            "the refusal says why: {err}"
        );
    }
    assert!(victim.join("MEMORY/roadmap.md").exists());
}
