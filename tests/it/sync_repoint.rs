//! Re-pointing synced scopes to a new address of their server (`memoria sync repoint URL`),
//! against real `memoria-sync` processes: accepted for the same store reached at another
//! address (`localhost` for `127.0.0.1`), with sync going on after; refused — with nothing
//! changed — for another server whose account has the same name, for another user, for an
//! address where nothing answers and for one that is not a Memoria server; every scope moves or
//! none does; an end-to-end encrypted account compared through the account key. Also `sync
//! login`'s warning and `sync status` naming the command.

use memoria_tests::project_folder;
use memoria_tests::sync_fixture::{Backend, Device, SyncServer};
use serde_json::Value;

use crate::sync_e2e::{World, json, world};

/// `http://127.0.0.1:PORT` → `http://localhost:PORT`: the same server at another address.
fn as_localhost(url: &str) -> String {
    url.replace("127.0.0.1", "localhost")
}

fn add(d: &Device, id: &str, body: &str) {
    d.add(id, id, body);
}

/// The home's sync settings file, as bytes: a refused re-point must leave it as it was.
fn settings(d: &Device) -> Vec<u8> {
    std::fs::read(d.home.join("sync/settings.json")).unwrap()
}

/// The `{"error": …}` body of a failed `memoria --json ARGS`.
fn error_of(d: &Device, args: &[&str]) -> Value {
    let mut full = vec!["--json"];
    full.extend_from_slice(args);
    let stderr = d.fails(&full);
    json(stderr.lines().last().unwrap_or_default())["error"].clone()
}

/// A second `memoria-sync` with a filesystem store of its own under the world's root, and a
/// token of its account named `alice`, as the world's is: the same name, another store.
fn other_server(w: &World) -> (SyncServer, String) {
    let dir = w.root.join("other");
    std::fs::create_dir_all(&dir).unwrap();
    let other = SyncServer::start(Backend::Fs, &dir, &[]);
    let token = other.token("alice");
    (other, token)
}

/// A web server that answers every request with an HTML page of its own, as a web site or a
/// reverse proxy's default page does; the thread ends with the test process.
fn not_a_sync_server() -> String {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for mut conn in listener.incoming().map_while(Result::ok) {
            let mut buf = [0u8; 4096];
            let _ = conn.read(&mut buf);
            let page = "<html><body><h1>Welcome to nginx!</h1></body></html>";
            let _ = write!(
                conn,
                "HTTP/1.1 404 Not Found\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{page}",
                page.len()
            );
        }
    });
    url
}

#[test]
fn repoint_to_the_same_store_at_another_address_moves_the_pins_and_sync_goes_on() {
    let w = world(Backend::Fs, &[]);
    let token = w.server.token("alice");
    let old = w.server.url.clone();
    let new = as_localhost(&old);
    let mut a = w.device("a", &token);
    add(&a, "deploys", "We deploy on Tuesdays.\n");
    add(&a, "freeze", "Code freeze on Fridays.\n");
    add(&a, "oncall", "Alice is on call.\n");
    a.ok(&["sync", "now"]);
    // Another machine changes the store after this one last synced: a later manifest of the
    // same store, which the re-point accepts and the next pass merges.
    let b = w.device("b", &token);
    b.ok(&["sync", "now"]);
    b.ok(&["edit", "oncall", "--body", "Bob is on call.\n"]);
    add(&b, "retro", "Retro on Thursdays.\n");
    b.ok(&["sync", "now"]);

    // Signed in at the new address: the scope stays paused, and login says what to run.
    a.token = token.clone();
    let warning = a.login(&new);
    assert!(
        warning.contains(&format!("user was synced at {old}"))
            && warning.contains(&format!("`memoria sync repoint {new}`")),
        "{warning}"
    );
    let e = error_of(&a, &["sync", "now"]);
    assert_eq!(e["code"], "account_mismatch", "{e}");
    let human = String::from_utf8_lossy(&a.run(&["sync", "now"]).stderr).into_owned();
    assert!(
        human.contains(&format!(
            "hint: if {new} is the same server at a new address: `memoria sync repoint {new}`"
        )),
        "{human}"
    );
    let status = a.ok(&["sync", "status"]);
    assert!(
        status.contains(&format!("paused: synced at {old}"))
            && status.contains(&format!("`memoria sync repoint {new}`")),
        "{status}"
    );
    let st = json(&a.ok(&["--json", "sync", "status"]));
    assert_eq!(st["scopes"][0]["addressChanged"], true, "{st}");

    // The re-point: the three notes as last synced (one changed since), one added since.
    let moved = json(&a.ok(&["--json", "sync", "repoint", &new]));
    assert_eq!(moved["server"], new.as_str(), "{moved}");
    assert_eq!(moved["userId"], "alice", "{moved}");
    assert_eq!(moved["scopes"][0]["scope"], "user", "{moved}");
    assert_eq!(moved["scopes"][0]["from"], old.as_str(), "{moved}");
    assert_eq!(moved["scopes"][0]["same"], 2, "{moved}");
    assert_eq!(moved["scopes"][0]["changedSince"], 2, "{moved}");
    let st = json(&a.ok(&["--json", "sync", "status"]));
    assert_eq!(st["server"], new.as_str(), "{st}");
    assert_eq!(st["scopes"][0]["pin"]["server"], new.as_str(), "{st}");
    assert_eq!(st["scopes"][0]["addressChanged"], false, "{st}");

    // Sync goes on at the new address, both ways.
    a.ok(&["sync", "now"]);
    assert!(a.note("oncall").unwrap().contains("Bob is on call."));
    assert!(a.note("retro").is_some());
    add(&a, "standup", "Standup at ten.\n");
    a.ok(&["sync", "now"]);
    b.ok(&["sync", "now"]);
    assert!(b.note("standup").unwrap().contains("Standup at ten."));
    // Run again, there is nothing left to move.
    let again = a.ok(&["sync", "repoint", &new]);
    assert!(again.contains("every scope is pinned to"), "{again}");
}

#[test]
fn repoint_refuses_another_store_with_the_same_account_name_and_changes_nothing() {
    let w = world(Backend::Fs, &[]);
    let token = w.server.token("alice");
    let mut a = w.device("a", &token);
    add(&a, "deploys", "We deploy on Tuesdays.\n");
    add(&a, "freeze", "Code freeze on Fridays.\n");
    a.ok(&["sync", "now"]);

    // A second server with a store of its own and an account of the same name, holding the
    // same notes (uploaded from another machine) and changed more often since than the first
    // store was: its manifest lists them as changed after the generation synced here.
    let (other, other_token) = other_server(&w);
    let c = w.device_via("c", &other_token, &other.url);
    c.ok(&["sync", "now"]);
    add(&c, "deploys", "We deploy on Tuesdays.\n");
    add(&c, "freeze", "Code freeze on Fridays.\n");
    c.ok(&["sync", "now"]);
    for round in 0..3 {
        c.ok(&[
            "edit",
            "deploys",
            "--body",
            &format!("We deploy, round {round}.\n"),
        ]);
        c.ok(&[
            "edit",
            "freeze",
            "--body",
            &format!("Freeze, round {round}.\n"),
        ]);
        c.ok(&["sync", "now"]);
    }

    a.token = other_token.clone();
    let warning = a.login(&other.url);
    assert!(warning.contains("memoria sync repoint"), "{warning}");
    let before = settings(&a);
    let e = error_of(&a, &["sync", "repoint", &other.url]);
    assert_eq!(e["code"], "not_same_store", "{e}");
    let message = e["message"].as_str().unwrap();
    assert!(
        message.contains("user's manifest does not match: 2 of 2 note(s) differ"),
        "{e}"
    );
    assert_eq!(
        e["detail"]["refusals"][0]["reason"], "manifest-differs",
        "{e}"
    );
    assert_eq!(settings(&a), before, "a refused re-point changes nothing");
    let human =
        String::from_utf8_lossy(&a.run(&["sync", "repoint", &other.url]).stderr).into_owned();
    assert!(human.contains("\nhint: "), "{human}");
    // Sync stays paused; the notes of the two stores never mix.
    assert_eq!(error_of(&a, &["sync", "now"])["code"], "account_mismatch");
    assert!(a.note("deploys").unwrap().contains("Tuesdays"));

    // Nothing answers at the address, or something that is not a Memoria server: refused, named.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", l.local_addr().unwrap())
    };
    let e = error_of(&a, &["sync", "repoint", &closed]);
    assert_eq!(e["code"], "server_unreachable", "{e}");
    let message = e["message"].as_str().unwrap();
    assert!(
        message.contains("nothing was re-pointed") && !message.contains("tries again"),
        "{e}"
    );
    let e = error_of(&a, &["sync", "repoint", &not_a_sync_server()]);
    assert_eq!(e["code"], "server_error", "{e}");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("not a Memoria sync server"),
        "{e}"
    );
    assert_eq!(settings(&a), before, "a refused re-point changes nothing");
}

#[test]
fn repoint_refuses_another_user_and_changes_nothing() {
    let w = world(Backend::Fs, &[]);
    let alice = w.server.token("alice");
    let bob = w.server.token("bob");
    let new = as_localhost(&w.server.url);
    let mut a = w.device("a", &alice);
    add(&a, "deploys", "We deploy on Tuesdays.\n");
    a.ok(&["sync", "now"]);
    a.token = bob.clone();
    let warning = a.login(&new);
    assert!(
        warning.contains("user was synced as `alice`") && !warning.contains("repoint"),
        "{warning}"
    );
    let before = settings(&a);
    let e = error_of(&a, &["sync", "repoint", &new]);
    assert_eq!(e["code"], "account_mismatch", "{e}");
    assert_eq!(
        e["detail"]["refusals"][0]["reason"], "different-user",
        "{e}"
    );
    assert_eq!(e["detail"]["refusals"][0]["pinnedUser"], "alice", "{e}");
    assert_eq!(e["detail"]["refusals"][0]["user"], "bob", "{e}");
    assert!(
        e["message"].as_str().unwrap().contains("a different user"),
        "{e}"
    );
    assert_eq!(settings(&a), before, "a refused re-point changes nothing");
}

#[test]
fn repoint_moves_every_scope_or_none() {
    // The user scope was synced with one server, the project's with another (an account of
    // the same name there). Re-pointing to the first server's new address: the user scope
    // would pass, the project's fails, so neither moves.
    let w = world(Backend::Fs, &[]);
    let token = w.server.token("alice");
    let first = w.server.url.clone();
    let (other, other_token) = other_server(&w);
    let proj = project_folder(&w.root.join("proj"), "proj");

    let mut a = w.device("a", &token);
    add(&a, "deploys", "We deploy on Tuesdays.\n");
    a.ok(&["sync", "now"]);
    a.token = other_token.clone();
    a.login(&other.url);
    a.add_to_project(&proj, "p", "P", "p\n");
    let out = a.run(&["--json", "--project", &proj, "sync", "now"]);
    let passes = json(&String::from_utf8_lossy(&out.stdout));
    let project = passes
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["scope"] == "project:proj")
        .cloned()
        .unwrap();
    assert!(project["error"].is_null(), "{passes}");

    let new = as_localhost(&first);
    a.token = token.clone();
    a.login(&new);
    let before = settings(&a);
    let e = error_of(&a, &["--project", &proj, "sync", "repoint", &new]);
    assert_eq!(e["code"], "not_same_store", "{e}");
    let refusals = e["detail"]["refusals"].as_array().unwrap();
    assert_eq!(refusals.len(), 1, "{e}");
    assert_eq!(refusals[0]["scope"], "project:proj", "{e}");
    assert_eq!(settings(&a), before, "the user scope did not move alone");
    let st = json(&a.ok(&["--json", "sync", "status"]));
    assert_eq!(st["scopes"][0]["pin"]["server"], first.as_str(), "{st}");
}

/// Writes `text` as a passphrase file under the world's root; its path.
fn passphrase_file(root: &std::path::Path, text: &str) -> String {
    let p = root.join("passphrase.txt");
    std::fs::write(&p, format!("{text}\n")).unwrap();
    p.display().to_string()
}

/// An end-to-end encrypted account re-points too: a machine that syncs encrypted compares
/// through the account key (the other machine's later changes count as changed since, and the
/// key is kept for the new address, so sync goes on encrypted both ways); a machine still
/// locked is refused as `e2ee_locked` with nothing changed, and once unlocked at the new
/// address it moves too and gets the notes.
#[test]
fn repoint_of_an_end_to_end_encrypted_account_compares_through_the_account_key() {
    let w = world(Backend::Fs, &[]);
    let token = w.server.token("alice");
    let old = w.server.url.clone();
    let new = as_localhost(&old);
    let pass = passphrase_file(&w.root, "correct horse battery staple");
    let a = w.device("a", &token);
    add(&a, "deploys", "We deploy on Tuesdays.\n");
    add(&a, "freeze", "Code freeze on Fridays.\n");
    a.ok(&["sync", "now"]);
    let c = w.device("c", &token);
    c.ok(&["sync", "now"]);
    a.ok(&["sync", "encrypt", "--passphrase-file", &pass]);
    // The purge that ends turning encryption on starts a new generation after the pass: a's
    // next pass syncs from it, so the changes listed since are the other machine's.
    a.ok(&["sync", "now"]);
    let b = w.device("b", &token);
    b.ok(&["sync", "unlock", "--passphrase-file", &pass]);
    b.ok(&["edit", "freeze", "--body", "No freeze this month.\n"]);
    add(&b, "retro", "Retro on Thursdays.\n");
    b.ok(&["sync", "now"]);

    a.login(&new);
    let moved = json(&a.ok(&["--json", "sync", "repoint", &new]));
    assert_eq!(moved["scopes"][0]["scope"], "user", "{moved}");
    assert_eq!(moved["scopes"][0]["same"], 1, "{moved}");
    assert_eq!(moved["scopes"][0]["changedSince"], 2, "{moved}");
    a.ok(&["sync", "now"]);
    let st = json(&a.ok(&["--json", "sync", "status"]));
    assert_eq!(st["encrypted"], true, "{st}");
    assert!(a.note("freeze").unwrap().contains("No freeze this month."));
    assert!(a.note("retro").is_some());
    add(&a, "standup", "Standup at ten.\n");
    a.ok(&["sync", "now"]);
    b.ok(&["sync", "now"]);
    assert!(b.note("standup").is_some());

    // Still locked: nothing it holds can be compared with the encrypted scope.
    c.login(&new);
    let before = settings(&c);
    let e = error_of(&c, &["sync", "repoint", &new]);
    assert_eq!(e["code"], "e2ee_locked", "{e}");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("does not hold the account key"),
        "{e}"
    );
    assert_eq!(settings(&c), before, "nothing changed");
    // Unlocked at the new address (the scope itself still paused), it moves, and syncs.
    let _ = c.run(&["sync", "unlock", "--passphrase-file", &pass]);
    let moved = json(&c.ok(&["--json", "sync", "repoint", &new]));
    assert_eq!(moved["scopes"][0]["scope"], "user", "{moved}");
    c.ok(&["sync", "now"]);
    assert!(c.note("standup").is_some());
    assert!(c.note("retro").is_some());
}

/// A machine that syncs encrypted is refused, with nothing changed, by another server whose
/// account has the same name and the same note ids in plaintext.
#[test]
fn repoint_of_an_encrypted_scope_refuses_another_store() {
    let w = world(Backend::Fs, &[]);
    let token = w.server.token("alice");
    let pass = passphrase_file(&w.root, "correct horse battery staple");
    let a = w.device("a", &token);
    add(&a, "deploys", "We deploy on Tuesdays.\n");
    a.ok(&["sync", "now"]);
    a.ok(&["sync", "encrypt", "--passphrase-file", &pass]);

    let (other, other_token) = other_server(&w);
    let c = w.device_via("c", &other_token, &other.url);
    add(&c, "deploys", "We deploy on Tuesdays.\n");
    c.ok(&["sync", "now"]);

    let a = Device::new(a.home.clone(), &other_token);
    a.login(&other.url);
    let before = settings(&a);
    let e = error_of(&a, &["sync", "repoint", &other.url]);
    assert_eq!(e["code"], "not_same_store", "{e}");
    assert_eq!(settings(&a), before, "nothing changed");
}
