//! The error codes a user or a front end sees from the `memoria` CLI, each from a real failure:
//! the real `memoria-sync` server (its quotas, its rate limit, its erase), a closed port, a
//! process without any keychain. `--json` errors are `{"error": {code, message, detail}}` on
//! standard error with exit code 1; without `--json` a hint names the command that helps.

use std::process::{Command, Output};

use memoria_tests::sync_fixture::{Backend, Device};
use memoria_tests::{project_folder, test_python, workspace_bin};
use serde_json::Value;

use crate::sync_e2e::world;

/// The error body of a failed `memoria --json ARGS` (the last line of standard error).
fn body_of(out: &Output, what: &str) -> Value {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{what} should fail with exit code 1:\n{}\n{stderr}",
        String::from_utf8_lossy(&out.stdout)
    );
    let last = stderr.lines().last().unwrap_or_default();
    let v: Value = serde_json::from_str(last).unwrap_or_else(|e| panic!("{what}: {e}: {stderr}"));
    let body = v["error"].clone();
    let message = body["message"].as_str().unwrap_or_default();
    assert!(!message.is_empty(), "{what}: {v}");
    body
}

fn failure(d: &Device, args: &[&str]) -> Value {
    let mut full = vec!["--json"];
    full.extend_from_slice(args);
    body_of(&d.run(&full), &format!("memoria {args:?}"))
}

fn login<'a>(url: &'a str, token: &'a str) -> [&'a str; 6] {
    ["sync", "login", "--server", url, "--token", token]
}

#[test]
fn sign_in_and_reach_failures() {
    let w = world(Backend::Fs, &[]);
    let fresh = Device::new(w.root.join("fresh"), "");
    std::fs::create_dir_all(&fresh.home).unwrap();
    let e = failure(&fresh, &["sync", "now"]);
    assert_eq!(e["code"], "not_signed_in", "{e}");
    // Without --json the engine's message comes with the CLI's hint.
    let human = String::from_utf8_lossy(&fresh.run(&["sync", "now"]).stderr).into_owned();
    assert!(
        human.contains("\nhint: sign in with `memoria sync login --server URL`"),
        "{human}"
    );

    // A refused token at sign-in says so, and the hint names how to get a token, not "sign in".
    let bad = login(&w.server.url, "msync_not-a-real-token");
    let e = failure(&fresh, &bad);
    assert_eq!(e["code"], "not_signed_in", "{e}");
    assert_eq!(e["detail"]["tokenRefused"], true, "{e}");
    assert_eq!(e["detail"]["server"], w.server.url.as_str(), "{e}");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("refused this token"),
        "{e}"
    );
    let out = fresh.run(&bad);
    let human = String::from_utf8_lossy(&out.stderr);
    assert!(
        human.contains("memoria-sync token create") && human.contains("--token TOKEN"),
        "{human}"
    );

    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", l.local_addr().unwrap())
    };
    let token = w.server.token("alice");
    let e = failure(&fresh, &login(&closed, &token));
    assert_eq!(e["code"], "server_unreachable", "{e}");
    // A one-shot command promises no retry it will not make.
    let message = e["message"].as_str().unwrap();
    assert!(
        !message.contains("will retry") && message.contains("tries again by itself"),
        "{e}"
    );

    let not_a_sync_server = format!("{}/not/here", w.server.url);
    let e = failure(&fresh, &login(&not_a_sync_server, &token));
    assert_eq!(e["code"], "server_error", "{e}");
    assert_eq!(e["detail"]["status"], 404, "{e}");

    // An address without a scheme is refused before anything is sent, with how to write it.
    let bare = w.server.url.trim_start_matches("http://").to_owned();
    let e = failure(&fresh, &login(&bare, &token));
    assert_eq!(e["code"], "invalid_input", "{e}");
    let message = e["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("give it as http://{bare}")),
        "{e}"
    );
    assert!(!message.contains("builder error"), "{e}");
}

#[test]
fn sync_off_and_account_mismatch() {
    let w = world(Backend::Fs, &[]);
    let alice = w.server.token("alice");
    let bob = w.server.token("bob");
    let mut a = w.device("a", &alice);
    a.add("n", "N", "n\n");
    a.ok(&["sync", "off"]);
    let e = failure(&a, &["sync", "now"]);
    assert_eq!(e["code"], "sync_off", "{e}");
    a.ok(&["sync", "on"]);
    a.ok(&["sync", "now"]);
    a.token = bob.clone();
    a.ok(&login(&w.server.url, &bob));
    let e = failure(&a, &["sync", "now"]);
    assert_eq!(e["code"], "account_mismatch", "{e}");
    assert_eq!(e["detail"]["scope"], "user", "{e}");
    assert_eq!(e["detail"]["pinnedUser"], "alice", "{e}");
    assert_eq!(e["detail"]["user"], "bob", "{e}");
}

#[test]
fn vanished_folders_are_folder_missing_and_confirmation_required() {
    let w = world(Backend::Fs, &[]);
    let token = w.server.token("alice");
    let a = w.device("a", &token);
    let proj = project_folder(&w.root.join("proj"), "proj");
    a.add("u", "U", "u\n");
    a.add_to_project(&proj, "p", "P", "p\n");
    a.ok(&["--project", &proj, "sync", "now"]);
    std::fs::rename(a.home.join("memory/user"), a.home.join("user-elsewhere")).unwrap();
    std::fs::rename(
        std::path::Path::new(&proj).join("MEMORY"),
        std::path::Path::new(&proj).join("MEMORY-elsewhere"),
    )
    .unwrap();
    let out = a.run(&["--json", "--project", &proj, "sync", "now"]);
    let e = body_of(&out, "sync now with both folders gone");
    let per_scope: Value = serde_json::from_slice(&out.stdout).unwrap();
    let code_of = |scope: &str| {
        per_scope
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["scope"].as_str().unwrap().starts_with(scope))
            .map(|s| s["error"]["code"].clone())
    };
    assert_eq!(
        code_of("user"),
        Some("confirmation_required".into()),
        "{per_scope}"
    );
    assert_eq!(
        code_of("project:"),
        Some("folder_missing".into()),
        "{per_scope}"
    );
    // The command fails with the first failing scope's code and every scope's message.
    assert_eq!(
        e["code"],
        code_of(per_scope[0]["scope"].as_str().unwrap()).unwrap()
    );
    let message = e["message"].as_str().unwrap();
    assert!(
        message.contains("user: ") && message.contains("project:proj: "),
        "{e}"
    );
    let human = String::from_utf8_lossy(&a.run(&["sync", "now"]).stderr).into_owned();
    assert!(human.contains("\nhint: `memoria sync confirm`"), "{human}");
}

#[test]
fn server_quota_and_rate_limit() {
    let w = world(
        Backend::Fs,
        &[("MEMORIA_SYNC_QUOTAS__LIVE_NOTES_PER_SCOPE", "1")],
    );
    let a = w.device("a", &w.server.token("alice"));
    for id in ["one", "two"] {
        a.add(id, id, "b\n");
    }
    let e = failure(&a, &["sync", "now"]);
    assert_eq!(e["code"], "limit_reached", "{e}");
    assert_eq!(e["detail"]["serverCode"], "quota_exceeded", "{e}");

    let w = world(
        Backend::Fs,
        &[
            ("MEMORIA_SYNC_RATE_LIMIT__BURST", "2"),
            ("MEMORIA_SYNC_RATE_LIMIT__PER_MINUTE", "1"),
        ],
    );
    let a = w.device("a", &w.server.token("alice"));
    a.add("n", "N", "b\n");
    let e = failure(&a, &["sync", "now"]);
    assert_eq!(e["code"], "rate_limited", "{e}");
    assert!(e["detail"]["retryAfterS"].as_u64().unwrap() > 0, "{e}");
}

#[test]
fn an_erased_account_is_account_erased() {
    const ADMIN: &str = "admin-key-for-the-errors-test-0123456789";
    let w = world(Backend::Fs, &[("MEMORIA_SYNC_ADMIN_KEY", ADMIN)]);
    let a = w.device("a", &w.server.token("alice"));
    a.add("n", "N", "b\n");
    a.ok(&["sync", "now"]);
    let url = format!("{}/v1/admin/erase", w.server.url);
    let status = tokio::runtime::Runtime::new().unwrap().block_on(async {
        reqwest::Client::new()
            .post(&url)
            .bearer_auth(ADMIN)
            .json(&serde_json::json!({ "userId": "alice" }))
            .send()
            .await
            .unwrap()
            .status()
    });
    assert_eq!(status, 200);
    a.ok(&["edit", "n", "--body", "changed\n"]);
    let e = failure(&a, &["sync", "now"]);
    assert_eq!(e["code"], "account_erased", "{e}");
}

/// No D-Bus session bus, a kernel that refuses keyring calls (the seccomp filter of
/// tests/it/no_keyring.py), and a token file that cannot be written (a folder stands where it
/// goes): signing in has nowhere to keep the token, and says what to do instead.
#[test]
fn no_place_to_keep_the_token_is_keychain_unavailable() {
    let w = world(Backend::Fs, &[]);
    let token = w.server.token("alice");
    let home = w.root.join("headless");
    std::fs::create_dir_all(home.join("sync/credentials.json")).unwrap();
    let out = Command::new(test_python())
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/it/no_keyring.py"))
        .arg(workspace_bin("memoria"))
        .arg("--home")
        .arg(&home)
        .arg("--json")
        .args(login(&w.server.url, &token))
        .env_remove("MEMORIA_SYNC_TOKEN")
        .env_remove("MEMORIA_HOME")
        .env_remove("DBUS_SESSION_BUS_ADDRESS")
        .env("XDG_RUNTIME_DIR", &home)
        .output()
        .unwrap();
    let e = body_of(&out, "sync login with nowhere to keep the token");
    assert_eq!(e["code"], "keychain_unavailable", "{e}");
    let message = e["message"].as_str().unwrap();
    assert!(message.contains("MEMORIA_SYNC_TOKEN"), "{e}");
    assert!(message.contains("credentials.json"), "{e}");
}

#[test]
fn cli_failures_outside_sync() {
    let tmp = tempfile::tempdir().unwrap();
    let d = Device::new(tmp.path().to_path_buf(), "");
    let e = failure(&d, &["show", "nope"]);
    assert_eq!(e["code"], "not_found", "{e}");
    assert_eq!(e["detail"]["id"], "nope", "{e}");
    let human = String::from_utf8_lossy(&d.run(&["show", "nope"]).stderr).into_owned();
    assert_eq!(
        human,
        "memoria: note `nope` not found in the visible scopes\nhint: list notes with `memoria list`\n"
    );
    let e = failure(
        &d,
        &["add", "--summary", "k", "--body", "AKIAIOSFODNN7EXAMPLE"],
    );
    assert_eq!(e["code"], "credential_refused", "{e}");
    let bad_setting = d
        .command(&["--json", "list"])
        .env("MEMORIA_BACKUPS__MAX_AGE_DAYS", "a week")
        .output()
        .unwrap();
    let e = body_of(&bad_setting, "list with a bad backup setting");
    assert_eq!(e["code"], "config", "{e}");
}

/// The doctor asks the server about the token: a revoked one is a problem it reports (exit 1,
/// with how to get a new token).
#[test]
fn doctor_reports_a_token_the_server_no_longer_accepts() {
    let w = world(Backend::Fs, &[]);
    let token = w.server.token("alice");
    let d = w.device("laptop", &token);
    let report: Value = serde_json::from_str(&d.ok(&["--json", "doctor"])).unwrap();
    assert_eq!(report["sync"]["tokenCheck"], "accepted", "{report}");
    w.server.revoke(&token);
    let out = d.run(&["--json", "doctor"]);
    assert_eq!(out.status.code(), Some(1), "a problem found");
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["sync"]["tokenCheck"], "refused", "{report}");
    assert_eq!(report["ok"], false);
    let text = String::from_utf8_lossy(&d.run(&["doctor"]).stdout).into_owned();
    assert!(
        text.contains("refuses the token") && text.contains("memoria-sync token create"),
        "{text}"
    );
}
