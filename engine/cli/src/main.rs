//! `memoria`: the command line over the engine's API. Human output by default, `--json` for
//! scripts (the API's DTOs); exit codes 0 ok, 1 error, 2 usage. Each command group lives in a
//! module under `cli/`; every command parses, calls the API once and prints.

mod cli;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::{Parser, Subcommand};
use cli::Globals;
use memoria_engine::api::Location;

#[path = "cli/hints.rs"]
mod hints;

/// mimalloc instead of glibc's malloc: glibc keeps the pages freed after building a large
/// index (one arena per thread, trimmed only from the top), so the process stays large long
/// after the work; mimalloc returns them (docs/BENCHMARKS.md has the figures). ONNX Runtime's
/// own allocations are unaffected (its library keeps glibc's malloc).
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser, Debug)]
#[command(
    name = "memoria",
    version,
    about = "Local-first long-term memory for you and your AI agents"
)]
struct Cli {
    /// Memoria's home folder (default: $MEMORIA_HOME, else the platform data folder).
    #[arg(long, global = true, value_name = "DIR")]
    home: Option<PathBuf>,
    /// The project folder (default: the current folder; the project is found walking up).
    #[arg(long, global = true, value_name = "DIR")]
    project: Option<PathBuf>,
    /// Print machine-readable JSON instead of text.
    #[arg(long, global = true)]
    json: bool,
    /// The embedding model folder (default: $MEMORIA_MODEL_DIR, else $MEMORIA_HOME/models/default).
    #[arg(long, global = true, value_name = "DIR")]
    model_dir: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Create the home folders; with DIR, also make DIR a project (.memoria/project.json, MEMORY/).
    Init(cli::notes::InitArgs),
    /// Add a note and print its id.
    Add(cli::notes::AddArgs),
    /// Show a note with its metadata and backlinks.
    Show(cli::notes::ShowArgs),
    /// Change a note's summary, body, tags or type.
    Edit(cli::notes::EditArgs),
    /// List notes (parse errors are shown, never hidden).
    List(cli::notes::ListArgs),
    /// Back a note up, then remove it; with --purge, remove it and every copy Memoria kept.
    /// `--conversation ID --purge` removes a captured conversation and every copy of it.
    Forget(cli::notes::ForgetArgs),
    /// Keep a conversation with an agent (a transcript: JSON Lines, Claude Code's, OpenClaw's)
    /// in the raw log on this machine; its messages are recalled beside notes.
    Capture(cli::conversations::CaptureArgs),
    /// List the captured conversations; with ID, show its messages.
    Conversations(cli::conversations::ConversationsArgs),
    /// Working memory: short-lived blocks kept at hand (24 hours unless told), recalled beside
    /// notes until they expire; `working add TEXT`, `working rm KEY`.
    Working(cli::conversations::WorkingArgs),
    /// Search the visible notes: BM25 and local embeddings, fused and ranked.
    Search(cli::search::SearchArgs),
    /// Print the recall block an agent turn gets for MESSAGE.
    Recall(cli::search::RecallArgs),
    /// Per-message recall for agent hosts (reads the host's hook JSON on stdin).
    Hook {
        #[command(subcommand)]
        host: cli::hook::HookHost,
    },
    /// List backups, newest first.
    Backups(cli::backups::BackupsArgs),
    /// Put a backup back into the scope it came from.
    Restore(cli::backups::RestoreArgs),
    /// Import a folder of Markdown (an Obsidian vault, OpenClaw's MEMORY.md + memory/*.md, an export).
    Import(cli::transfer::ImportArgs),
    /// Copy every visible note into DIR/<scope>/.
    Export(cli::transfer::ExportArgs),
    /// The review queue (待整理): same topic, broken links, missing files, unused and too-long
    /// notes; `review dismiss FINDING_ID` hides one until its notes change.
    Review(cli::review::ReviewArgs),
    /// Merge notes of one scope: prints the plan and a draft; --apply keeps the oldest id,
    /// deletes the others, relinks and backs up every note it changes.
    Merge(cli::review::MergeArgs),
    /// Fold clusters of recent working notes that say the same thing, and the notes that
    /// achieved a closed goal, into one note each; the originals are marked consolidated.
    Consolidate(cli::consolidate::ConsolidateArgs),
    /// Hide a provider's memory (a host's or model's messages, what was derived from them, the
    /// notes it captured) from every search, recall and agent: preview, apply, release, list, audit.
    Quarantine {
        #[command(subcommand)]
        command: cli::quarantine::QuarantineCommand,
    },
    /// Machine-local settings: list, `get KEY`, `set KEY VALUE`, `unset KEY`.
    Config(cli::review::ConfigArgs),
    /// Paths, counts, files with errors and index health; exits 1 when it found a problem.
    Doctor(cli::doctor::DoctorArgs),
    /// Keep the index in step with edits made outside Memoria until interrupted.
    Watch,
    /// Project folders bound on this machine; `pair DIR` confirms another checkout of a project.
    Projects {
        #[command(subcommand)]
        command: Option<cli::projects::ProjectsCommand>,
    },
    /// The embedding model semantic recall runs on: `model install` builds and installs it.
    Model {
        #[command(subcommand)]
        command: cli::model::ModelCommand,
    },
    /// Cloud sync: sign in and out, status, sync now, turn on and off.
    Sync {
        #[command(subcommand)]
        command: cli::sync::SyncCommand,
    },
    /// Notes held back by sync conflicts; with ID, what changed here and in the cloud, as diffs.
    Conflicts(cli::sync::ConflictsArgs),
    /// Resolve a sync conflict: keep this machine's version, the cloud's, both, or a merged file.
    Resolve(cli::sync::ResolveArgs),
    /// Serve Memoria's tools to an agent over MCP (stdio by default). The scope is locked to the
    /// project of the working directory (or --project) plus the user's notes.
    Mcp {
        /// Serve streamable HTTP on this address (e.g. 127.0.0.1:7424) instead of stdio.
        #[arg(long, value_name = "ADDR:PORT")]
        http: Option<std::net::SocketAddr>,
        /// Bearer token clients must send over HTTP. Without it, on loopback, a token is generated
        /// once and kept in the home (`mcp-token`, readable by you only); off loopback it is required.
        #[arg(long, env = "MEMORIA_MCP_TOKEN", hide_env_values = true)]
        token: Option<String>,
        /// On loopback, accept clients without a bearer token (any local program can then read
        /// your agent-visible memory).
        #[arg(long, conflicts_with = "token")]
        no_token: bool,
    },
    /// Measure retrieval quality.
    #[command(subcommand)]
    Eval(cli::eval::EvalCommand),
    /// Measure speed and memory.
    #[command(subcommand)]
    Bench(cli::eval::BenchCommand),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let json = cli.json;
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        // The reader of standard output went away (`memoria list | head`): not a failure.
        Err(e) if cli::is_closed_pipe(&e) => ExitCode::SUCCESS,
        // The problems were printed already (`doctor`).
        Err(e) if e.downcast_ref::<cli::ProblemsFound>().is_some() => ExitCode::from(1),
        Err(e) => {
            hints::print_error(&e, json);
            ExitCode::from(1)
        }
    }
}

impl Cli {
    fn globals(&self) -> Globals {
        Globals {
            location: Location {
                home: self.home.clone(),
                project: self.project.clone(),
                working_dir: std::env::current_dir().ok(),
                model_dir: self.model_dir.clone(),
            },
            json: self.json,
        }
    }
}

fn run(cli: Cli) -> Result<()> {
    let json = cli.json;
    let g = cli.globals();
    match &cli.command {
        Command::Init(a) => cli::notes::init(&g, a)?,
        Command::Add(a) => cli::notes::add(&g, a)?,
        Command::Show(a) => cli::notes::show(&g, a)?,
        Command::Edit(a) => cli::notes::edit(&g, a)?,
        Command::List(a) => cli::notes::list(&g, a)?,
        Command::Forget(a) => cli::notes::forget(&g, a)?,
        Command::Capture(a) => cli::conversations::capture(&g, a)?,
        Command::Conversations(a) => cli::conversations::conversations(&g, a)?,
        Command::Working(a) => cli::conversations::working(&g, a)?,
        Command::Search(a) => cli::search::search(&g, a)?,
        Command::Recall(a) => cli::search::recall(&g, a)?,
        Command::Hook { host } => cli::hook::run(&g, host)?,
        Command::Backups(a) => cli::backups::list(&g, a)?,
        Command::Restore(a) => cli::backups::restore(&g, a)?,
        Command::Import(a) => cli::transfer::import(&g, a)?,
        Command::Export(a) => cli::transfer::export(&g, a)?,
        Command::Review(a) => cli::review::review(&g, a)?,
        Command::Merge(a) => cli::review::merge(&g, a)?,
        Command::Consolidate(a) => cli::consolidate::run(&g, a)?,
        Command::Quarantine { command } => cli::quarantine::run(&g, command)?,
        Command::Config(a) => cli::review::config(&g, a)?,
        Command::Doctor(a) => cli::doctor::run(&g, a)?,
        Command::Projects { command } => cli::projects::run(&g, command.as_ref())?,
        Command::Model { command } => cli::model::run(&g, command)?,
        Command::Sync { command } => cli::sync::run(&g, command)?,
        Command::Conflicts(a) => cli::sync::list_conflicts(&g, a)?,
        Command::Resolve(a) => cli::sync::resolve(&g, a)?,
        Command::Eval(c) => cli::eval::eval(c, json)?,
        Command::Bench(c) => cli::eval::bench(c, json)?,
        Command::Watch => cli::serve::watch(&g)?,
        Command::Mcp {
            http,
            token,
            no_token,
        } => cli::serve::mcp(&g, *http, token.clone(), *no_token)?,
    }
    Ok(())
}
