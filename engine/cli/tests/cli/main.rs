//! End-to-end tests of the `memoria` binary: exit codes, JSON output, the watcher, crash
//! safety under kill -9, many processes at once, and Obsidian compatibility (python-frontmatter).

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use memoria_shared::note::{FileContext, Note};
use serde_json::Value;

mod conversations;
mod docs;

struct Memoria {
    _tmp: tempfile::TempDir,
    home: PathBuf,
    cwd: PathBuf,
}

impl Memoria {
    fn new() -> Memoria {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        let cwd = root.join("work");
        std::fs::create_dir_all(&cwd).unwrap();
        Memoria {
            home: root.join("home"),
            cwd,
            _tmp: tmp,
        }
    }

    fn command(&self) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_memoria"));
        c.env("MEMORIA_HOME", &self.home).current_dir(&self.cwd);
        c
    }

    fn run(&self, args: &[&str]) -> Output {
        self.command().args(args).output().unwrap()
    }

    /// Runs and expects success; returns stdout.
    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "memoria {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    fn json(&self, args: &[&str]) -> Value {
        let mut all = vec!["--json"];
        all.extend_from_slice(args);
        serde_json::from_str(&self.ok(&all)).unwrap()
    }

    fn user_dir(&self) -> PathBuf {
        self.home.join("memory/user")
    }

    /// Runs `memoria hook claude-code` with `input` on its standard input, as Claude Code does.
    fn hook(&self, input: &str) -> Output {
        let mut child = self
            .command()
            .args(["hook", "claude-code"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
        child.wait_with_output().unwrap()
    }

    /// Searches for `word` (BM25) until some note has it, for at most `secs` seconds (else
    /// fails saying `what` did not happen); how many notes have it then.
    fn wait_until_found(&self, word: &str, secs: u64, what: &str) -> usize {
        let start = Instant::now();
        loop {
            let hits = self.json(&["search", word, "--mode", "bm25"]);
            let n = hits.as_array().unwrap().len();
            if n > 0 {
                return n;
            }
            assert!(start.elapsed() < Duration::from_secs(secs), "{what}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

fn kill9(child: &mut Child) {
    // Child::kill sends SIGKILL on Unix: no destructor, no flush, no cleanup runs.
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn exit_codes_and_errors() {
    let m = Memoria::new();
    assert_eq!(m.run(&[]).status.code(), Some(2));
    assert_eq!(
        m.run(&["add"]).status.code(),
        Some(2),
        "missing --summary is a usage error"
    );
    assert_eq!(m.run(&["frobnicate"]).status.code(), Some(2));
    let out = m.run(&["show", "nope"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("not found") && err.contains("memoria list"),
        "{err}"
    );
    let out = m.run(&["--json", "show", "Bad/Id"]);
    assert_eq!(out.status.code(), Some(1));
    let v: Value = serde_json::from_slice(&out.stderr).unwrap();
    assert!(
        v["error"]["message"].as_str().unwrap().contains("invalid"),
        "{v}"
    );
    let out = m.run(&["add", "--summary", "s", "--scope", "project"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("memoria init"));
    let out = m.run(&["add", "--summary", "s", "--type", "idea"]);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("user, feedback, project, reference, domain")
    );
    assert_eq!(m.run(&["forget", "x"]).status.code(), Some(1));
    let out = m.run(&[
        "add",
        "--summary",
        "token",
        "--body",
        "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("github-token") && !err.contains("ghp_"),
        "{err}"
    );
}

#[test]
fn add_show_edit_list_forget_restore_through_the_cli() {
    let m = Memoria::new();
    m.ok(&["init"]);
    let mut child = m
        .command()
        .args([
            "add",
            "--summary",
            "Deploys go out on Tuesdays",
            "--type",
            "feedback",
            "--tags",
            "ops,release",
            "--body",
            "-",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"Never on Fridays.\nSee [[release-train]].\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let id = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    assert!(id.starts_with("deploys-go-out-on-tuesdays-"), "{id}");
    let shown = m.json(&["show", &id]);
    assert_eq!(shown["body"], "Never on Fridays.\nSee [[release-train]].\n");
    assert_eq!(shown["tags"], serde_json::json!(["ops", "release"]));
    assert_eq!(shown["links"], serde_json::json!(["release-train"]));
    m.ok(&[
        "edit",
        &id,
        "--tags",
        "ops",
        "--summary",
        "Deploys go out on Wednesdays",
    ]);
    let listed = m.json(&["list", "--tag", "ops"]);
    assert_eq!(listed[0]["summary"], "Deploys go out on Wednesdays");
    assert_eq!(
        m.json(&["list", "--tag", "release"])
            .as_array()
            .unwrap()
            .len(),
        0
    );
    let hits = m.json(&["search", "wednesdays", "--mode", "bm25"]);
    assert_eq!(hits[0]["id"], id.as_str());
    let forgotten = m.json(&["forget", &id, "--confirm"]);
    assert_eq!(m.json(&["list"]).as_array().unwrap().len(), 0);
    let backup_id = forgotten["backupId"].as_str().unwrap();
    assert_eq!(m.json(&["backups"])[0]["reason"], "forget");
    m.ok(&["restore", backup_id]);
    assert_eq!(
        m.json(&["show", &id])["summary"],
        "Deploys go out on Wednesdays"
    );
    let doctor = m.json(&["doctor"]);
    assert_eq!(doctor["ok"], true, "{doctor}");
}

#[test]
fn project_scope_from_the_working_directory() {
    let m = Memoria::new();
    let proj = m.cwd.join("app");
    m.ok(&["init", proj.to_str().unwrap(), "--type", "web"]);
    let deep = proj.join("src/deep");
    std::fs::create_dir_all(&deep).unwrap();
    let out = m
        .command()
        .current_dir(&deep)
        .args(["--json", "add", "--summary", "uses vite"])
        .output()
        .unwrap();
    let written: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(written["scope"].as_str().unwrap().starts_with("project:"));
    assert!(
        written["path"]
            .as_str()
            .unwrap()
            .starts_with(proj.join("MEMORY").to_str().unwrap())
    );
    // From outside the project the note is invisible; --project makes it visible again.
    assert_eq!(m.json(&["list"]).as_array().unwrap().len(), 0);
    assert_eq!(
        m.json(&["--project", deep.to_str().unwrap(), "list"])
            .as_array()
            .unwrap()
            .len(),
        1
    );
    assert_eq!(
        m.run(&["--project", m.cwd.to_str().unwrap(), "list"])
            .status
            .code(),
        Some(1)
    );
}

#[test]
fn watcher_makes_hand_edits_searchable_within_two_seconds() {
    let m = Memoria::new();
    m.ok(&["init"]);
    let id = m
        .ok(&[
            "add",
            "--summary",
            "fruit note",
            "--id",
            "fruit",
            "--body",
            "apple",
        ])
        .trim()
        .to_owned();
    let path = m.user_dir().join(format!("{id}.md"));
    let mut watcher = m
        .command()
        .args(["--json", "watch"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(watcher.stdout.take().unwrap()).lines();
    loop {
        let line = lines
            .next()
            .expect("watcher exited before it was ready")
            .unwrap();
        if line.contains("\"ready\"") {
            break;
        }
    }
    assert!(
        m.json(&["doctor"])["scopes"][0]["watched"]
            .as_bool()
            .unwrap()
    );

    // While the watcher holds the scope, CLI calls skip their own start-up scan: only the
    // watcher can make this edit visible.
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, text.replace("apple", "kumquat")).unwrap();
    let found = m.wait_until_found(
        "kumquat",
        2,
        "the watcher did not index the edit within 2 s",
    );
    assert_eq!(found, 1);
    std::fs::write(
        m.user_dir().join("new.md"),
        "# Created by hand\npersimmon\n",
    )
    .unwrap();
    m.wait_until_found(
        "persimmon",
        2,
        "the watcher did not index the new file within 2 s",
    );
    kill9(&mut watcher);

    // Without a watcher, the next start repairs the index.
    std::fs::write(&path, text.replace("apple", "durian")).unwrap();
    assert_eq!(
        m.json(&["search", "durian", "--mode", "bm25"])[0]["id"],
        "fruit"
    );
    assert!(
        m.json(&["search", "kumquat", "--mode", "bm25"])
            .as_array()
            .unwrap()
            .is_empty()
    );
    assert!(
        !m.json(&["doctor"])["scopes"][0]["watched"]
            .as_bool()
            .unwrap()
    );
}

fn source_body(i: usize, version: char) -> String {
    let line = format!("file {i} version {version} ");
    format!("{}\n", line.repeat(2500))
}

#[test]
fn kill_9_during_a_burst_of_writes_leaves_no_torn_note() {
    let m = Memoria::new();
    m.ok(&["init"]);
    let src = m.cwd.join("src");
    std::fs::create_dir_all(&src).unwrap();
    let files = 120;
    let mut interrupted = 0;
    let delays = [40u64, 90, 160, 250, 400, 600];
    for (round, delay) in delays.iter().enumerate() {
        let version = if round % 2 == 0 { 'A' } else { 'B' };
        for i in 0..files {
            let text = format!(
                "---\n{{\"id\":\"n{i}\",\"summary\":\"note {i}\"}}\n---\n{}",
                source_body(i, version)
            );
            std::fs::write(src.join(format!("n{i}.md")), text).unwrap();
        }
        let mut child = m
            .command()
            .args(["import", src.to_str().unwrap()])
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(*delay));
        if child.try_wait().unwrap().is_none() {
            interrupted += 1;
        }
        kill9(&mut child);
        for entry in std::fs::read_dir(m.user_dir()).unwrap() {
            let entry = entry.unwrap();
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') {
                continue; // a temp file of the interrupted write: never a note
            }
            let text = std::fs::read_to_string(entry.path()).unwrap();
            let note = Note::parse(
                &text,
                FileContext {
                    relative_path: &name,
                },
            )
            .unwrap_or_else(|e| panic!("round {round}: {name} is torn: {e}"));
            let i: usize = note.id.as_str()[1..].parse().unwrap();
            assert!(
                note.body == source_body(i, 'A') || note.body == source_body(i, 'B'),
                "round {round}: {name} holds a partial body ({} bytes)",
                note.body.len()
            );
        }
    }
    assert!(
        interrupted >= 2,
        "the kills never landed mid-import ({interrupted}); the test proved nothing"
    );
    // Finish the job: the vault converges and nothing is broken.
    m.ok(&["import", src.to_str().unwrap()]);
    let doctor = m.json(&["doctor"]);
    assert_eq!(doctor["ok"], true, "{doctor}");
    assert_eq!(doctor["scopes"][0]["notes"], files);
}

#[test]
fn many_processes_write_at_once() {
    let m = Memoria::new();
    m.ok(&["init"]);
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let home = m.home.clone();
            let cwd = m.cwd.clone();
            std::thread::spawn(move || {
                for i in 0..12 {
                    let out = Command::new(env!("CARGO_BIN_EXE_memoria"))
                        .env("MEMORIA_HOME", &home)
                        .current_dir(&cwd)
                        .args([
                            "add",
                            "--summary",
                            &format!("writer {t} note {i}"),
                            "--body",
                            "concurrent",
                        ])
                        .output()
                        .unwrap();
                    assert!(
                        out.status.success(),
                        "{}",
                        String::from_utf8_lossy(&out.stderr)
                    );
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(m.json(&["list"]).as_array().unwrap().len(), 48);
    assert_eq!(
        m.json(&["search", "concurrent", "--limit", "100", "--mode", "bm25"])
            .as_array()
            .unwrap()
            .len(),
        48
    );
    assert_eq!(m.json(&["doctor"])["ok"], true);
}

fn test_python() -> PathBuf {
    if let Some(p) = std::env::var_os("MEMORIA_TEST_PYTHON") {
        return PathBuf::from(p);
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default();
    let default = home.join(".cache/memoria/tools/py-venv/bin/python");
    assert!(
        default.exists(),
        "python-frontmatter is not installed: run scripts/install-test-tools.sh (or set MEMORIA_TEST_PYTHON)"
    );
    default
}

#[test]
fn vault_parses_with_python_frontmatter() {
    let python = test_python();
    let m = Memoria::new();
    m.ok(&["init"]);
    m.ok(&[
        "add",
        "--summary",
        "Plain note",
        "--id",
        "plain",
        "--body",
        "Hello",
    ]);
    m.ok(&[
        "add",
        "--summary",
        "定价卡片: \"quotes\" & colons",
        "--id",
        "unicode",
        "--type",
        "reference",
        "--tags",
        "中文,español",
        "--body",
        "Línea\n---\nnot a fence\n",
    ]);
    m.ok(&["add", "--summary", "Empty body", "--id", "empty"]);
    let src = m.cwd.join("obsidian");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(
        src.join("yaml.md"),
        "---\nid: yaml\nsummary: From YAML\naliases: [Y]\ncssclass: wide\n---\nbody\n",
    )
    .unwrap();
    m.ok(&["import", src.to_str().unwrap()]);
    m.ok(&["edit", "yaml", "--body", "rewritten by memoria"]);

    let script = r#"
import json, sys, pathlib, frontmatter
out = {}
for p in sorted(pathlib.Path(sys.argv[1]).glob("*.md")):
    post = frontmatter.load(p)
    out[p.stem] = {"meta": post.metadata, "content": post.content}
print(json.dumps(out))
"#;
    let out = Command::new(&python)
        .arg("-c")
        .arg(script)
        .arg(m.user_dir())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "python-frontmatter failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let parsed: Value = serde_json::from_slice(&out.stdout).unwrap();
    for id in ["plain", "unicode", "empty", "yaml"] {
        let ours = m.json(&["show", id]);
        let theirs = &parsed[id];
        assert_eq!(theirs["meta"]["id"], ours["id"], "{id}");
        assert_eq!(theirs["meta"]["summary"], ours["summary"], "{id}");
        assert_eq!(theirs["meta"]["tags"], ours["tags"], "{id}");
        assert_eq!(
            theirs["content"].as_str().unwrap().trim(),
            ours["body"].as_str().unwrap().trim(),
            "{id}"
        );
    }
    assert_eq!(
        parsed["yaml"]["meta"]["aliases"],
        serde_json::json!(["Y"]),
        "unknown keys survive a rewrite"
    );
    assert_eq!(parsed["yaml"]["meta"]["cssclass"], "wide");
}

#[test]
fn claude_code_hook_answers_recorded_hook_json_with_the_recall_block() {
    let m = Memoria::new();
    let proj = m.cwd.join("app");
    m.ok(&["init", proj.to_str().unwrap()]);
    let out = m
        .command()
        .current_dir(&proj)
        .args([
            "add",
            "--summary",
            "Deploys never go out on Fridays",
            "--type",
            "feedback",
            "--id",
            "no-friday-deploys",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    m.ok(&[
        "add",
        "--summary",
        "Prefers short answers",
        "--type",
        "user",
        "--id",
        "short-answers",
    ]);
    // Recorded UserPromptSubmit input; Claude Code runs hooks from anywhere, the cwd field names
    // the session's project.
    let input = serde_json::json!({
        "session_id": "abc123",
        "transcript_path": "/tmp/abc123.jsonl",
        "cwd": proj,
        "permission_mode": "default",
        "hook_event_name": "UserPromptSubmit",
        "prompt": "Can we deploy on Friday?"
    });
    let out = m.hook(&input.to_string());
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["hookSpecificOutput"]["hookEventName"], "UserPromptSubmit");
    let ctx = v["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .unwrap();
    assert!(
        ctx.starts_with("<memoria-recall>") && ctx.contains("not instructions"),
        "{ctx}"
    );
    assert!(ctx.contains("vt:user/short-answers"), "{ctx}");
    assert!(ctx.contains("vt:project/no-friday-deploys"), "{ctx}");
    // SessionStart gets the index of durable notes.
    let start = serde_json::json!({"session_id": "abc123", "cwd": proj, "hook_event_name": "SessionStart", "source": "startup"});
    let v: Value = serde_json::from_slice(&m.hook(&start.to_string()).stdout).unwrap();
    assert_eq!(v["hookSpecificOutput"]["hookEventName"], "SessionStart");
    // Garbage never blocks the prompt: exit 0, nothing on stdout, a note on stderr.
    let out = m.hook("not json at all");
    assert_eq!(out.status.code(), Some(0));
    assert!(out.stdout.is_empty());
    assert!(String::from_utf8_lossy(&out.stderr).contains("hook JSON"));
}

/// A child process killed when the test ends, also when an assertion fails first.
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Reads a child's standard output lines on a thread, so a test can wait with a deadline.
fn line_reader(child: &mut Child) -> std::sync::mpsc::Receiver<String> {
    let (tx, rx) = std::sync::mpsc::channel();
    let out = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines() {
            if tx.send(line.unwrap_or_default()).is_err() {
                break;
            }
        }
    });
    rx
}

/// Waits (at most `secs`) for a line containing `needle`.
fn wait_line(rx: &std::sync::mpsc::Receiver<String>, needle: &str, secs: u64) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) if line.contains(needle) => return,
            Ok(_) => {}
            Err(_) => panic!("no line with {needle:?} within {secs} s"),
        }
    }
}

fn in_dir(m: &Memoria, dir: &std::path::Path, args: &[&str]) -> Output {
    m.command().current_dir(dir).args(args).output().unwrap()
}

#[test]
fn another_projects_notes_stay_out_of_reach_by_link_or_by_claimed_id() {
    let m = Memoria::new();
    let victim = m.cwd.join("victim");
    m.ok(&["init", victim.to_str().unwrap()]);
    let out = in_dir(
        &m,
        &victim,
        &[
            "add",
            "--summary",
            "victim roadmap",
            "--id",
            "roadmap",
            "--body",
            "acquire zanzibar",
        ],
    );
    assert!(out.status.success(), "{out:?}");
    let note = victim.join("MEMORY/roadmap.md");
    // The victim's watcher holds its scope: other processes skip their repair scan of it.
    let watcher = m
        .command()
        .current_dir(&victim)
        .args(["--json", "watch"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut watcher = KillOnDrop(watcher);
    let lines = line_reader(&mut watcher.0);
    wait_line(&lines, "\"ready\"", 30);

    // A folder whose project.json claims the victim's id.
    let claimer = m.cwd.join("claimer");
    std::fs::create_dir_all(claimer.join(".memoria")).unwrap();
    std::fs::copy(
        victim.join(".memoria/project.json"),
        claimer.join(".memoria/project.json"),
    )
    .unwrap();
    for args in [
        &["list"][..],
        &["search", "zanzibar", "--mode", "bm25"],
        &["show", "roadmap"],
        &["forget", "roadmap", "--confirm"],
    ] {
        let out = in_dir(&m, &claimer, args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(
            err.contains("memoria projects pair")
                && !String::from_utf8_lossy(&out.stdout).contains("zanzibar"),
            "{args:?}: {err}"
        );
    }
    let bound = m.json(&["projects"]);
    assert_eq!(bound.as_array().unwrap().len(), 1, "{bound}");
    assert_eq!(bound[0]["root"], victim.to_str().unwrap());
    // Confirmed as a pairing, the folder sees only its own MEMORY folder.
    let paired = m.json(&["projects", "pair", claimer.to_str().unwrap()]);
    assert!(paired["scope"].as_str().unwrap().contains('@'), "{paired}");
    let out = in_dir(&m, &claimer, &["--json", "list"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "[]");
    let out = in_dir(
        &m,
        &claimer,
        &["--json", "search", "zanzibar", "--mode", "bm25"],
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "[]", "{out:?}");

    // A project whose MEMORY is a link to the victim's.
    let linker = m.cwd.join("linker");
    m.ok(&["init", linker.to_str().unwrap()]);
    std::fs::remove_dir(linker.join("MEMORY")).unwrap();
    std::os::unix::fs::symlink(victim.join("MEMORY"), linker.join("MEMORY")).unwrap();
    for args in [&["list"][..], &["forget", "roadmap", "--confirm"]] {
        let out = in_dir(&m, &linker, args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains("outside the project folder"), "{err}");
    }
    assert!(note.exists(), "nobody deleted the victim's note");
    drop(watcher);
}

#[test]
fn the_watcher_reattaches_to_a_scope_folder_deleted_and_created_again() {
    let m = Memoria::new();
    m.ok(&["init"]);
    m.ok(&[
        "add",
        "--summary",
        "fruit note",
        "--id",
        "fruit",
        "--body",
        "apple",
    ]);
    let watcher = m
        .command()
        .args(["--json", "watch"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut watcher = KillOnDrop(watcher);
    let lines = line_reader(&mut watcher.0);
    wait_line(&lines, "\"ready\"", 30);
    std::fs::remove_dir_all(m.user_dir()).unwrap();
    wait_line(&lines, "\"removed\":1", 5);
    std::fs::create_dir(m.user_dir()).unwrap();
    std::fs::write(
        m.user_dir().join("quokka.md"),
        "# Written by hand\nquokka\n",
    )
    .unwrap();
    // The watcher still holds the scope, so only it can make the new file visible.
    m.wait_until_found("quokka", 3, "the watcher lost the re-created folder");
    // And it keeps following edits there.
    std::fs::write(
        m.user_dir().join("quokka.md"),
        "# Written by hand\nwallaby\n",
    )
    .unwrap();
    m.wait_until_found("wallaby", 3, "edit missed");
    drop(watcher);
}

/// Every file under `dir` whose bytes contain `needle`.
fn files_containing(dir: &std::path::Path, needle: &[u8]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if std::fs::read(&p)
                .unwrap()
                .windows(needle.len())
                .any(|w| w == needle)
            {
                out.push(p);
            }
        }
    }
    out
}

#[test]
fn forget_purge_leaves_no_copy_anywhere_in_the_home() {
    let m = Memoria::new();
    m.ok(&["init"]);
    m.ok(&[
        "add",
        "--summary",
        "keeps the index busy",
        "--body",
        "other text",
    ]);
    m.ok(&[
        "add",
        "--summary",
        "meeting with zebraorchid",
        "--id",
        "purge-me",
        "--body",
        "the door code is marzipanquokka",
    ]);
    // A backup of it, an edit, and the search index all hold copies.
    let meta = m.json(&["forget", "purge-me", "--confirm"]);
    m.ok(&["restore", meta["backupId"].as_str().unwrap()]);
    m.ok(&[
        "edit",
        "purge-me",
        "--body",
        "the door code is marzipanquokka, twice",
    ]);
    assert_eq!(
        m.json(&["search", "marzipanquokka", "--mode", "bm25"])[0]["id"],
        "purge-me"
    );
    for needle in ["marzipanquokka", "zebraorchid"] {
        let found = files_containing(&m.home, needle.as_bytes());
        assert!(found.len() >= 3, "the copies exist before: {found:?}");
    }
    let out = m.run(&["forget", "purge-me", "--purge"]);
    assert_eq!(out.status.code(), Some(1), "--purge needs --confirm too");
    let purged = m.json(&["forget", "purge-me", "--purge", "--confirm"]);
    assert_eq!(purged["backupsRemoved"], 1, "{purged}");
    for needle in ["marzipanquokka", "zebraorchid", "purge-me"] {
        assert_eq!(
            files_containing(&m.home, needle.as_bytes()),
            Vec::<PathBuf>::new(),
            "{needle} is still in the home"
        );
    }
    assert!(
        m.json(&["search", "marzipanquokka", "--mode", "bm25"])
            .as_array()
            .unwrap()
            .is_empty()
    );
    assert!(m.json(&["backups"]).as_array().unwrap().is_empty());
    assert_eq!(m.json(&["list"]).as_array().unwrap().len(), 1);
}

#[test]
fn the_home_is_private_to_the_user() {
    use std::os::unix::fs::PermissionsExt;
    let m = Memoria::new();
    m.ok(&["init"]);
    let id = m.ok(&["add", "--summary", "private note", "--body", "mine"]);
    m.ok(&["forget", id.trim(), "--confirm"]);
    m.ok(&["search", "private", "--mode", "bm25"]);
    m.ok(&["doctor"]);
    let mut stack = vec![m.home.clone()];
    let mut files = 0;
    while let Some(d) = stack.pop() {
        let mode = std::fs::metadata(&d).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700, "{}", d.display());
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
                assert_eq!(mode, 0o600, "{}", p.display());
                files += 1;
            }
        }
    }
    assert!(files >= 6, "{files}");
}

#[test]
fn a_closed_pipe_ends_the_command_quietly() {
    let m = Memoria::new();
    for i in 0..3 {
        let id = format!("note-{i}");
        m.ok(&["add", "--summary", "a note", "--id", &id, "--body", "text"]);
    }
    for args in [&["list"][..], &["--json", "list"], &["show", "note-0"]] {
        let mut child = m
            .command()
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // The reader goes away before the command writes (`memoria list | head -0`).
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "memoria {args:?}: {err}");
        assert!(err.is_empty(), "memoria {args:?} said: {err}");
    }
}

#[test]
fn search_explain_prints_numbers_and_words() {
    let m = Memoria::new();
    m.ok(&[
        "add",
        "--summary",
        "Rambutan season",
        "--body",
        "Rambutans ripen in the wet season.",
    ]);
    m.ok(&[
        "add",
        "--summary",
        "Other",
        "--body",
        "Nothing about fruit.",
    ]);
    let out = m.ok(&["search", "rambutan", "--explain", "--mode", "bm25"]);
    assert!(out.contains("words: rank 1, bm25 "), "{out}");
    assert!(out.contains("meaning: no match"), "{out}");
    assert!(
        !out.contains("Some(") && !out.contains("None"),
        "the explanation shows Rust's Option: {out}"
    );
    let hits = m.json(&["search", "rambutan", "--explain", "--mode", "bm25"]);
    assert_eq!(hits[0]["explain"]["bm25Rank"], 1, "{hits}");
    assert!(hits[0]["explain"]["vectorRank"].is_null(), "{hits}");
}

#[test]
fn init_offers_the_model_install_when_the_default_folder_has_no_model() {
    let m = Memoria::new();
    let mut c = m.command();
    c.env_remove("MEMORIA_MODEL_DIR").arg("init");
    let text = String::from_utf8(c.output().unwrap().stdout).unwrap();
    let default = m.home.join("models").join("default");
    assert!(
        text.contains(&format!("no embedding model in {}", default.display())),
        "{text}"
    );
    assert!(text.contains("`memoria model install`"), "{text}");
    std::fs::create_dir_all(&default).unwrap();
    std::fs::write(default.join("model.onnx"), b"").unwrap();
    let mut c = m.command();
    c.env_remove("MEMORIA_MODEL_DIR").arg("init");
    let text = String::from_utf8(c.output().unwrap().stdout).unwrap();
    assert!(!text.contains("model install"), "{text}");
}

#[test]
fn doctor_says_once_that_there_is_no_semantic_model_and_is_not_all_good() {
    let m = Memoria::new();
    m.ok(&["add", "--summary", "a note", "--body", "text"]);
    let mut c = m.command();
    c.env_remove("MEMORIA_MODEL_DIR").args(["doctor"]);
    let out = c.output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("no semantic model"), "{text}");
    assert_eq!(
        text.matches("memoria model install").count(),
        1,
        "the install command is said once: {text}"
    );
    assert!(!text.contains("all good"), "{text}");
    let mut c = m.command();
    c.env_remove("MEMORIA_MODEL_DIR").args(["--json", "doctor"]);
    let v: Value = serde_json::from_slice(&c.output().unwrap().stdout).unwrap();
    assert_eq!(v["semanticModel"], false, "{v}");
}

#[test]
fn forget_without_confirm_names_the_flag() {
    let m = Memoria::new();
    m.ok(&["add", "--summary", "keep me", "--id", "keep-me"]);
    let out = m.run(&["forget", "keep-me"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("hint: add --confirm"), "{err}");
}

#[test]
fn doctor_exits_1_when_it_found_a_problem() {
    let m = Memoria::new();
    m.ok(&["init"]);
    m.ok(&["doctor"]);
    std::fs::write(
        m.user_dir().join("broken.md"),
        "---\nid: broken\nsummary: [unclosed\n---\nbody\n",
    )
    .unwrap();
    let out = m.run(&["doctor"]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("problems found"), "{text}");
    assert!(out.stderr.is_empty(), "nothing more is said on stderr");
    let out = m.run(&["--json", "doctor"]);
    assert_eq!(out.status.code(), Some(1));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["ok"], false);
}

#[test]
fn edit_takes_an_importance_and_a_body_from_the_persons_editor() {
    let m = Memoria::new();
    m.ok(&[
        "add",
        "--id",
        "deploys",
        "--summary",
        "Deploys",
        "--body",
        "We deploy on Tuesdays.",
    ]);
    m.ok(&["edit", "deploys", "--importance", "0.9"]);
    assert_eq!(m.json(&["show", "deploys"])["importance"], 0.9);
    let out = m.run(&["edit", "deploys", "--importance", "3"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("between 0 and 1"));
    // The editor, with its own arguments, edits the body in a file.
    let out = m
        .command()
        .env("VISUAL", "sed -i s/Tuesdays/Wednesdays/")
        .args(["edit", "deploys", "--editor"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        m.json(&["show", "deploys"])["body"],
        "We deploy on Wednesdays.\n"
    );
    // Left as it was: nothing is written.
    let before = m.json(&["show", "deploys"])["hash"].clone();
    let out = m
        .command()
        .env("VISUAL", "true")
        .args(["edit", "deploys", "--editor"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("nothing changed"));
    assert_eq!(m.json(&["show", "deploys"])["hash"], before);
    // An editor that fails changes nothing and says so.
    let out = m
        .command()
        .env("VISUAL", "false")
        .args(["edit", "deploys", "--editor"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("nothing was changed"));
}

#[test]
fn an_imported_secret_is_cleaned_up_with_each_step_named() {
    let m = Memoria::new();
    let src = m.home.parent().unwrap().join("src");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(
        src.join("prod.md"),
        "Prod DB: postgres://admin:s3cretPass@db.example.com/prod\n\nThe prod database notes.\n",
    )
    .unwrap();
    m.ok(&["import", src.to_str().unwrap()]);
    // No list prints the secret: the summary made of it is named by its rule.
    let listed = m.ok(&["list"]);
    assert!(!listed.contains("s3cretPass"), "{listed}");
    assert!(listed.contains("held back"), "{listed}");
    // Fixing the body alone is refused, and the hint names the summary's flag.
    let out = m.run(&["edit", "prod", "--body", "Credentials are in the vault."]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--summary"), "{err}");
    m.ok(&[
        "edit",
        "prod",
        "--summary",
        "Prod DB credentials are in the vault",
        "--body",
        "Credentials are in vault path secret/prod/db.",
    ]);
    // The tag the import wrote is in the file: show says so and how to remove it.
    let shown = m.ok(&["show", "prod"]);
    assert!(
        shown.contains("no longer matches") && shown.contains("--tags"),
        "{shown}"
    );
    let found = |m: &Memoria| -> bool {
        m.json(&["search", "prod database credentials"])
            .as_array()
            .unwrap()
            .iter()
            .any(|h| h["id"] == "prod")
    };
    assert!(!found(&m), "still held back while tagged");
    m.ok(&["edit", "prod", "--tags", "source:markdown"]);
    assert!(!m.ok(&["show", "prod"]).contains("held back"));
    assert!(found(&m), "found once the tag is gone");
}

#[test]
fn show_and_edit_take_an_unambiguous_start_of_an_id() {
    let m = Memoria::new();
    m.ok(&[
        "add",
        "--id",
        "deploys-go-out-on-tuesdays",
        "--summary",
        "Deploy day",
        "--body",
        "x",
    ]);
    m.ok(&[
        "add",
        "--id",
        "deps-audit",
        "--summary",
        "Deps audit",
        "--body",
        "y",
    ]);
    assert_eq!(
        m.json(&["show", "deploys"])["id"],
        "deploys-go-out-on-tuesdays"
    );
    m.ok(&["edit", "deps", "--tags", "audit"]);
    assert_eq!(
        m.json(&["show", "deps-audit"])["tags"],
        serde_json::json!(["audit"])
    );
    let out = m.run(&["show", "dep"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("deploys-go-out-on-tuesdays") && err.contains("deps-audit"),
        "several are named, none guessed: {err}"
    );
    // Forgetting is never done by a start of an id.
    assert!(!m.run(&["forget", "deps", "--confirm"]).status.success());
    assert_eq!(m.json(&["show", "deps-audit"])["id"], "deps-audit");
}
