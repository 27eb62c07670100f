//! The `memoria-sync` binary's command line: usage and bad input. (Its serving and token
//! commands are exercised end to end in `tests/it/sync_server_listener.rs`.)

use std::process::Command;

fn memoria_sync(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_memoria-sync"))
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn usage_lists_the_commands() {
    let out = memoria_sync(&["--help"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("serve") && text.contains("token"), "{text}");
    assert_eq!(memoria_sync(&["frobnicate"]).status.code(), Some(2));
}

#[test]
fn a_bad_store_url_is_a_clear_error() {
    let out = memoria_sync(&[
        "token",
        "create",
        "--store",
        "ftp://nowhere",
        "--user",
        "me",
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.to_lowercase().contains("store"), "{err}");
}
