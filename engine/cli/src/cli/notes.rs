//! `init`, `add`, `show`, `edit`, `list`, `forget`.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use memoria_engine::api::notes::{self, AddNote, EditNote, ForgetRequest, Forgotten, ListQuery};
use memoria_engine::backup::human_utc;
use memoria_engine::counted;

use super::{Globals, out, outln, print_json, read_body};

#[derive(Args, Debug)]
pub struct InitArgs {
    dir: Option<PathBuf>,
    /// The project's type; projects of one type share `domain` notes.
    #[arg(long = "type", value_name = "TYPE")]
    project_type: Option<String>,
}

pub fn init(g: &Globals, a: &InitArgs) -> Result<()> {
    let done = notes::init(&g.location, a.dir.as_deref(), a.project_type.as_deref())?;
    if g.json {
        return print_json(&done);
    }
    outln!("home: {}", done.home);
    match &done.project {
        Some(p) => outln!("project: {} ({})", p.root, p.id),
        None => outln!(
            "no project: run `memoria init DIR` inside a project folder to give it its own notes"
        ),
    }
    let model = memoria_engine::api::model::install_dir(&g.location)?;
    if !model.join("model.onnx").exists() {
        outln!(
            "no embedding model in {}: search matches words, not meaning, until you run `{}`",
            model.display(),
            super::doctor::INSTALL_MODEL
        );
    }
    Ok(())
}

#[derive(Args, Debug)]
pub struct AddArgs {
    #[arg(long)]
    summary: String,
    /// user, feedback, project, reference or domain.
    #[arg(long = "type", value_name = "TYPE")]
    note_type: Option<String>,
    /// Comma-separated tags.
    #[arg(long, value_delimiter = ',')]
    tags: Vec<String>,
    /// user, project or domain (default: user for user notes, else the current project).
    #[arg(long)]
    scope: Option<String>,
    #[arg(long)]
    id: Option<String>,
    /// The body text, or `-` to read it from standard input.
    #[arg(long)]
    body: Option<String>,
}

pub fn add(g: &Globals, a: &AddArgs) -> Result<()> {
    let new = AddNote {
        summary: a.summary.clone(),
        body: read_body(a.body.as_deref())?.unwrap_or_default(),
        note_type: a.note_type.clone(),
        tags: a.tags.clone(),
        scope: a.scope.clone(),
        id: a.id.clone(),
    };
    let written = notes::add(&mut g.location.open()?, new)?;
    if g.json {
        return print_json(&written);
    }
    outln!("{}", written.id);
    Ok(())
}

#[derive(Args, Debug)]
pub struct ShowArgs {
    id: String,
    #[arg(long)]
    scope: Option<String>,
}

pub fn show(g: &Globals, a: &ShowArgs) -> Result<()> {
    let n = notes::show(&g.location.open()?, &a.id, a.scope.as_deref())?;
    if g.json {
        return print_json(&n);
    }
    outln!("id:       {}", n.id);
    outln!("scope:    {}", n.scope);
    outln!("summary:  {}", n.summary);
    if let Some(t) = &n.note_type {
        outln!("type:     {t}");
    }
    if !n.tags.is_empty() {
        outln!("tags:     {}", n.tags.join(", "));
    }
    if let Some(t) = n.updated_at {
        outln!("updated:  {}", human_utc(t));
    }
    if let Some(s) = &n.status {
        outln!("status:   {s}");
    }
    if let Some(t) = n.trust.as_deref().filter(|t| *t != "owner") {
        outln!("trust:    {t}");
    }
    if let Some(h) = &n.held_back {
        outln!("{h}");
    }
    outln!("path:     {}", n.path);
    if !n.backlinks.is_empty() {
        let b: Vec<&str> = n.backlinks.iter().map(|r| r.id.as_str()).collect();
        outln!("linked from: {}", b.join(", "));
    }
    if let Some(e) = &n.error {
        outln!("ERROR:    {e}");
    }
    outln!("---");
    out!("{}", n.body);
    if !n.body.ends_with('\n') {
        outln!();
    }
    Ok(())
}

#[derive(Args, Debug)]
pub struct EditArgs {
    id: String,
    #[arg(long)]
    summary: Option<String>,
    /// The new body, or `-` to read it from standard input.
    #[arg(long)]
    body: Option<String>,
    /// Comma-separated tags (replaces the tags; give an empty string to clear them).
    #[arg(long)]
    tags: Option<String>,
    #[arg(long = "type", value_name = "TYPE")]
    note_type: Option<String>,
    /// From 0 to 1: how much the note counts in recall (0.5 when never set).
    #[arg(long, value_name = "0..1")]
    importance: Option<f64>,
    /// Edit the body in $VISUAL or $EDITOR (vi when neither is set), then save it.
    #[arg(long, conflicts_with = "body")]
    editor: bool,
    #[arg(long)]
    scope: Option<String>,
}

/// The body after a person edited it in their editor; `None` when they left it as it was.
fn body_in_editor(g: &Globals, a: &EditArgs) -> Result<Option<String>> {
    let engine = g.location.open()?;
    let note = notes::show(&engine, &a.id, a.scope.as_deref())?;
    if note.error.is_some() {
        anyhow::bail!(
            "note `{}` does not parse, so its body cannot be edited here: open {} in an editor and fix its frontmatter",
            note.id,
            note.path
        );
    }
    let dir = tempfile::tempdir().context("making a folder for the edit")?;
    let file = dir.path().join(format!("{}.md", note.id));
    std::fs::write(&file, &note.body).context("writing the body to edit")?;
    let editor = std::env::var("VISUAL")
        .or_else(|_| std::env::var("EDITOR"))
        .ok()
        .filter(|e| !e.trim().is_empty())
        .unwrap_or_else(|| "vi".to_owned());
    // The editor may carry arguments (`code --wait`): run it through the shell, the file last.
    let status = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("{editor} \"$1\""))
        .arg("sh")
        .arg(&file)
        .status()
        .with_context(|| format!("starting the editor `{editor}`"))?;
    if !status.success() {
        anyhow::bail!("the editor `{editor}` exited with {status}: nothing was changed");
    }
    let edited = std::fs::read_to_string(&file).context("reading the edited body back")?;
    Ok((edited != note.body).then_some(edited))
}

pub fn edit(g: &Globals, a: &EditArgs) -> Result<()> {
    let body = if a.editor {
        match body_in_editor(g, a)? {
            Some(b) => Some(b),
            None if a.summary.is_none()
                && a.tags.is_none()
                && a.note_type.is_none()
                && a.importance.is_none() =>
            {
                outln!("the body was left as it was: nothing changed");
                return Ok(());
            }
            None => None,
        }
    } else {
        read_body(a.body.as_deref())?
    };
    let edit = EditNote {
        summary: a.summary.clone(),
        body,
        tags: a
            .tags
            .as_deref()
            .map(|t| t.split(',').map(String::from).collect()),
        note_type: a.note_type.clone(),
        importance: a.importance,
    };
    let written = notes::edit(&mut g.location.open()?, &a.id, a.scope.as_deref(), edit)?;
    if g.json {
        return print_json(&written);
    }
    outln!("{}", written.id);
    Ok(())
}

#[derive(Args, Debug)]
pub struct ListArgs {
    #[arg(long)]
    scope: Option<String>,
    #[arg(long = "type", value_name = "TYPE")]
    note_type: Option<String>,
    #[arg(long)]
    tag: Option<String>,
}

pub fn list(g: &Globals, a: &ListArgs) -> Result<()> {
    let q = ListQuery {
        scope: a.scope.clone(),
        note_type: a.note_type.clone(),
        tag: a.tag.clone(),
    };
    let engine = g.location.open()?;
    let rows = notes::list(&engine, &q)?;
    if g.json {
        return print_json(&rows);
    }
    if rows.is_empty() {
        outln!("no notes");
    }
    // A project's scope key is a long hash: the list names the project by its folder.
    let project = engine.project().map(|p| {
        let name = p
            .root
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "project".into());
        (p.scope().key(), format!("{name}/"))
    });
    let shown = |scope: &str| -> String {
        match &project {
            Some((key, name)) if key == scope => name.clone(),
            _ => scope.to_owned(),
        }
    };
    for r in &rows {
        let ty = r.note_type.as_deref().unwrap_or("-");
        match &r.error {
            Some(e) => outln!(
                "{:<10} {:<32} {:<10} ! {} — {e}",
                shown(&r.scope),
                r.id,
                ty,
                r.rel_path
            ),
            None => outln!(
                "{:<10} {:<32} {:<10} {}{}",
                shown(&r.scope),
                r.id,
                ty,
                r.summary,
                r.status
                    .as_deref()
                    .map(|s| format!("  ({s})"))
                    .unwrap_or_default()
            ),
        }
    }
    Ok(())
}

#[derive(Args, Debug)]
pub struct ForgetArgs {
    /// The note to forget.
    #[arg(
        required_unless_present = "conversation",
        conflicts_with = "conversation"
    )]
    id: Option<String>,
    /// Forget this captured conversation instead (with --purge: every copy, for good).
    #[arg(long, value_name = "ID")]
    conversation: Option<String>,
    /// Required: forgetting is deliberate.
    #[arg(long)]
    confirm: bool,
    /// Also remove the note's backups and every copy in the index files: it cannot be
    /// restored afterwards.
    #[arg(long)]
    purge: bool,
    #[arg(long)]
    scope: Option<String>,
}

pub fn forget(g: &Globals, a: &ForgetArgs) -> Result<()> {
    if let Some(conversation) = &a.conversation {
        return super::conversations::forget(g, conversation, a.scope.as_deref(), a.purge);
    }
    let req = ForgetRequest {
        id: a.id.clone().unwrap_or_default(),
        scope: a.scope.clone(),
        confirm: a.confirm,
        purge: a.purge,
    };
    let done = notes::forget(&mut g.location.open()?, &req)?;
    if g.json {
        return print_json(&done);
    }
    match done {
        Forgotten::Purged(p) => outln!(
            "forgot {} for good: the note, {} and its copies in the index are gone",
            p.id,
            counted(p.backups_removed, "backup")
        ),
        Forgotten::Backup(b) => outln!(
            "forgot {} (backup {}; `memoria restore {}` brings it back)",
            b.note_id,
            b.backup_id,
            b.backup_id
        ),
    }
    Ok(())
}
