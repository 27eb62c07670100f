use proptest::prelude::*;

use super::*;

fn ctx(p: &str) -> FileContext<'_> {
    FileContext { relative_path: p }
}

const EXAMPLE: &str = "---\n{\"id\":\"pricing-borderless-3fa\",\"summary\":\"Pricing cards use fills, not borders\",\"type\":\"feedback\",\"tags\":[\"design\"],\"createdAt\":1789000000000,\"updatedAt\":1789000000000}\n---\nCards are separated by fill and whitespace. See [[pricing-layout-a91]].\n";

#[test]
fn product_example_round_trips_byte_for_byte() {
    let note = Note::parse(EXAMPLE, ctx("pricing-borderless-3fa.md")).unwrap();
    assert_eq!(note.id.as_str(), "pricing-borderless-3fa");
    assert_eq!(note.summary, "Pricing cards use fills, not borders");
    assert_eq!(note.note_type, Some(NoteType::Feedback));
    assert_eq!(note.tags, vec!["design"]);
    assert_eq!(note.created_at, Some(1789000000000));
    assert_eq!(note.links(), vec!["pricing-layout-a91"]);
    assert_eq!(note.serialize(), EXAMPLE);
}

#[test]
fn unknown_keys_survive_a_rewrite_in_order() {
    let text = "---\n{\"id\":\"a\",\"summary\":\"s\",\"zeta\":{\"x\":[1,2]},\"alpha\":true,\"tags\":[]}\n---\nbody";
    let mut note = Note::parse(text, ctx("a.md")).unwrap();
    note.summary = "changed".into();
    let out = note.serialize();
    assert_eq!(
        out,
        "---\n{\"id\":\"a\",\"summary\":\"changed\",\"tags\":[],\"zeta\":{\"x\":[1,2]},\"alpha\":true}\n---\nbody"
    );
}

#[test]
fn reads_yaml_frontmatter() {
    let text = "---\nid: yaml-note\nsummary: From Obsidian\ntype: reference\ntags:\n  - books\n  - reading\ncreatedAt: 1700000000000\naliases: [YN]\nrating: 4.5\n---\n# Title\nbody\n";
    let note = Note::parse(text, ctx("Yaml Note.md")).unwrap();
    assert_eq!(note.id.as_str(), "yaml-note");
    assert_eq!(note.note_type, Some(NoteType::Reference));
    assert_eq!(note.tags, vec!["books", "reading"]);
    assert_eq!(note.created_at, Some(1700000000000));
    assert_eq!(note.extra["aliases"], serde_json::json!(["YN"]));
    assert_eq!(note.extra["rating"], serde_json::json!(4.5));
    assert_eq!(note.body, "# Title\nbody\n");
}

#[test]
fn yaml_without_id_or_summary_and_with_foreign_type() {
    let text = "---\ntype: book\ntags: fiction, classics\n---\n\n## Moby Dick\nCall me Ishmael.\n";
    let note = Note::parse(text, ctx("Reading/Moby Dick.md")).unwrap();
    assert_eq!(note.id.as_str(), "moby-dick");
    assert_eq!(note.summary, "Moby Dick");
    assert_eq!(note.note_type, Some(NoteType::Other("book".into())));
    assert_eq!(note.tags, vec!["fiction", "classics"]);
    // Written back, the foreign type is kept as written.
    let again = Note::parse(&note.serialize(), ctx("moby-dick.md")).unwrap();
    assert_eq!(again, note);
}

#[test]
fn file_without_frontmatter() {
    let note = Note::parse(
        "\n\n# Deploy checklist\n- run tests\n",
        ctx("feedback/Deploy Checklist.md"),
    )
    .unwrap();
    assert_eq!(note.id.as_str(), "deploy-checklist");
    assert_eq!(note.summary, "Deploy checklist");
    assert_eq!(note.note_type, Some(NoteType::Feedback));
    assert_eq!(note.body, "\n\n# Deploy checklist\n- run tests\n");
    let plural = Note::parse("x", ctx("vault/references/x.md")).unwrap();
    assert_eq!(plural.note_type, Some(NoteType::Reference));
    let none = Note::parse("x", ctx("daily/x.md")).unwrap();
    assert_eq!(none.note_type, None);
}

#[test]
fn malformed_frontmatter_is_an_error_naming_the_problem() {
    let e = Note::parse("---\n{\"id\": \"a\",\n---\nbody", ctx("a.md")).unwrap_err();
    assert!(matches!(e, ParseError::Json(_)), "{e}");
    let e = Note::parse("---\nid: [unclosed\n---\nbody", ctx("a.md")).unwrap_err();
    assert!(matches!(e, ParseError::Yaml(_)), "{e}");
    let e = Note::parse("---\n{\"id\":\"a\"}\nbody without end", ctx("a.md")).unwrap_err();
    assert_eq!(e, ParseError::Unclosed);
    let e = Note::parse("---\n{\"id\":\"Bad Id\"}\n---\n", ctx("a.md")).unwrap_err();
    assert!(matches!(e, ParseError::Id(_)), "{e}");
    let e = Note::parse("---\n{\"id\":\"a\",\"tags\":7}\n---\n", ctx("a.md")).unwrap_err();
    assert!(e.to_string().contains("tags"), "{e}");
    let e = Note::parse("---\n{\"id\":\"a\",\"importance\":3}\n---\n", ctx("a.md")).unwrap_err();
    assert!(e.to_string().contains("importance"), "{e}");
}

#[test]
fn crlf_files_parse() {
    let text = "---\r\n{\"id\":\"w\",\"summary\":\"win\"}\r\n---\r\nline\r\n";
    let note = Note::parse(text, ctx("w.md")).unwrap();
    assert_eq!(note.summary, "win");
    assert_eq!(note.body, "line\r\n");
}

#[test]
fn links_ignore_code_and_aliases() {
    let body = "See [[a]] and [[b|Bee]] and [[c#Heading]] and [[a]].\n`[[not-me]]`\n```\n[[nor-me]]\n```\n[[ d ]] [[]] [[unclosed";
    assert_eq!(links_in(body), vec!["a", "b", "c", "d"]);
}

fn arb_text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[ -~]{0,40}",
        "\\PC{0,40}",
        Just(String::new()),
        Just("---".to_string()),
        Just("line\n---\nmore".to_string()),
        Just("\r\n\n".to_string()),
    ]
}

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        "\\PC{0,12}".prop_map(Value::String),
    ];
    leaf.prop_recursive(2, 8, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
            prop::collection::btree_map("[a-z]{1,6}", inner, 0..3)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn arb_note() -> impl Strategy<Value = Note> {
    let id = "[a-z0-9][a-z0-9_-]{0,20}".prop_filter_map("valid id", |s| NoteId::new(&s).ok());
    let ty = prop_oneof![
        Just(None),
        prop::sample::select(NoteType::KNOWN.to_vec()).prop_map(Some),
        "[a-z]{1,8}".prop_map(|s| Some(NoteType::from_name(&s))),
    ];
    let extra = prop::collection::btree_map("x[a-zA-Z]{0,8}", arb_json(), 0..3);
    let trust = prop::option::of(prop::sample::select(vec![
        Trust::Owner,
        Trust::Derived,
        Trust::Peer,
        Trust::Ingested,
        Trust::Quarantined,
    ]));
    let rel = prop::collection::vec(
        (
            "[a-z]{1,8}",
            prop::sample::select(vec![
                RelationKind::Achieves,
                RelationKind::Closes,
                RelationKind::Supersedes,
                RelationKind::Relates,
            ]),
        )
            .prop_map(|(target, kind)| Relation { target, kind }),
        0..3,
    );
    (
        (
            id,
            arb_text(),
            ty,
            prop::collection::vec("[^,\\s]{1,10}", 0..4),
        ),
        (
            prop::option::of(any::<i64>()),
            prop::option::of(any::<i64>()),
            trust,
            prop::option::of(0.0f64..=1.0),
        ),
        (rel, prop::option::of("\\PC{0,10}"), extra, arb_text()),
    )
        .prop_map(
            |(
                (id, summary, note_type, tags),
                (created_at, updated_at, trust, importance),
                (relations, project, extra, body),
            )| {
                let mut note = Note::new(id, summary, body);
                note.note_type = note_type;
                note.tags = tags;
                note.created_at = created_at;
                note.updated_at = updated_at;
                note.trust = trust;
                note.importance = importance;
                note.relations = relations;
                note.project = project;
                note.source = Some(Source::AgentInferred);
                note.status = Some(Status::Working);
                note.origin = Some(serde_json::json!({"by": "agent"}));
                note.extra = extra.into_iter().collect();
                note
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn parse_serialize_round_trip(note in arb_note()) {
        let text = note.serialize();
        let back = Note::parse(&text, ctx("whatever.md")).unwrap();
        prop_assert_eq!(&back, &note);
        prop_assert_eq!(back.serialize(), text);
    }

    #[test]
    fn parse_never_panics(text in "\\PC{0,200}") {
        let _ = Note::parse(&text, ctx("x.md"));
        let _ = Note::parse(&format!("---\n{text}\n---\n"), ctx("x.md"));
    }
}
