//! The sync token in a Linux desktop keychain: a real GNOME Keyring daemon, unlocked with a
//! known password on a private D-Bus session bus (`dbus-run-session`), reached over the Secret
//! Service API. `memoria sync login` stores the token there, `memoria sync now` (without
//! `MEMORIA_SYNC_TOKEN`) reads it back, and without the bus the token file is asked — which
//! has no copy, so the token really was in the Secret Service.
//! `scripts/install-test-tools.sh` installs `dbus` and `gnome-keyring`; missing, this fails
//! saying so.

use std::process::Command;

use memoria_tests::sync_fixture::Backend;
use memoria_tests::workspace_bin;

use crate::sync_e2e::world;

fn which(tool: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()))
}

#[test]
fn sync_token_round_trips_through_gnome_keyring_over_the_secret_service() {
    for tool in ["dbus-run-session", "gnome-keyring-daemon"] {
        assert!(
            which(tool),
            "{tool} not found: run scripts/install-test-tools.sh (it installs dbus and gnome-keyring)"
        );
    }
    let w = world(Backend::Fs, &[]);
    let token = w.server.token("alice");
    let home = w.root.join("a");
    // The keyring daemon keeps its files under HOME and its socket under XDG_RUNTIME_DIR: both
    // private to the test.
    let (user_home, runtime) = (w.root.join("user-home"), w.root.join("runtime"));
    for d in [&user_home, &runtime] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::set_permissions(
        &runtime,
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .unwrap();
    let memoria = workspace_bin("memoria");
    let script = r#"
        set -e
        echo -n test-password | gnome-keyring-daemon --unlock --components=secrets >/dev/null
        "$MEMORIA" --home "$H" add --id n --summary N --body 'from a desktop'
        "$MEMORIA" --home "$H" sync login --server "$URL" --token "$TOKEN"
        "$MEMORIA" --home "$H" sync now
    "#;
    let run_in_session = |script: &str| {
        Command::new("dbus-run-session")
            .args(["--", "sh", "-c", script])
            .env("MEMORIA", &memoria)
            .env("H", &home)
            .env("URL", &w.server.url)
            .env("TOKEN", &token)
            .env("HOME", &user_home)
            .env("XDG_RUNTIME_DIR", &runtime)
            .env_remove("MEMORIA_SYNC_TOKEN")
            .env_remove("DBUS_SESSION_BUS_ADDRESS")
            .env_remove("MEMORIA_HOME")
            .current_dir(&w.root)
            .output()
            .unwrap()
    };
    let out = run_in_session(script);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("the token is in the Secret Service keychain"),
        "{stdout}"
    );
    assert!(stdout.contains("user: uploaded 1"), "{stdout}");
    // The keyring file holds it, encrypted: the token itself is not in it in the clear.
    let keyrings = user_home.join(".local/share/keyrings");
    let files: Vec<_> = std::fs::read_dir(&keyrings).unwrap().flatten().collect();
    assert!(
        !files.is_empty(),
        "no keyring file in {}",
        keyrings.display()
    );
    for f in &files {
        let bytes = std::fs::read(f.path()).unwrap();
        assert!(
            !bytes.windows(token.len()).any(|w| w == token.as_bytes()),
            "{} holds the token in the clear",
            f.path().display()
        );
    }

    // Without the session bus, the token file is asked: there is none.
    assert!(!home.join("sync/credentials.json").exists());
    let no_bus = Command::new(&memoria)
        .args(["--home", home.to_str().unwrap(), "sync", "now"])
        .env_remove("MEMORIA_SYNC_TOKEN")
        .env_remove("DBUS_SESSION_BUS_ADDRESS")
        .env("XDG_RUNTIME_DIR", &runtime)
        .env_remove("MEMORIA_HOME")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&no_bus.stderr);
    assert!(!no_bus.status.success());
    assert!(err.contains("no sync token"), "{err}");

    // A later session (the daemon unlocks the same keyring file) still has it; logout
    // removes it from there.
    let session = |script: &str| {
        let out = run_in_session(&format!(
            "set -e\necho -n test-password | gnome-keyring-daemon --unlock --components=secrets >/dev/null\n{script}"
        ));
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        (out.status.success(), stdout, stderr)
    };
    let (ok, stdout, stderr) = session(
        r#""$MEMORIA" --home "$H" sync now
        "$MEMORIA" --home "$H" sync logout"#,
    );
    assert!(ok, "{stdout}\n{stderr}");
    assert!(stdout.contains("user: uploaded 0"), "{stdout}");
    // Point the home at the server again by hand (not a sign-in): no token anywhere now.
    let settings = home.join("sync/settings.json");
    let mut s: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&settings).unwrap()).unwrap();
    s["server"] = w.server.url.clone().into();
    std::fs::write(&settings, serde_json::to_vec(&s).unwrap()).unwrap();
    let (ok, _, stderr) = session(r#""$MEMORIA" --home "$H" sync now"#);
    assert!(!ok);
    assert!(stderr.contains("no sync token"), "{stderr}");
}
