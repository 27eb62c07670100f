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
    let e = Note::parse("---\n{\"id\":7}\n---\n", ctx("a.md")).unwrap_err();
    assert!(e.to_string().contains("id"), "{e}");
}

/// Eight levels of nine aliases each: expanded, 9^8 values from a few hundred bytes.
fn alias_bomb() -> String {
    let mut y = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x]\n");
    for i in 1..=8 {
        let p = i - 1;
        y.push_str(&format!(
            "a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
        ));
    }
    format!("---\n{y}summary: boom\n---\nbody\n")
}

#[test]
fn yaml_aliases_are_refused_without_expanding_them() {
    let text = alias_bomb();
    assert!(text.len() < 700, "{}", text.len());
    let started = std::time::Instant::now();
    let e = Note::parse(&text, ctx("bomb.md")).unwrap_err();
    assert!(matches!(e, ParseError::YamlLimit(_)), "{e}");
    assert!(e.to_string().contains("anchor"), "{e}");
    // Refused at the first anchor: far below anything that expands 9^8 values.
    assert!(started.elapsed() < std::time::Duration::from_secs(2));
    let e = Note::parse("---\nbase: &b x\nother: *b\n---\n", ctx("a.md")).unwrap_err();
    assert!(matches!(e, ParseError::YamlLimit(_)), "{e}");
}

#[test]
fn yaml_depth_and_size_are_capped() {
    let deep = format!("---\nk: {}{}\n---\n", "[".repeat(200), "]".repeat(200));
    let e = Note::parse(&deep, ctx("a.md")).unwrap_err();
    assert!(matches!(e, ParseError::YamlLimit(_)), "{e}");
    assert!(e.to_string().contains("nesting"), "{e}");
    let wide = format!(
        "---\nk: [{}]\n---\n",
        vec!["1"; YAML_MAX_NODES + 5].join(",")
    );
    let e = Note::parse(&wide, ctx("a.md")).unwrap_err();
    assert!(e.to_string().contains("values"), "{e}");
    // Ordinary nesting is fine.
    let ok = "---\nk: [[1, [2, {a: [3]}]]]\n---\n";
    let note = Note::parse(ok, ctx("a.md")).unwrap();
    assert_eq!(note.extra["k"], serde_json::json!([[1, [2, {"a": [3]}]]]));
}

#[test]
fn yaml_scalars_read_as_before() {
    let text = "---\nn: 3\nf: 1.5\nb: true\nnul: ~\ns: '3'\nt: !!str 4\n1.50: key as written\n? [complex]\n: dropped\n---\n";
    let note = Note::parse(text, ctx("a.md")).unwrap();
    let x = &note.extra;
    assert_eq!(x["n"], serde_json::json!(3));
    assert_eq!(x["f"], serde_json::json!(1.5));
    assert_eq!(x["b"], serde_json::json!(true));
    assert_eq!(x["nul"], Value::Null);
    assert_eq!(x["s"], serde_json::json!("3"));
    assert_eq!(x["t"], serde_json::json!("4"));
    assert_eq!(x["1.50"], serde_json::json!("key as written"));
    assert_eq!(x.len(), 7, "{x:?}");
}

#[test]
fn unknown_values_in_known_fields_are_kept_and_written_back() {
    let text = "---\nid: staging-db\nsummary: Staging database\ntype: credential\ntags: [contains-secrets, ops]\ntrust: superuser\nsource: a-colleague\nstatus: draft\nimportance: high\ncreatedAt: yesterday\nrelations:\n  - {target: other, kind: blocks}\n  - {target: next, kind: relates}\nproject: 7\n---\nbody\n";
    let note = Note::parse(text, ctx("staging-db.md")).unwrap();
    assert_eq!(note.note_type, Some(NoteType::Other("credential".into())));
    assert_eq!(note.tags, vec!["contains-secrets", "ops"]);
    // An unknown trust reads as the lowest trust there is.
    assert_eq!(note.trust, Some(Trust::Quarantined));
    assert_eq!(note.source, None);
    assert_eq!(note.status, None);
    assert_eq!(note.importance, None);
    assert_eq!(note.created_at, None);
    assert_eq!(note.project, None);
    assert_eq!(
        note.relations,
        vec![Relation {
            target: "next".into(),
            kind: RelationKind::Relates
        }]
    );
    let out = note.serialize();
    assert_eq!(
        out,
        "---\n{\"id\":\"staging-db\",\"summary\":\"Staging database\",\"type\":\"credential\",\"tags\":[\"contains-secrets\",\"ops\"],\"createdAt\":\"yesterday\",\"trust\":\"superuser\",\"importance\":\"high\",\"source\":\"a-colleague\",\"status\":\"draft\",\"relations\":[{\"target\":\"other\",\"kind\":\"blocks\"},{\"target\":\"next\",\"kind\":\"relates\"}],\"project\":7}\n---\nbody\n"
    );
    // The rewritten file reads the same and writes the same bytes again.
    let again = Note::parse(&out, ctx("staging-db.md")).unwrap();
    assert_eq!(again, note);
    assert_eq!(again.serialize(), out);
}

#[test]
fn a_field_set_by_a_writer_replaces_the_kept_value() {
    let text = "---\n{\"id\":\"a\",\"summary\":42,\"tags\":7,\"trust\":\"superuser\",\"status\":\"draft\"}\n---\n";
    let mut note = Note::parse(text, ctx("a.md")).unwrap();
    assert_eq!(note.tags, vec!["7"]);
    assert_eq!(note.summary, "42");
    assert_eq!(note.serialize(), text);
    note.status = Some(Status::Archived);
    note.trust = Some(Trust::Ingested);
    note.tags.push("more".into());
    note.summary = "Now text".into();
    let out = note.serialize();
    assert_eq!(
        out,
        "---\n{\"id\":\"a\",\"summary\":\"Now text\",\"tags\":[\"7\",\"more\"],\"trust\":\"ingested\",\"status\":\"archived\"}\n---\n"
    );
}

#[test]
fn tags_of_any_shape_are_read() {
    let text = "---\ntags:\n  private: [contains-secrets]\n---\n";
    let note = Note::parse(text, ctx("a.md")).unwrap();
    assert!(
        note.tags.iter().any(|t| t == "contains-secrets"),
        "{:?}",
        note.tags
    );
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

#[test]
fn links_in_tilde_fences_and_long_fences_are_code() {
    let body =
        "[[a]]\n~~~md\n[[in-tildes]]\n```\n[[still-in]]\n~~~\n````\n```\n[[in-long]]\n````\n[[b]]";
    assert_eq!(links_in(body), vec!["a", "b"]);
}

#[test]
fn embeds_of_notes_are_links_and_attachments_are_not() {
    let body = "![[Other note]] ![[diagram.png]] [[doc.PDF]] ![[img/x.png|100]] [[v1.2]] [[.png]]";
    assert_eq!(links_in(body), vec!["Other note", "v1.2", ".png"]);
    assert!(is_attachment("Assets/Diagram.PNG"));
    assert!(!is_attachment("Release v1.2"));
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

#[test]
fn aliases_are_read_from_a_list_or_one_name() {
    let text = "---\naliases: [\"Newton's laws\", \"\", 7]\nalias: Laws\n---\nbody\n";
    let note = Note::parse(text, ctx("laws.md")).unwrap();
    assert_eq!(note.aliases(), ["Newton's laws", "7", "Laws"]);
    let none = Note::parse("body\n", ctx("x.md")).unwrap();
    assert!(none.aliases().is_empty());
}
