//! A sign-in that lasts on a headless machine: no D-Bus session bus (so no Secret Service) and
//! no `MEMORIA_SYNC_TOKEN`, every command its own process, as in ssh sessions, cron jobs and CI
//! runners. The token is kept in `$MEMORIA_HOME/sync/credentials.json`, readable only by the
//! user; later processes find it, `doctor` says where it is, it never reaches the server's
//! store nor an export, and logout removes it.

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use memoria_tests::sync_fixture::{Backend, Device};

use crate::sync_e2e::world;

/// `memoria --home H ARGS` with no token in the environment and no session bus.
fn headless(d: &Device, args: &[&str]) -> Output {
    d.command(args)
        .env_remove("MEMORIA_SYNC_TOKEN")
        .output()
        .expect("running memoria")
}

fn ok(d: &Device, args: &[&str]) -> String {
    let out = headless(d, args);
    assert!(
        out.status.success(),
        "memoria {args:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn files_holding(dir: &Path, needle: &str, found: &mut Vec<String>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            files_holding(&p, needle, found);
        } else if std::fs::read(&p)
            .unwrap()
            .windows(needle.len())
            .any(|w| w == needle.as_bytes())
        {
            found.push(p.display().to_string());
        }
    }
}

#[test]
fn headless_sign_in_is_found_by_later_processes_and_kept_in_a_private_file() {
    let w = world(Backend::Fs, &[]);
    let token = w.server.token("alice");
    let home = w.root.join("headless");
    std::fs::create_dir_all(&home).unwrap();
    // Device's own token is empty: `headless` removes the variable anyway.
    let d = Device::new(home.clone(), "");
    ok(
        &d,
        &["add", "--id", "n", "--summary", "N", "--body", "from ssh"],
    );

    let login = ok(
        &d,
        &[
            "sync",
            "login",
            "--server",
            &w.server.url,
            "--token",
            &token,
        ],
    );
    let file = home.join("sync").join("credentials.json");
    assert!(login.contains("signed in to"), "{login}");
    assert!(
        login.contains(&format!("the token is in {}", file.display())),
        "{login}"
    );
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(
        mode(&file),
        0o600,
        "the token file is readable only by the user"
    );
    assert_eq!(mode(file.parent().unwrap()), 0o700);

    // Each of these is a new process with nothing but the home to go on.
    let now = ok(&d, &["sync", "now"]);
    assert!(now.contains("user: uploaded 1"), "{now}");
    let status = ok(&d, &["sync", "status"]);
    assert!(status.contains("cloud sync: on"), "{status}");
    let doctor = ok(&d, &["doctor"]);
    assert!(
        doctor.contains(&format!("the token is in {}", file.display())),
        "{doctor}"
    );
    // A long-running process (the watcher; `memoria mcp` runs the same coordinator) finds it
    // too: its first pass is a report, not a missing token.
    let mut watch = d
        .command(&["--json", "watch"])
        .env_remove("MEMORIA_SYNC_TOKEN")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (tx, lines) = mpsc::channel();
    let stdout = watch.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    let first_pass = loop {
        let line = lines
            .recv_timeout(Duration::from_secs(60))
            .expect("the watcher's first sync pass within 60 s");
        if let Ok(v) = serde_json::from_str::<serde_json::Value>(&line)
            && v["sync"] == "user"
        {
            break v;
        }
    };
    let _ = watch.kill();
    let _ = watch.wait();
    assert!(first_pass["error"].is_null(), "{first_pass}");
    assert!(first_pass["report"].is_object(), "{first_pass}");

    // A second machine sees the note: the upload really used the token.
    let other = w.device("other", &token);
    other.ok(&["sync", "now"]);
    assert_eq!(other.note("n").map(|t| t.contains("from ssh")), Some(true));

    // The token is machine-local: not in the server's store, not in an export.
    let export = w.root.join("export");
    ok(&d, &["export", export.to_str().unwrap()]);
    let mut leaked = Vec::new();
    files_holding(&w.root.join("store"), &token, &mut leaked);
    files_holding(&export, &token, &mut leaked);
    assert!(leaked.is_empty(), "the token is in {leaked:?}");

    let out = ok(&d, &["sync", "logout"]);
    assert!(out.contains("signed out"), "{out}");
    assert!(!file.exists(), "logout removes the token file");
    // Point the home at the server again by hand (not a sign-in): no token anywhere now.
    let settings = home.join("sync/settings.json");
    let mut s: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&settings).unwrap()).unwrap();
    s["server"] = w.server.url.clone().into();
    std::fs::write(&settings, serde_json::to_vec(&s).unwrap()).unwrap();
    let out = headless(&d, &["sync", "now"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no sync token"), "{err}");
    let out = headless(&d, &["doctor"]);
    assert_eq!(out.status.code(), Some(1), "a problem found is exit code 1");
    let doctor = String::from_utf8_lossy(&out.stdout);
    assert!(doctor.contains("sign in again"), "{doctor}");
    assert!(doctor.contains("problems found"), "{doctor}");
}
