//! Both the passphrase and the recovery key lost while a machine is still unlocked: that
//! machine holds the account key, which proves the account, and sets a new passphrase and a new
//! recovery key (`sync passphrase --from-this-machine`), after a confirmation, with nothing
//! uploaded again. A machine without the current key cannot, and the old secrets stop working.

use std::collections::BTreeMap;

use memoria_tests::sync_fixture::Backend;

use super::{PASSPHRASE, encrypted_pair, error_code, objects};
use crate::sync_e2e::json;

/// The store's files other than the account's wrapped keys.
fn all_but_keys(objects: BTreeMap<String, Vec<u8>>) -> BTreeMap<String, Vec<u8>> {
    objects
        .into_iter()
        .filter(|(p, _)| !p.ends_with("e2ee/keys.json"))
        .collect()
}

#[test]
fn e2ee_a_machine_holding_the_key_sets_a_new_passphrase_and_recovery_key_when_both_are_lost() {
    let (w, f, a, b, old_recovery) = encrypted_pair(Backend::Fs);
    let new = "lantern quarry velvet ninety";
    let reset = |d: &memoria_tests::sync_fixture::Device, extra: &[&str]| {
        let mut args = vec![
            "--json",
            "sync",
            "passphrase",
            "--from-this-machine",
            "--new-passphrase-file",
        ];
        let file = f.passphrase(new);
        args.push(&file);
        args.extend(extra);
        d.run(&args)
    };
    let before = objects(&w);

    // Without a terminal to ask on, nothing changes unless --yes says so.
    let out = reset(&a, &[]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--yes"), "{err}");
    // A machine that holds no key proves nothing.
    let c = w.device("c", &a.token);
    let out = reset(&c, &["--yes"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(error_code(&err), "e2ee_locked", "{err}");
    assert_eq!(objects(&w), before, "nothing was written to the store");

    // The unlocked machine sets both; the new recovery key is shown once and kept in the file.
    let rec = f.dir.join("recovery-after-reset.txt");
    let out = reset(
        &a,
        &["--yes", "--recovery-file", &rec.display().to_string()],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let done = json(&String::from_utf8_lossy(&out.stdout));
    let recovery = std::fs::read_to_string(&rec).unwrap().trim().to_owned();
    assert_eq!(done["recoveryKey"], recovery.as_str(), "{done}");
    assert_ne!(recovery, old_recovery);
    let after = objects(&w);
    assert_ne!(after, before, "the wrapped keys changed");
    assert_eq!(
        all_but_keys(after),
        all_but_keys(before),
        "nothing but the wrapped keys changed: no note was uploaded again"
    );

    // The old passphrase and recovery key no longer unlock; the new ones do.
    let err = c.fails(&[
        "--json",
        "sync",
        "unlock",
        "--passphrase-file",
        &f.passphrase(PASSPHRASE),
    ]);
    assert_eq!(error_code(&err), "wrong_passphrase", "{err}");
    let err = c.fails(&["--json", "sync", "unlock", "--recovery-key", &old_recovery]);
    assert_eq!(error_code(&err), "wrong_passphrase", "{err}");
    c.ok(&["sync", "unlock", "--passphrase-file", &f.passphrase(new)]);
    let d = w.device("d", &a.token);
    d.ok(&["sync", "unlock", "--recovery-key", &recovery]);

    // The machine unlocked before keeps syncing with the key it holds.
    b.add(
        "after-the-reset",
        "After the reset",
        "written on b after the new passphrase was set",
    );
    b.ok(&["sync", "now"]);
    for m in [&a, &c, &d] {
        m.ok(&["sync", "now"]);
        assert_eq!(m.note("after-the-reset"), b.note("after-the-reset"));
    }
}
