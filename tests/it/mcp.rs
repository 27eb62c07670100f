//! `memoria mcp` driven by a real MCP client: the official Python SDK (1.x and 2.x) over stdio.

use std::path::Path;
use std::process::Command;

use memoria_tests::{test_python, test_python_mcp2, workspace_bin};
use serde_json::Value;

#[test]
fn python_sdk_client_remember_search_expand_forget_and_isolation() {
    let facts = python_sdk_client(&test_python());
    assert!(
        facts["sdk"].as_str().unwrap().starts_with("1."),
        "{}",
        facts["sdk"]
    );
}

/// SDK 2.x raises a JSON-RPC error as an exception the model never sees: a refused
/// `remember` must reach it as a tool result with `isError`.
#[test]
fn python_sdk_2_client_reads_refusals_as_tool_results() {
    let facts = python_sdk_client(&test_python_mcp2());
    assert!(
        facts["sdk"].as_str().unwrap().starts_with("2."),
        "{}",
        facts["sdk"]
    );
}

/// Runs tests/it/mcp_client.py with `python` and checks the facts it reports.
fn python_sdk_client(python: &Path) -> Value {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().canonicalize().unwrap();
    let memoria = workspace_bin("memoria");
    let home = root.join("home");
    let (a, b) = (root.join("project-a"), root.join("project-b"));
    for p in [&a, &b] {
        let out = Command::new(&memoria)
            .env("MEMORIA_HOME", &home)
            .arg("init")
            .arg(p)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/it/mcp_client.py");
    let out = Command::new(python)
        .arg(script)
        .arg(&memoria)
        .arg(&home)
        .arg(&a)
        .arg(&b)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "MCP client failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let facts: Value = serde_json::from_slice(out.stdout.trim_ascii()).unwrap();
    assert_eq!(facts["server"], "memoria");
    assert_eq!(facts["instructions_name_project"], true);
    assert_eq!(
        facts["tools"],
        serde_json::json!([
            "forget",
            "memory_expand",
            "memory_log",
            "memory_search",
            "memory_working",
            "remember"
        ])
    );
    let working = &facts["working_hit"];
    assert_eq!(working["type"], "working", "{working}");
    assert_eq!(
        working["trust"], "[INFERRED]",
        "an agent wrote it: {working}"
    );
    assert_eq!(
        facts["working_errors"][0]["code"], "credential_refused",
        "{}",
        facts["working_errors"]
    );
    assert_eq!(facts["log_added"], serde_json::json!([3, 0, 3]));
    assert!(
        facts["log_scope"].as_str().unwrap().starts_with("project:"),
        "{}",
        facts["log_scope"]
    );
    let hit = &facts["log_hit"];
    assert_eq!(hit["said"]["conversation"], "chat-1", "{hit}");
    assert_eq!(hit["said"]["date"], "1 March 2025", "{hit}");
    assert!(hit["snippet"].as_str().unwrap().contains("Carla"), "{hit}");
    assert_eq!(
        facts["log_around"],
        serde_json::json!([
            "The quarterly pricing review is with Carla on the ninth",
            "Noted: Carla, the ninth.",
            "ok"
        ])
    );
    assert_eq!(facts["log_errors"].as_array().unwrap().len(), 2);
    assert_eq!(
        facts["b_sees_a_said"],
        serde_json::json!([]),
        "project B must never see project A's conversations"
    );
    assert_eq!(facts["search_schema_has_query"], true);
    let id = facts["remember_id"].as_str().unwrap();
    assert!(
        id.starts_with("vt:project/deploys-go-out-on-tuesdays-"),
        "{id}"
    );
    assert_eq!(facts["missing_links"], serde_json::json!(["release-train"]));
    assert_eq!(facts["search_top"], id);
    assert_eq!(facts["search_trust"], "[CONFIRMED]");
    assert_eq!(facts["multi_top_summary"], "Prefers tea over coffee");
    assert_eq!(
        facts["expand_body"],
        "Never on Fridays. See [[release-train]].\n"
    );
    assert_eq!(facts["expand_tags"], serde_json::json!(["ops"]));
    assert_eq!(facts["rpc_errors"].as_array().unwrap().len(), 1);
    let codes: Vec<&str> = facts["tool_errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["code"].as_str().unwrap())
        .collect();
    assert_eq!(
        codes,
        [
            "invalid_input",
            "invalid_input",
            "invalid_input",
            "credential_refused",
            "too_large",
            "invalid_input",
            "too_large",
            "confirmation_required",
            "invalid_id",
            "not_found"
        ]
    );
    let secret = &facts["tool_errors"][3];
    assert_eq!(secret["detail"]["field"], "body");
    assert!(secret["detail"]["rule"].is_string(), "{secret}");
    assert_eq!(facts["tool_errors"][4]["detail"]["limit"], 128 * 1024);
    assert_eq!(facts["b_expand_a"]["code"], "not_found");
    assert_eq!(facts["serving_after_errors"], true);
    assert_eq!(
        facts["b_sees_a"],
        serde_json::json!([]),
        "project B must never see project A's notes"
    );
    assert_eq!(facts["b_sees_user_note"], true);
    assert_eq!(facts["after_forget"], 0);
    // The forgotten note is in the backups, restorable.
    let backups = Command::new(&memoria)
        .env("MEMORIA_HOME", &home)
        .args(["--json", "backups"])
        .output()
        .unwrap();
    let backups: Value = serde_json::from_slice(&backups.stdout).unwrap();
    assert_eq!(backups[0]["backupId"], facts["forget_backup"]);
    assert_eq!(backups[0]["reason"], "forget");
    facts
}

#[test]
fn streamable_http_with_a_bearer_token() {
    let tmp = tempfile::tempdir().unwrap();
    let (server, url, _) = start_http(tmp.path(), &["--token", "s3cret-token"]);
    let facts = http_client_facts(server, &url, "s3cret-token");
    assert_eq!(facts["without_token"], 401);
    assert_eq!(facts["foreign_origin"], 403);
    assert_eq!(facts["tools"].as_array().unwrap().len(), 6);
    assert_eq!(facts["found"], serde_json::json!([facts["remembered"]]));
}

/// Starts `memoria mcp --http` on a loopback port; returns the process, its URL and what it
/// wrote to standard error before listening.
fn start_http(home: &std::path::Path, extra: &[&str]) -> (std::process::Child, String, String) {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    let mut server = Command::new(workspace_bin("memoria"))
        .env("MEMORIA_HOME", home)
        .env_remove("MEMORIA_MCP_TOKEN")
        .current_dir(home)
        .args(["mcp", "--http", "127.0.0.1:0"])
        .args(extra)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(server.stderr.take().unwrap()).lines();
    let mut said = String::new();
    let url = loop {
        let line = lines
            .next()
            .expect("server exited before listening")
            .unwrap();
        if let Some(rest) = line.split("serving on ").nth(1) {
            break rest.trim().to_owned();
        }
        said.push_str(&line);
        said.push('\n');
    };
    (server, url, said)
}

/// Runs the MCP Python SDK's HTTP client (`mcp_http_client.py`) against `url` with `token`,
/// then stops `server`; what the client found.
fn http_client_facts(mut server: std::process::Child, url: &str, token: &str) -> Value {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/it/mcp_http_client.py");
    let out = Command::new(test_python())
        .arg(script)
        .arg(url)
        .arg(token)
        .output()
        .unwrap();
    server.kill().unwrap();
    server.wait().unwrap();
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(out.stdout.trim_ascii()).unwrap()
}

#[test]
fn loopback_http_without_a_token_generates_one_shown_once_and_kept_private() {
    let tmp = tempfile::tempdir().unwrap();
    let (server, url, said) = start_http(tmp.path(), &[]);
    let path = tmp.path().join("mcp-token");
    let token = std::fs::read_to_string(&path).unwrap();
    assert!(said.contains(&token), "{said}");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let facts = http_client_facts(server, &url, &token);
    assert_eq!(facts["without_token"], 401, "loopback needs the token too");
    assert_eq!(facts["foreign_origin"], 403);
    // The second start reuses the token and does not show it again.
    let (mut again, _, said) = start_http(tmp.path(), &[]);
    again.kill().unwrap();
    again.wait().unwrap();
    assert!(!said.contains(&token), "{said}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), token);
}

#[test]
fn http_off_loopback_needs_a_token() {
    let tmp = tempfile::tempdir().unwrap();
    let out = Command::new(workspace_bin("memoria"))
        .env("MEMORIA_HOME", tmp.path())
        .env_remove("MEMORIA_MCP_TOKEN")
        .args(["mcp", "--http", "0.0.0.0:0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("bearer token"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
