//! `projects` and `projects pair`.

use std::path::PathBuf;

use anyhow::Result;
use clap::Subcommand;
use memoria_engine::api::projects;

use super::{Globals, outln, print_json};

#[derive(Subcommand, Debug)]
pub enum ProjectsCommand {
    /// Confirm that DIR is another checkout of the project its .memoria/project.json names (a
    /// git worktree, a second clone, a moved folder). It keeps its own notes in its own MEMORY/.
    Pair { dir: PathBuf },
}

pub fn run(g: &Globals, command: Option<&ProjectsCommand>) -> Result<()> {
    match command {
        None => list(g),
        Some(ProjectsCommand::Pair { dir }) => pair(g, dir),
    }
}

fn list(g: &Globals) -> Result<()> {
    let rows = projects::list(&g.location)?;
    if g.json {
        return print_json(&rows);
    }
    if rows.is_empty() {
        outln!("no projects yet: `memoria init DIR` makes a folder a project");
    }
    for f in &rows {
        let gone = if f.present { "" } else { "  (folder gone)" };
        outln!("{:<52} {}{gone}", f.scope, f.root);
    }
    Ok(())
}

fn pair(g: &Globals, dir: &std::path::Path) -> Result<()> {
    let paired = projects::pair(&g.location, dir)?;
    if g.json {
        return print_json(&paired);
    }
    if paired.unchanged {
        outln!("{} is already bound to {}", paired.root, paired.scope);
    } else if let Some(old) = &paired.took_over_from {
        outln!(
            "{} now holds {} (it was at {old}, which no longer holds the project)",
            paired.root,
            paired.scope
        );
    } else {
        outln!(
            "paired {} as {}: it sees only the notes in its own MEMORY folder",
            paired.root,
            paired.scope
        );
    }
    Ok(())
}
