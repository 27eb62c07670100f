//! The command groups of `memoria`, one module each. Every command parses its arguments, makes
//! one call to [`memoria_engine::api`] and prints the result: text for people, or with
//! `--json` the API's DTO as it is.

pub mod backups;
pub mod consolidate;
pub mod conversations;
pub mod doctor;
pub mod eval;
pub mod hook;
pub mod model;
pub mod notes;
pub mod projects;
pub mod quarantine;
pub mod review;
pub mod search;
pub mod serve;
pub mod sync;
pub mod transfer;

use std::io::Read;

use anyhow::{Context, Result};
use memoria_engine::api::Location;

/// What every command gets from the top-level options.
#[derive(Debug, Clone)]
pub struct Globals {
    pub location: Location,
    /// Print the API's DTO as JSON instead of text.
    pub json: bool,
}

/// `println!` that returns the write's error instead of panicking, so a closed pipe
/// (`memoria list | head`) ends the command quietly (see `main`).
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        writeln!(std::io::stdout().lock(), $($arg)*)?
    }};
}
/// `print!` that returns the write's error instead of panicking.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        write!(std::io::stdout().lock(), $($arg)*)?
    }};
}
pub(crate) use {out, outln};

/// Prints a DTO as pretty JSON.
pub fn print_json(v: &impl serde::Serialize) -> Result<()> {
    outln!("{}", serde_json::to_string_pretty(v)?);
    Ok(())
}

/// A body argument: the text, or `-` to read it from standard input.
pub fn read_body(arg: Option<&str>) -> Result<Option<String>> {
    match arg {
        Some("-") => {
            let mut s = String::new();
            std::io::stdin()
                .read_to_string(&mut s)
                .context("reading the body from standard input")?;
            Ok(Some(s))
        }
        other => Ok(other.map(String::from)),
    }
}

/// A check that ran and printed the problems it found: the exit code is 1 and nothing more
/// is said.
#[derive(Debug)]
pub struct ProblemsFound;

impl std::fmt::Display for ProblemsFound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("problems found")
    }
}

impl std::error::Error for ProblemsFound {}

/// Whether an error is a write to a closed pipe (the reader went away: not a failure).
pub fn is_closed_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}
