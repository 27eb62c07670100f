//! Re-import through the real `memoria` binary: a note changed here since its import — edited,
//! or the kept note of a merge — is never replaced by its source's newer text; that text goes
//! beside it and the report names both.

use memoria_tests::sync_fixture::Device;
use serde_json::Value;

fn json(d: &Device, args: &[&str]) -> Value {
    let mut full = vec!["--json"];
    full.extend_from_slice(args);
    let out = d.ok(&full);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("memoria {args:?}: {e}: {out}"))
}

#[test]
fn a_reimport_never_replaces_an_edit_or_a_merge_made_here() {
    let tmp = tempfile::tempdir().unwrap();
    let d = Device::new(tmp.path().join("home"), "");
    std::fs::create_dir_all(&d.home).unwrap();
    let src = tmp.path().join("vault");
    std::fs::create_dir_all(&src).unwrap();
    let put = |name: &str, text: &str| std::fs::write(src.join(name), text).unwrap();
    put("standup.md", "The standup is at 9:30.\n");
    put("deploys.md", "Deploys go out on Tuesdays.\n");
    put("deploy-day.md", "We deploy on Tuesday.\n");
    let dir = src.to_str().unwrap();
    let r = json(&d, &["import", dir]);
    assert_eq!(r["added"], 3, "{r}");

    d.ok(&[
        "edit",
        "standup",
        "--body",
        "The standup is at 9:30, on video.",
    ]);
    let merged = json(&d, &["merge", "deploys", "deploy-day", "--apply"]);
    let kept = merged["kept"]["id"].as_str().unwrap().to_owned();
    let kept_text = json(&d, &["show", &kept])["body"].clone();

    put("standup.md", "The standup is at 10:00.\n");
    put("deploys.md", "Deploys go out on Wednesdays.\n");
    put("deploy-day.md", "We deploy on Wednesday.\n");
    let r = json(&d, &["import", dir]);
    let named: Vec<&str> = r["keptEdited"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["id"].as_str().unwrap())
        .collect();
    assert!(
        named.contains(&"standup") && named.contains(&kept.as_str()),
        "{r}"
    );
    assert_eq!(
        json(&d, &["show", "standup"])["body"],
        "The standup is at 9:30, on video.\n"
    );
    assert_eq!(json(&d, &["show", &kept])["body"], kept_text);
    assert_eq!(
        json(&d, &["show", "standup-imported"])["body"],
        "The standup is at 10:00.\n"
    );
    // The text output names them too.
    put("standup.md", "The standup is at 10:30.\n");
    let text = d.ok(&["import", dir]);
    assert!(
        text.contains("kept your edits in standup") && text.contains("standup-imported"),
        "{text}"
    );
}
