use super::*;

fn names() -> Names {
    let mut n = Names::default();
    n.add_note("Daily/2024-01-02.md", &[]);
    n.add_note(
        "Work/Meetings/Standup 2024-07-01.md",
        &["Daily standup".into()],
    );
    n.add_note("Work/Plan.md", &[]);
    n.add_note("Home/Plan.md", &[]);
    n.add_note("Plan.md", &[]);
    n.add_note("Ideas.md", &[]);
    n.add_file("Assets/diagram.png");
    n.add_file("Work/img/x y.png");
    n.add_file("doc.pdf");
    n
}

fn note(p: &str) -> Option<Target> {
    Some(Target::Note(p.into()))
}

#[test]
fn links_resolve_as_obsidian_resolves_them() {
    let n = names();
    let r = |link: &str, from: &str| n.resolve(link, from, false);
    // A path from the root, without or with its extension, in any case.
    assert_eq!(
        r("Daily/2024-01-02", "Ideas.md"),
        note("Daily/2024-01-02.md")
    );
    assert_eq!(
        r("daily/2024-01-02.md", "Ideas.md"),
        note("Daily/2024-01-02.md")
    );
    // A bare name: the shortest unique path.
    assert_eq!(
        r("Standup 2024-07-01", "Ideas.md"),
        note("Work/Meetings/Standup 2024-07-01.md")
    );
    // A partial path.
    assert_eq!(
        r("Meetings/Standup 2024-07-01", "Ideas.md"),
        note("Work/Meetings/Standup 2024-07-01.md")
    );
    // A name several notes have: the one in the linking note's folder, else the root-most.
    assert_eq!(r("Plan", "Work/Notes.md"), note("Work/Plan.md"));
    assert_eq!(r("Plan", "Daily/2024-01-02.md"), note("Plan.md"));
    assert_eq!(r("Home/Plan", "Work/Notes.md"), note("Home/Plan.md"));
    // Relative paths.
    assert_eq!(r("../Plan", "Work/Meetings/x.md"), note("Work/Plan.md"));
    // An alias.
    assert_eq!(
        r("daily standup", "Ideas.md"),
        note("Work/Meetings/Standup 2024-07-01.md")
    );
    // Attachments, by name or path.
    assert_eq!(
        r("diagram.png", "Ideas.md"),
        Some(Target::File("Assets/diagram.png".into()))
    );
    assert_eq!(
        r("doc.pdf", "Work/Plan.md"),
        Some(Target::File("doc.pdf".into()))
    );
    // Nothing of that name; a path that climbs out.
    assert_eq!(r("Nowhere", "Ideas.md"), None);
    assert_eq!(r("../../Plan", "Work/x.md"), None);
    // A Markdown link is relative to its note first.
    assert_eq!(
        n.resolve("img/x y.png", "Work/Plan.md", true),
        Some(Target::File("Work/img/x y.png".into()))
    );
    assert_eq!(
        n.resolve("Plan.md", "Home/x.md", true),
        note("Home/Plan.md")
    );
}

fn rewrite(body: &str) -> String {
    let n = names();
    let ids: HashMap<&str, &str> = [
        ("Daily/2024-01-02.md", "2024-01-02"),
        ("Work/Meetings/Standup 2024-07-01.md", "standup-2024-07-01"),
        ("Work/Plan.md", "work-plan"),
        ("Home/Plan.md", "home-plan"),
        ("Plan.md", "plan"),
        ("Ideas.md", "ideas"),
    ]
    .into();
    let files: HashMap<&str, &str> = [
        ("Assets/diagram.png", "attachments/Assets/diagram.png"),
        ("Work/img/x y.png", "attachments/Work/img/x y.png"),
        ("doc.pdf", "attachments/doc.pdf"),
    ]
    .into();
    rewrite_links(body, |link, markdown| {
        match n.resolve(link, "Work/Notes.md", markdown)? {
            Target::Note(p) => Some(Rewrite::Note(ids[p.as_str()].to_owned())),
            Target::File(p) => Some(Rewrite::File(files[p.as_str()].to_owned())),
        }
    })
}

#[test]
fn links_are_rewritten_to_what_they_name_and_stay_readable() {
    let cases = [
        ("[[Daily/2024-01-02]]", "[[2024-01-02|Daily/2024-01-02]]"),
        (
            "[[Work/Meetings/Standup 2024-07-01#Decisions|the standup]]",
            "[[standup-2024-07-01#Decisions|the standup]]",
        ),
        (
            "[[Meetings/Standup 2024-07-01#^block-1]]",
            "[[standup-2024-07-01#^block-1|Meetings/Standup 2024-07-01#^block-1]]",
        ),
        (
            "[[Standup 2024-07-01#^block-1]]",
            "[[Standup 2024-07-01#^block-1]]",
        ),
        // Already its note's id: left as written.
        ("[[Ideas]] [[ideas#Top]]", "[[Ideas]] [[ideas#Top]]"),
        ("[[Plan]]", "[[work-plan|Plan]]"),
        ("![[Ideas]]", "![[Ideas]]"),
        ("![[Daily/2024-01-02]]", "![[2024-01-02|Daily/2024-01-02]]"),
        // A path whose slug is its note's id names it already.
        (
            "![[Home/Plan]] [[Home/Plan]]",
            "![[Home/Plan]] [[Home/Plan]]",
        ),
        ("![[diagram.png]]", "![[attachments/Assets/diagram.png]]"),
        (
            "![[diagram.png|200]]",
            "![[attachments/Assets/diagram.png|200]]",
        ),
        ("[[doc.pdf#page=3]]", "[[attachments/doc.pdf#page=3]]"),
        (
            "![alt](img/x%20y.png)",
            "![alt](attachments/Work/img/x%20y.png)",
        ),
        (
            "![alt](<img/x y.png>)",
            "![alt](attachments/Work/img/x%20y.png)",
        ),
        (
            "![alt](img/x%20y.png \"A title\")",
            "![alt](attachments/Work/img/x%20y.png \"A title\")",
        ),
        ("[the plan](../Home/Plan.md)", "[[home-plan|the plan]]"),
        (
            "[standup](Meetings/Standup%202024-07-01.md#Decisions)",
            "[[standup-2024-07-01#Decisions|standup]]",
        ),
        (
            "[daily standup](<Daily standup>)",
            "[[standup-2024-07-01|daily standup]]",
        ),
        // In a table the separator is escaped.
        (
            "| [[Daily/2024-01-02]] | x |",
            "| [[2024-01-02\\|Daily/2024-01-02]] | x |",
        ),
        ("| [[Daily/2024-01-02\\|day]] |", "| [[2024-01-02\\|day]] |"),
        // Left alone: what names nothing, URLs, anchors, code.
        ("[[Nowhere]] [x](Nowhere.md)", "[[Nowhere]] [x](Nowhere.md)"),
        (
            "[site](https://example.com/Plan.md)",
            "[site](https://example.com/Plan.md)",
        ),
        ("[top](#Plan)", "[top](#Plan)"),
        (
            "`[[Daily/2024-01-02]]` and ``[[Plan]]``",
            "`[[Daily/2024-01-02]]` and ``[[Plan]]``",
        ),
        ("```\n[[Plan]]\n```\n", "```\n[[Plan]]\n```\n"),
        (
            "~~~md\n[[Plan]]\n~~~\n[[Plan]]",
            "~~~md\n[[Plan]]\n~~~\n[[work-plan|Plan]]",
        ),
        ("- [ ] task [[", "- [ ] task [["),
        ("é [[Plan]] ü", "é [[work-plan|Plan]] ü"),
    ];
    for (body, want) in cases {
        assert_eq!(rewrite(body), want, "{body}");
    }
}

#[test]
fn inline_tags_are_read_as_obsidian_reads_them() {
    let body = "# Title\n## Heading\n#inline-tag and #todo/urgent, #Todo/Urgent again.\n\
        Issue #123 and #2024 are numbers; #y2024 is a tag. #日本語 too.\n\
        See https://x.org/page#frag and [a](#anchor) and [[Note#Heading]] and C#sharp.\n\
        `#in-code` and `code`#after-code\n```\n#in-fence\n```\n#after-fence \t#tabbed #trailing/ end \
        #ÜBER #über";
    assert_eq!(
        inline_tags(body),
        [
            "inline-tag",
            "todo/urgent",
            "y2024",
            "日本語",
            "after-fence",
            "tabbed",
            "trailing",
            "ÜBER"
        ]
    );
}

#[test]
fn frontmatter_dates_set_the_times() {
    let map = |pairs: &[(&str, &str)]| -> Map<String, Value> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), Value::String(v.to_string())))
            .collect()
    };
    let day = day_ms(2024, 1, 2);
    assert_eq!(
        frontmatter_times(&map(&[("created", "2024-01-02")])),
        (Some(day), None)
    );
    assert_eq!(
        frontmatter_times(&map(&[
            ("date", "2023-05-06"),
            ("Date Created", "2024-01-02")
        ])),
        (Some(day), None),
        "a created key wins over `date`"
    );
    assert_eq!(
        frontmatter_times(&map(&[("modified", "2024-01-02T10:30")])),
        (None, Some(day + (10 * 60 + 30) * 60_000))
    );
    assert_eq!(
        frontmatter_times(&map(&[("updated_at", "2024-01-02 10:30:15.250+02:00")])),
        (None, Some(day + ((8 * 60 + 30) * 60 + 15) * 1000 + 250))
    );
    assert_eq!(parse_time("2024-01-02T00:00:00Z"), Some(day));
    assert_eq!(
        parse_time("2024-01-02T00:00:00-01:30"),
        Some(day + 90 * 60_000)
    );
    for bad in [
        "yesterday",
        "2024-13-01",
        "2024-01-02T25:00",
        "2024/01/02",
        "2024-01-02x",
        "",
    ] {
        assert_eq!(parse_time(bad), None, "{bad}");
    }
    assert_eq!(
        frontmatter_times(&map(&[("created", "soon")])),
        (None, None)
    );
}
