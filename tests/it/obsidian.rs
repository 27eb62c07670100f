//! An Obsidian vault imported through the real `memoria` binary keeps its meaning: the test
//! vault in `tests/data/obsidian-vault` writes every form of internal link, embed, tag, alias
//! and date property Obsidian's help describes, and after `memoria import` the review finds no
//! broken link Obsidian would resolve (and still finds the one that is truly broken), inline
//! tags are tags, dates are the notes' times, folders are kept and never types, attachments
//! are copied beside the notes, and aliases are names for links and search.

use std::path::Path;

use memoria_tests::sync_fixture::Device;
use serde_json::Value;

fn json(d: &Device, args: &[&str]) -> Value {
    let mut full = vec!["--json"];
    full.extend_from_slice(args);
    let out = d.ok(&full);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("memoria {args:?}: {e}: {out}"))
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

fn test_vault(tmp: &Path) -> std::path::PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("data/obsidian-vault");
    let vault = tmp.join("vault");
    copy_dir(&src, &vault);
    vault
}

/// A note file's frontmatter, as JSON.
fn front(d: &Device, id: &str) -> Value {
    let text = d.note(id).unwrap_or_else(|| panic!("no note {id}"));
    let json = text.lines().nth(1).unwrap();
    serde_json::from_str(json).unwrap()
}

fn body(d: &Device, id: &str) -> String {
    let text = d.note(id).unwrap();
    text.splitn(3, "---\n").nth(2).unwrap().to_owned()
}

fn broken_links(d: &Device) -> Vec<(String, Vec<String>)> {
    json(d, &["review"])["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["kind"] == "broken_link")
        .map(|f| {
            (
                f["notes"][0]["id"].as_str().unwrap().to_owned(),
                f["targets"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|t| t.as_str().unwrap().to_owned())
                    .collect(),
            )
        })
        .collect()
}

fn day_ms(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (m + if m > 2 { -3 } else { 9 }) + 2) / 5 + d - 1;
    (era * 146097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719468) * 86_400_000
}

#[test]
fn an_obsidian_vault_imports_with_its_links_tags_dates_folders_and_aliases() {
    let tmp = tempfile::tempdir().unwrap();
    let d = Device::new(tmp.path().join("home"), "");
    std::fs::create_dir_all(&d.home).unwrap();
    let vault = test_vault(tmp.path());
    let dir = vault.to_str().unwrap();

    let r = json(&d, &["import", dir]);
    assert_eq!(
        (r["added"].as_u64(), r["attachments"].as_u64()),
        (Some(10), Some(4)),
        "{r}"
    );
    assert_eq!(r["skipped"], Value::Array(vec![]), "{r}");

    // Every link Obsidian resolves resolves here; the one that names nothing is still found.
    assert_eq!(
        broken_links(&d),
        [(
            "broken-links".to_owned(),
            vec!["truly-missing-note".to_owned()]
        )]
    );

    // Links name the notes' ids and still read as they did.
    let home = body(&d, "home");
    for written in [
        "[[2024-01-02|Daily/2024-01-02]]",
        "[[standup-2024-07-01#Decisions|the standup]]",
        "[[Three laws of motion]]",
        "[[three LAWS of motion]]",
        "[[Three laws of motion#Second law#Acceleration]]",
        "[[2024-01-02#^quote-of-the-day|Daily/2024-01-02#^quote-of-the-day]]",
        "[[2024-01-02#^quote-of-the-day|today's quote]]",
        "[[#Embeds]]",
        "[[standup-2024-07-01|Daily standup]]",
        "[[standup-2024-07-01|Meetings/Standup 2024-07-01]]",
        "[[apollo|Projects/Apollo.md]]",
        "[[Release v1.2]]",
        "[[three-laws-of-motion|the laws]]",
        "[[three-laws-of-motion#Second law|the second law]]",
        "[[standup-2024-07-01|standup]]",
        "[[apollo|Apollo]]",
        // A path whose slug is its note's id is left as written.
        "| [[Projects/Plan\\|the Apollo plan]] |",
        "| [[standup-2024-07-01\\|standup]] |",
        "![[Three laws of motion#Second law]]",
        "![[2024-01-02#^quote-of-the-day|Daily/2024-01-02#^quote-of-the-day]]",
        // Attachments: copied beside the notes, the embeds naming the copies.
        "![[attachments/Attachments/diagram.png]]",
        "![[attachments/Attachments/diagram.png|200]]",
        "![[attachments/Attachments/Engelbart.jpg|100x145]]",
        "![[attachments/doc.pdf#page=3]]",
        "![[attachments/Attachments/Mother of All Demos (1968).ogg]]",
        "![Engelbart](attachments/Attachments/Engelbart.jpg)",
        "![diagram](attachments/Attachments/diagram.png \"A title\")",
        // Left as they were: the web, anchors, code.
        "![A picture on the web](https://example.com/picture.png)",
        "[a heading here](#Embeds)",
        "`[[Not a link in code]]`",
        "[[Not a link in a code block]] #not-a-tag-in-code",
    ] {
        assert!(home.contains(written), "{written} not in:\n{home}");
    }
    assert!(
        body(&d, "standup-2024-07-01").contains("[[personal-plan|Plan]]"),
        "a bare name several notes have: the root-most"
    );
    assert!(
        body(&d, "apollo").contains("[[projects-plan|Plan]]"),
        "a bare name several notes have: the one in the linking note's folder"
    );
    assert!(body(&d, "three-laws-of-motion").contains("[[three-laws-of-motion|Newton's laws]]"));
    let scope = d.home.join("memory/user");
    for (copy, source) in [
        (
            "attachments/Attachments/diagram.png",
            "Attachments/diagram.png",
        ),
        ("attachments/doc.pdf", "doc.pdf"),
    ] {
        assert_eq!(
            std::fs::read(scope.join(copy)).unwrap(),
            std::fs::read(vault.join(source)).unwrap()
        );
    }

    // Inline tags, nested ones too; not headings, numbers, fragments or code.
    let tags = |id: &str| -> Vec<String> {
        front(&d, id)["tags"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(
        tags("tags"),
        [
            "inline-tag",
            "todo/urgent",
            "Project/Apollo-2",
            "日本語",
            "source:obsidian"
        ]
    );
    assert_eq!(
        tags("2024-01-02"),
        ["daily", "journal", "todo/urgent", "source:obsidian"]
    );
    assert_eq!(tags("release-v1.2"), ["release", "source:obsidian"]);
    assert_eq!(tags("home"), ["hub", "source:obsidian"]);

    // Dates in the frontmatter are the notes' times.
    let daily = front(&d, "2024-01-02");
    assert_eq!(daily["createdAt"], day_ms(2024, 1, 2));
    assert_eq!(
        daily["updatedAt"],
        day_ms(2024, 1, 3) + (18 * 60 + 45) * 60_000
    );
    assert_eq!(front(&d, "apollo")["createdAt"], day_ms(2024, 3, 5));
    assert_eq!(
        front(&d, "three-laws-of-motion")["createdAt"],
        day_ms(2023, 11, 20) + (9 * 60 + 15) * 60_000
    );

    // Folders are kept, and a folder named Projects makes no project.
    let apollo = front(&d, "apollo");
    assert_eq!(apollo["folder"], "Projects");
    assert!(apollo.get("type").is_none(), "{apollo}");
    assert_eq!(front(&d, "standup-2024-07-01")["folder"], "Work/Meetings");
    assert!(front(&d, "home").get("folder").is_none());

    // Aliases are names: search finds a note by one, and a link written here by one is no
    // broken link.
    let hits = json(&d, &["search", "morning sync"]);
    assert_eq!(hits[0]["id"], "standup-2024-07-01", "{hits}");
    d.ok(&[
        "add",
        "--id",
        "written-here",
        "--summary",
        "Notes for the sync",
        "--body",
        "Ask about it at the [[Morning sync]].",
    ]);
    assert_eq!(broken_links(&d).len(), 1);

    // Importing the same vault again changes nothing.
    let again = json(&d, &["import", dir]);
    assert_eq!(
        (
            again["added"].as_u64(),
            again["updated"].as_u64(),
            again["unchanged"].as_u64(),
            again["attachments"].as_u64()
        ),
        (Some(0), Some(0), Some(10), Some(0)),
        "{again}"
    );
    assert_eq!(body(&d, "home"), home);

    // The missing note appears in the vault: the link resolves, nothing else changes.
    std::fs::write(vault.join("Truly missing note.md"), "Here at last.\n").unwrap();
    let third = json(&d, &["import", dir]);
    assert_eq!(
        (third["added"].as_u64(), third["updated"].as_u64()),
        (Some(1), Some(0)),
        "{third}"
    );
    assert!(broken_links(&d).is_empty());
}
