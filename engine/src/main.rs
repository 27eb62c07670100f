//! `memoria`: the command line over the engine. Human output by default, `--json` for scripts;
//! exit codes 0 ok, 1 error, 2 usage.

use std::io::{IsTerminal, Read};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use memoria_engine::backup::human_utc;
use memoria_engine::vault::OpenOptions;
use memoria_engine::{Engine, NewNote, NoteEdit, Project, Scope, ScopeChoice, doctor, import};
use memoria_shared::NoteType;
use serde_json::json;

/// mimalloc instead of glibc's malloc: glibc kept the pages freed after building a large index
/// (one arena per thread, trimmed only from the top), so 100k notes sat at 358 MB after search
/// against 245–255 MB with mimalloc, and peaked at 368 MB against 279–292 MB
/// (docs/BENCHMARKS.md). ONNX Runtime's own allocations are unaffected (its library keeps
/// glibc's malloc).
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
    Init {
        dir: Option<PathBuf>,
        /// The project's type; projects of one type share `domain` notes.
        #[arg(long = "type", value_name = "TYPE")]
        project_type: Option<String>,
    },
    /// Add a note and print its id.
    Add {
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
    },
    /// Show a note with its metadata and backlinks.
    Show {
        id: String,
        #[arg(long)]
        scope: Option<String>,
    },
    /// Change a note's summary, body, tags or type.
    Edit {
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
        #[arg(long)]
        scope: Option<String>,
    },
    /// List notes (parse errors are shown, never hidden).
    List {
        #[arg(long)]
        scope: Option<String>,
        #[arg(long = "type", value_name = "TYPE")]
        note_type: Option<String>,
        #[arg(long)]
        tag: Option<String>,
    },
    /// Back a note up, then remove it; with --purge, remove it and every copy Memoria kept.
    Forget {
        id: String,
        /// Required: forgetting is deliberate.
        #[arg(long)]
        confirm: bool,
        /// Also remove the note's backups and every copy in the index files: it cannot be
        /// restored afterwards.
        #[arg(long)]
        purge: bool,
        #[arg(long)]
        scope: Option<String>,
    },
    /// Search the visible notes: BM25 and local embeddings, fused and ranked.
    Search {
        query: String,
        #[arg(long, default_value_t = 10)]
        limit: usize,
        /// Show the parts of each result's score.
        #[arg(long)]
        explain: bool,
        #[arg(long, value_enum, default_value_t = memoria_engine::recall::Mode::Hybrid)]
        mode: memoria_engine::recall::Mode,
    },
    /// Print the recall block an agent turn gets for MESSAGE.
    Recall {
        message: String,
        /// The block's size in characters (default: 2,400 scaled to --window).
        #[arg(long)]
        budget: Option<usize>,
        /// The model's context window in tokens (default 100,000).
        #[arg(long)]
        window: Option<usize>,
    },
    /// Per-message recall for agent hosts (reads the host's hook JSON on stdin).
    Hook {
        #[command(subcommand)]
        host: HookHost,
    },
    /// List backups, newest first.
    Backups {
        #[arg(long, default_value_t = 50)]
        limit: usize,
    },
    /// Put a backup back into the scope it came from.
    Restore { backup_id: String },
    /// Import a folder of Markdown (an Obsidian vault, OpenClaw's MEMORY.md + memory/*.md, an export).
    Import {
        dir: PathBuf,
        #[arg(long)]
        scope: Option<String>,
    },
    /// Copy every visible note into DIR/<scope>/.
    Export { dir: PathBuf },
    /// Paths, counts, files with errors and index health.
    Doctor {
        /// Delete the index and rebuild it from the notes (usage counts restart from zero).
        #[arg(long)]
        rebuild: bool,
    },
    /// Keep the index in step with edits made outside Memoria until interrupted.
    Watch,
    /// Project folders bound on this machine; `pair DIR` confirms another checkout of a project.
    Projects {
        #[command(subcommand)]
        command: Option<ProjectsCommand>,
    },
    // --- cloud sync (issue 5) ---
    /// Cloud sync: sign in and out, status, sync now, turn on and off.
    Sync {
        #[command(subcommand)]
        command: SyncCommand,
    },
    /// Notes held back by sync conflicts.
    Conflicts,
    /// Resolve a sync conflict: keep this machine's version, the cloud's, both, or a merged file.
    Resolve {
        id: String,
        /// local (this machine), cloud, or both (the cloud's version becomes a new note beside).
        #[arg(long, conflicts_with = "merged_file")]
        keep: Option<String>,
        /// A hand-merged note file (or just its body) to keep.
        #[arg(long, value_name = "FILE")]
        merged_file: Option<PathBuf>,
        /// user or project (default: the first scope with a conflict for ID).
        #[arg(long)]
        scope: Option<String>,
    },
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
    Eval(EvalCommand),
    /// Measure speed and memory.
    #[command(subcommand)]
    Bench(BenchCommand),
}

#[derive(Subcommand, Debug)]
enum ProjectsCommand {
    /// Confirm that DIR is another checkout of the project its .memoria/project.json names (a
    /// git worktree, a second clone, a moved folder). It keeps its own notes in its own MEMORY/.
    Pair { dir: PathBuf },
}

#[derive(Subcommand, Debug)]
enum HookHost {
    /// Claude Code's UserPromptSubmit and SessionStart hooks.
    ClaudeCode,
}

#[derive(Debug, Subcommand)]
enum EvalCommand {
    /// Index a BEIR corpus into a temporary home and report nDCG@10, Recall@100, MRR@10.
    Beir(memoria_engine::recall::cli::EvalArgs),
}

#[derive(Debug, Subcommand)]
enum BenchCommand {
    /// Search latency, indexing throughput and memory of hybrid recall.
    Recall(memoria_engine::recall::cli::BenchArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let json = cli.json;
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let mut message = format!("{e:#}");
            if let Some(memoria_engine::Error::ProjectClaimed { dir, .. }) =
                e.downcast_ref::<memoria_engine::Error>()
            {
                message.push_str(&format!(
                    " (to pair it: `memoria projects pair {}`)",
                    dir.display()
                ));
            }
            if json {
                eprintln!("{}", json!({ "error": { "message": message } }));
            } else {
                eprintln!("memoria: {message}");
            }
            ExitCode::from(1)
        }
    }
}

fn open(cli: &Cli) -> Result<Engine> {
    Ok(Engine::open(open_options(cli)?)?)
}

/// How `open` opens the engine (a session's engines open the same way).
fn open_options(cli: &Cli) -> Result<OpenOptions> {
    let project_dir = match &cli.project {
        Some(dir) => {
            if Project::discover(dir)?.is_none() {
                anyhow::bail!(
                    "{} is not inside a Memoria project: run `memoria init {}` first",
                    dir.display(),
                    dir.display()
                );
            }
            Some(dir.clone())
        }
        None => std::env::current_dir().ok(),
    };
    Ok(OpenOptions {
        home: cli.home.clone(),
        project_dir,
        model_dir: cli.model_dir.clone(),
        ..Default::default()
    })
}

/// What a long-running process watches, syncs and loads.
fn session_options(cli: &Cli) -> Result<memoria_engine::SessionOptions> {
    let mut options = memoria_engine::SessionOptions::new(open_options(cli)?);
    options.sync_token = std::env::var(memoria_engine::sync::token::TOKEN_ENV).ok();
    Ok(options)
}

/// One line per event of `memoria watch`: every sync pass and every note change in JSON
/// (scripts see the schedule at work), each folder rescan, changes and errors in text.
fn print_watch_event(event: &memoria_engine::Event, json: bool) {
    use memoria_engine::Event;
    match event {
        Event::SyncFinished {
            scope,
            report: Some(rep),
            ..
        } if json => println!("{}", json!({"sync": scope, "report": rep})),
        Event::SyncFinished {
            scope,
            report: Some(rep),
            ..
        } if rep.changed() => println!(
            "sync {scope}: uploaded {}, downloaded +{} ~{} -{}, merged {}, conflicts {}",
            rep.uploaded,
            rep.download.added,
            rep.download.changed,
            rep.download.deleted,
            rep.merged,
            rep.new_conflicts.len()
        ),
        Event::SyncFinished {
            scope,
            error: Some(e),
            ..
        } => {
            if json {
                println!("{}", json!({"sync": scope, "error": e}));
            } else {
                println!("sync {scope}: {e}");
            }
        }
        Event::NoteAdded { .. } | Event::NoteChanged { .. } | Event::NoteRemoved { .. } if json => {
            println!("{}", json!(event));
        }
        Event::Rescanned {
            scope,
            added,
            updated,
            removed,
        } => {
            if json {
                println!(
                    "{}",
                    json!({"scope": scope, "added": added, "updated": updated, "removed": removed})
                );
            } else {
                println!("{scope}: {added} added, {updated} updated, {removed} removed");
            }
        }
        Event::Error {
            scope: Some(scope),
            message,
        } => eprintln!("memoria watch: {scope}: {message}"),
        Event::Error {
            scope: None,
            message,
        } => eprintln!("memoria watch: {message}"),
        _ => {}
    }
}

fn print_json(v: &impl serde::Serialize) -> Result<()> {
    println!("{}", serde_json::to_string_pretty(v)?);
    Ok(())
}

fn read_body(arg: Option<String>) -> Result<Option<String>> {
    match arg.as_deref() {
        Some("-") => {
            let mut s = String::new();
            std::io::stdin()
                .read_to_string(&mut s)
                .context("reading the body from standard input")?;
            Ok(Some(s))
        }
        _ => Ok(arg),
    }
}

fn note_type(arg: Option<&str>) -> Result<Option<NoteType>> {
    arg.map(|t| NoteType::parse_known(t).map_err(anyhow::Error::msg))
        .transpose()
}

fn scope_arg(engine: &Engine, arg: Option<&str>) -> Result<Option<Scope>> {
    Ok(match arg {
        None => None,
        Some(s) => Some(engine.scope_of(s.parse::<ScopeChoice>()?)?),
    })
}

fn tags_arg(arg: &str) -> Vec<String> {
    arg.split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(String::from)
        .collect()
}

fn run(cli: Cli) -> Result<()> {
    let json = cli.json;
    match &cli.command {
        Command::Eval(EvalCommand::Beir(args)) => {
            memoria_engine::recall::cli::run_eval(args, json)?
        }
        Command::Bench(BenchCommand::Recall(args)) => {
            memoria_engine::recall::cli::run_bench(args, json)?
        }
        Command::Init { dir, project_type } => {
            let dir = dir.clone().or_else(|| cli.project.clone());
            let project = match &dir {
                Some(d) => Some(Project::init(d, project_type.as_deref())?),
                None if project_type.is_some() => {
                    anyhow::bail!("--type needs a project folder: `memoria init DIR --type T`")
                }
                None => None,
            };
            let engine = Engine::open(OpenOptions {
                home: cli.home.clone(),
                project_dir: project.as_ref().map(|p| p.root.clone()),
                ..Default::default()
            })?;
            let home = engine.home().root().display().to_string();
            if json {
                print_json(&json!({
                    "home": home,
                    "project": project.as_ref().map(|p| json!({"id": p.id, "root": p.root, "projectType": p.project_type})),
                }))?;
            } else {
                println!("home: {home}");
                match &project {
                    Some(p) => println!("project: {} ({})", p.root.display(), p.id),
                    None => println!(
                        "no project: run `memoria init DIR` inside a project folder to give it its own notes"
                    ),
                }
            }
        }
        Command::Add {
            summary,
            note_type: ty,
            tags,
            scope,
            id,
            body,
        } => {
            let mut engine = open(&cli)?;
            let written = engine.add(NewNote {
                summary: summary.clone(),
                body: read_body(body.clone())?.unwrap_or_default(),
                note_type: note_type(ty.as_deref())?,
                tags: tags
                    .iter()
                    .map(|t| t.trim().to_owned())
                    .filter(|t| !t.is_empty())
                    .collect(),
                scope: scope.as_deref().map(str::parse).transpose()?,
                id: id.clone(),
                ..Default::default()
            })?;
            if json {
                print_json(&written)?;
            } else {
                println!("{}", written.id);
            }
        }
        Command::Show { id, scope } => {
            let engine = open(&cli)?;
            let scope = scope_arg(&engine, scope.as_deref())?;
            let view = engine.show(id, scope.as_ref())?;
            let ix = &view.indexed;
            if json {
                print_json(&json!({
                    "scope": view.scope.key(),
                    "id": ix.id,
                    "path": ix.path,
                    "summary": ix.summary,
                    "type": ix.note_type,
                    "tags": ix.tags,
                    "createdAt": ix.created_at,
                    "updatedAt": ix.updated_at,
                    "hash": ix.hash,
                    "error": ix.error,
                    "links": view.note.as_ref().map(|n| n.links()).unwrap_or_default(),
                    "backlinks": view.backlinks.iter().map(|(s, i)| json!({"scope": s, "id": i})).collect::<Vec<_>>(),
                    "body": view.note.as_ref().map(|n| n.body.clone()).unwrap_or_else(|| ix.body.clone()),
                }))?;
            } else {
                println!("id:       {}", ix.id);
                println!("scope:    {}", view.scope);
                println!("summary:  {}", ix.summary);
                if let Some(t) = &ix.note_type {
                    println!("type:     {t}");
                }
                if !ix.tags.is_empty() {
                    println!("tags:     {}", ix.tags.join(", "));
                }
                if let Some(t) = ix.updated_at {
                    println!("updated:  {}", human_utc(t));
                }
                println!("path:     {}", ix.path);
                if !view.backlinks.is_empty() {
                    let b: Vec<String> = view.backlinks.iter().map(|(_, i)| i.clone()).collect();
                    println!("linked from: {}", b.join(", "));
                }
                if let Some(e) = &ix.error {
                    println!("ERROR:    {e}");
                }
                println!("---");
                let body = view
                    .note
                    .as_ref()
                    .map(|n| n.body.as_str())
                    .unwrap_or(ix.body.as_str());
                print!("{body}");
                if !body.ends_with('\n') {
                    println!();
                }
            }
        }
        Command::Edit {
            id,
            summary,
            body,
            tags,
            note_type: ty,
            scope,
        } => {
            let mut engine = open(&cli)?;
            let scope = scope_arg(&engine, scope.as_deref())?;
            let edit = NoteEdit {
                summary: summary.clone(),
                body: read_body(body.clone())?,
                tags: tags.as_deref().map(tags_arg),
                note_type: note_type(ty.as_deref())?,
                ..Default::default()
            };
            if edit.summary.is_none()
                && edit.body.is_none()
                && edit.tags.is_none()
                && edit.note_type.is_none()
            {
                anyhow::bail!("nothing to change: give --summary, --body, --tags or --type");
            }
            let written = engine.edit(id, scope.as_ref(), edit)?;
            if json {
                print_json(&written)?;
            } else {
                println!("{}", written.id);
            }
        }
        Command::List {
            scope,
            note_type: ty,
            tag,
        } => {
            let engine = open(&cli)?;
            let scope = scope_arg(&engine, scope.as_deref())?;
            let rows = engine.list(scope.as_ref(), ty.as_deref(), tag.as_deref())?;
            if json {
                print_json(&rows)?;
            } else if rows.is_empty() {
                println!("no notes");
            } else {
                for r in &rows {
                    let ty = r.note_type.as_deref().unwrap_or("-");
                    match &r.error {
                        Some(e) => println!(
                            "{:<10} {:<32} {:<10} ! {} — {e}",
                            r.scope, r.id, ty, r.rel_path
                        ),
                        None => println!("{:<10} {:<32} {:<10} {}", r.scope, r.id, ty, r.summary),
                    }
                }
            }
        }
        Command::Forget {
            id,
            confirm,
            purge,
            scope,
        } => {
            if !confirm {
                if *purge {
                    anyhow::bail!(
                        "purging `{id}` needs --confirm: it removes the note and all its backups for good"
                    );
                }
                anyhow::bail!("forgetting `{id}` needs --confirm (a backup is kept either way)");
            }
            let mut engine = open(&cli)?;
            let scope = scope_arg(&engine, scope.as_deref())?;
            if *purge {
                let purged = engine.forget_purge(id, scope.as_ref())?;
                if json {
                    print_json(&purged)?;
                } else {
                    println!(
                        "forgot {} for good: the note, {} and its copies in the index are gone",
                        purged.id,
                        memoria_engine::counted(purged.backups_removed, "backup")
                    );
                }
                return Ok(());
            }
            let meta = engine.forget(id, scope.as_ref())?;
            if json {
                print_json(&meta)?;
            } else {
                println!(
                    "forgot {} (backup {}; `memoria restore {}` brings it back)",
                    meta.note_id, meta.backup_id, meta.backup_id
                );
            }
        }
        Command::Search {
            query,
            limit,
            explain,
            mode,
        } => {
            let engine = open(&cli)?;
            let opts = memoria_engine::recall::SearchOptions {
                limit: (*limit).clamp(1, 1000),
                mode: *mode,
                explain: *explain,
                ..Default::default()
            };
            let hits = engine.hybrid_search(query, opts)?;
            if json {
                print_json(&hits)?;
            } else if hits.is_empty() {
                println!("no matches");
            } else {
                for h in &hits {
                    let kind = h.scope.split(':').next().unwrap_or("");
                    println!("{:>6.3}  vt:{kind}/{:<32} {}", h.score, h.id, h.summary);
                    if let Some(x) = &h.explain {
                        println!(
                            "        bm25 rank {:?} score {:?} · vector rank {:?} cosine {:?} · fused {:.3}{} × decay {:.2} × trust {:.2} × importance {:.2} × access {:.2}",
                            x.bm25_rank,
                            x.bm25_score,
                            x.vector_rank,
                            x.cosine,
                            x.fused,
                            match (x.vector_weight, x.coverage) {
                                (Some(w), Some(c)) => format!(
                                    " (vector weight {w:.2}, {:.0} % of the query's words in the notes)",
                                    c * 100.0
                                ),
                                (Some(w), None) => format!(" (vector weight {w:.2})"),
                                _ => String::new(),
                            },
                            x.decay,
                            x.trust,
                            x.importance,
                            x.access
                        );
                    }
                }
            }
        }
        Command::Recall {
            message,
            budget,
            window,
        } => {
            let engine = open(&cli)?;
            let block = engine.recall_block(message, *budget, *window)?;
            if json {
                print_json(&json!({"text": block.text, "notShown": block.not_shown,
                    "shown": block.shown.iter().map(|(s, i)| json!({"scope": s, "id": i})).collect::<Vec<_>>()}))?;
            } else {
                print!("{}", block.text);
            }
        }
        Command::Hook {
            host: HookHost::ClaudeCode,
        } => {
            // Never block the user's prompt: failures print nothing on stdout and exit 0.
            if let Err(e) = claude_code_hook(&cli) {
                eprintln!("memoria hook: {e:#}");
            }
        }
        Command::Backups { limit } => {
            let engine = open(&cli)?;
            let rows = engine.backups(*limit)?;
            let policy = engine.backup_policy();
            if json {
                print_json(&rows)?;
            } else if rows.is_empty() {
                println!("no backups");
            } else {
                println!(
                    "backups are kept {} days and {} MiB in all (0: no limit; set in config.json or MEMORIA_BACKUPS__MAX_AGE_DAYS / __MAX_TOTAL_MB)",
                    policy.max_age_days, policy.max_total_mb
                );
                for b in &rows {
                    println!(
                        "{}  {:<18} {:<12} {}  {}",
                        b.backup_id,
                        b.reason,
                        b.scope,
                        b.note_id,
                        human_utc(b.created_at)
                    );
                }
            }
        }
        Command::Restore { backup_id } => {
            let mut engine = open(&cli)?;
            let r = engine.restore(backup_id)?;
            if json {
                print_json(&r)?;
            } else if r.unchanged {
                println!("{} already matches the backup; nothing changed", r.id);
            } else {
                println!("restored {} into {} ({})", r.id, r.scope, r.path);
                if let Some(b) = &r.replaced_backup {
                    println!("the version it replaced is in backup {b}");
                }
            }
        }
        Command::Import { dir, scope } => {
            let mut engine = open(&cli)?;
            let choice = scope
                .as_deref()
                .map(str::parse::<ScopeChoice>)
                .transpose()?;
            let bar = indicatif::ProgressBar::new(0);
            if !std::io::stderr().is_terminal() || json {
                bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
            }
            bar.set_style(
                indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} {wide_msg}")
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
            let report = import::import(&mut engine, dir, choice, &mut |done, total, rel| {
                bar.set_length(total as u64);
                bar.set_position(done as u64);
                bar.set_message(rel.to_owned());
            })?;
            bar.finish_and_clear();
            if json {
                print_json(&report)?;
            } else {
                println!(
                    "{} files: {} added, {} updated, {} unchanged, {} skipped (into {})",
                    report.files,
                    report.added,
                    report.updated,
                    report.unchanged,
                    report.skipped.len(),
                    report.scope
                );
                if report.flagged_secrets > 0 {
                    let n = report.flagged_secrets;
                    println!(
                        "{} {} like {} secrets: kept, tagged `{}`, never recalled",
                        memoria_engine::counted(n, "note"),
                        if n == 1 { "looks" } else { "look" },
                        if n == 1 {
                            "it contains"
                        } else {
                            "they contain"
                        },
                        memoria_engine::guard::SECRETS_TAG
                    );
                }
                for s in &report.skipped {
                    println!("skipped {}: {}", s.path, s.reason);
                }
            }
        }
        Command::Export { dir } => {
            let engine = open(&cli)?;
            let report = import::export(&engine, dir)?;
            if json {
                print_json(&report)?;
            } else {
                println!(
                    "exported {} to {}",
                    memoria_engine::counted(report.files, "note"),
                    report.dir
                );
                if report.private_left_out > 0 {
                    println!(
                        "left out {} that agents never see (quarantined, holding secrets or not parseable); `memoria doctor` lists them",
                        memoria_engine::counted(report.private_left_out, "private note")
                    );
                }
            }
        }
        Command::Doctor { rebuild } => {
            if *rebuild {
                rebuild_index(&cli)?;
            }
            let mut engine = open(&cli)?;
            let report = doctor::run(&mut engine)?;
            if json {
                print_json(&report)?;
            } else {
                print_doctor(&report);
            }
        }
        Command::Watch => {
            let session = memoria_engine::Session::start(session_options(&cli)?)?;
            let events = session.subscribe();
            for (scope, dir) in session.watched() {
                if !json {
                    println!("watching {scope} in {}", dir.display());
                }
            }
            if json {
                println!("{}", json!({"ready": true}));
            } else {
                println!("ready; press Ctrl-C to stop");
            }
            for event in events {
                print_watch_event(&event, json);
            }
        }
        Command::Mcp {
            http,
            token,
            no_token,
        } => {
            // Watches and syncs while the agent session runs; standard output is the MCP
            // channel, so sync failures go to standard error (and to `memoria sync status`).
            let session = memoria_engine::Session::start(session_options(&cli)?)?;
            let home_root = session.reads().engine().home().root().to_path_buf();
            let events = session.subscribe();
            std::thread::spawn(move || {
                for event in events {
                    if let memoria_engine::Event::SyncFinished {
                        scope,
                        error: Some(e),
                        ..
                    } = event
                    {
                        eprintln!("memoria mcp: sync {scope}: {e}");
                    }
                }
            });
            let server = memoria_engine::mcp::MemoriaMcp::shared(session.writer())
                .with_sync(session.sync_notifier());
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .context("starting the async runtime")?;
            match http {
                Some(addr) => {
                    let token = match (token, no_token) {
                        (Some(t), _) => Some(t.clone()),
                        (None, true) if addr.ip().is_loopback() => None,
                        (None, true) => anyhow::bail!(
                            "--no-token is only for loopback addresses: off loopback pass --token or set MEMORIA_MCP_TOKEN"
                        ),
                        (None, false) if addr.ip().is_loopback() => {
                            let (t, created) = memoria_engine::mcp::loopback_token(&home_root)
                                .context("reading or creating the MCP token")?;
                            let path = memoria_engine::mcp::token_path(&home_root);
                            if created {
                                eprintln!(
                                    "memoria mcp: clients must send `Authorization: Bearer {t}` (kept in {}; --no-token turns this off)",
                                    path.display()
                                );
                            } else {
                                eprintln!(
                                    "memoria mcp: clients must send the bearer token kept in {}",
                                    path.display()
                                );
                            }
                            Some(t)
                        }
                        (None, false) => None,
                    };
                    runtime.block_on(memoria_engine::mcp::serve_http(server, *addr, token))?
                }
                None => runtime.block_on(memoria_engine::mcp::serve_stdio(server))?,
            }
        }
        Command::Sync { command } => sync_cli::sync(&cli, command)?,
        Command::Conflicts => sync_cli::conflicts(&cli)?,
        Command::Resolve {
            id,
            keep,
            merged_file,
            scope,
        } => sync_cli::resolve(
            &cli,
            id,
            keep.as_deref(),
            merged_file.as_deref(),
            scope.as_deref(),
        )?,
        Command::Projects {
            command: Some(ProjectsCommand::Pair { dir }),
        } => {
            let home = memoria_engine::home::Home::resolve(cli.home.as_deref())?;
            home.ensure()?;
            let paired = memoria_engine::project::pair(&home, dir)?;
            if json {
                print_json(&paired)?;
            } else if paired.unchanged {
                println!("{} is already bound to {}", paired.root, paired.scope);
            } else if let Some(old) = &paired.took_over_from {
                println!(
                    "{} now holds {} (it was at {old}, which no longer holds the project)",
                    paired.root, paired.scope
                );
            } else {
                println!(
                    "paired {} as {}: it sees only the notes in its own MEMORY folder",
                    paired.root, paired.scope
                );
            }
        }
        Command::Projects { command: None } => {
            let home = memoria_engine::home::Home::resolve(cli.home.as_deref())?;
            let rows = memoria_engine::project::registered(&home)?;
            if json {
                let v: Vec<_> = rows
                    .iter()
                    .map(|f| json!({"id": f.id, "root": f.root, "scope": Scope::Project(f.scope.clone()).key(), "present": f.present()}))
                    .collect();
                print_json(&v)?;
            } else if rows.is_empty() {
                println!("no projects yet: `memoria init DIR` makes a folder a project");
            } else {
                for f in &rows {
                    let gone = if f.present() { "" } else { "  (folder gone)" };
                    println!(
                        "{:<52} {}{gone}",
                        Scope::Project(f.scope.clone()).key(),
                        f.root
                    );
                }
            }
        }
    }
    Ok(())
}

fn claude_code_hook(cli: &Cli) -> Result<()> {
    use memoria_engine::hook::{ClaudeCodeInput, HookRequest, claude_code_output};
    let mut stdin = String::new();
    std::io::stdin()
        .read_to_string(&mut stdin)
        .context("reading the hook input")?;
    let input = ClaudeCodeInput::parse(&stdin).map_err(anyhow::Error::msg)?;
    let Some(request) = input.request() else {
        return Ok(());
    };
    let project_dir = cli
        .project
        .clone()
        .or_else(|| input.cwd.as_ref().map(PathBuf::from));
    let engine = Engine::open(OpenOptions {
        home: cli.home.clone(),
        project_dir,
        model_dir: cli.model_dir.clone(),
        ..Default::default()
    })?;
    let message = match &request {
        HookRequest::Message(m) => m.as_str(),
        HookRequest::SessionStart => "",
    };
    let block = engine.recall_block(message, None, None)?;
    println!(
        "{}",
        claude_code_output(&input.hook_event_name, &block.text)
    );
    Ok(())
}

fn rebuild_index(cli: &Cli) -> Result<()> {
    let home = memoria_engine::home::Home::resolve(cli.home.as_deref())?;
    for ext in ["sqlite", "sqlite-wal", "sqlite-shm"] {
        let p = home.index_db().with_extension(ext);
        if p.exists() {
            std::fs::remove_file(&p).with_context(|| format!("removing {}", p.display()))?;
        }
    }
    Ok(())
}

fn print_doctor(r: &doctor::DoctorReport) {
    println!("home:     {}", r.home);
    println!("index:    {} ({})", r.index, r.index_integrity);
    println!(
        "backups:  {} ({} KiB) in {}; kept {}{}",
        r.backups,
        r.backups_bytes.div_ceil(1024),
        r.backups_dir,
        match r.backup_policy.max_age_days {
            0 => "without an age limit".to_owned(),
            d => format!("{d} days"),
        },
        match r.backup_policy.max_total_mb {
            0 => String::new(),
            mb => format!(", at most {mb} MiB"),
        }
    );
    if r.backups_pruned > 0 {
        println!(
            "          removed {} past the policy",
            memoria_engine::counted(r.backups_pruned, "old backup")
        );
    }
    match (&r.recall, &r.recall_error) {
        (Some(s), _) if s.embedder == "onnx" => println!(
            "recall:   model {} ({}, {} with vectors)",
            s.model_id,
            memoria_engine::counted(s.documents, "note"),
            s.documents_with_vectors
        ),
        (Some(s), _) => println!(
            "recall:   hash embedder, no semantic model ({}); install one with scripts/install-model.sh",
            s.fallback_reason.as_deref().unwrap_or("not configured")
        ),
        (None, Some(e)) => println!("recall:   ! {e}"),
        (None, None) => {}
    }
    match &r.project {
        Some(p) => println!(
            "project:  {} ({}, type {})",
            p.root,
            p.scope,
            p.project_type.as_deref().unwrap_or("-")
        ),
        None => println!("project:  none here"),
    }
    for s in &r.scopes {
        let watched = if s.watched { ", watched" } else { "" };
        println!(
            "{}: {}, {} in {}{watched}",
            s.scope,
            memoria_engine::counted(s.notes, "note"),
            memoria_engine::counted(s.files_on_disk, "file"),
            s.dir
        );
        for b in &s.broken {
            println!("  ! {} ({}): {}", b.path, b.id, b.error);
        }
        for n in &s.secrets {
            match (n.rule, n.line) {
                (Some(rule), Some(line)) => println!(
                    "  {} ({}): looks like it holds a secret ({rule}, line {line}); agents never see it",
                    n.path, n.id
                ),
                _ => println!(
                    "  {} ({}): tagged {}; agents never see it",
                    n.path,
                    n.id,
                    memoria_engine::guard::SECRETS_TAG
                ),
            }
        }
        for d in &s.duplicate_ids {
            println!("  ! id `{d}` is claimed by more than one file: rename one");
        }
        if s.leftover_temp_files > 0 {
            println!(
                "  {} leftover temp files from interrupted writes (removed after 10 minutes)",
                s.leftover_temp_files
            );
        }
    }
    println!(
        "{}",
        if r.ok {
            "all good"
        } else {
            "problems found (see above)"
        }
    );
}

/// The sync subcommands (issue 5), kept together.
#[derive(Subcommand, Debug)]
enum SyncCommand {
    /// Sign in to a sync server; the token goes to the OS keychain. Turns sync on unless it
    /// was turned off.
    Login {
        /// The server's URL, e.g. https://sync.example.com
        #[arg(long)]
        server: String,
        /// The token (default: $MEMORIA_SYNC_TOKEN, else asked for).
        #[arg(long)]
        token: Option<String>,
    },
    /// Forget the token and the server (scope pins stay).
    Logout,
    /// On/off, last synced, errors, what the last download brought, limits.
    Status,
    /// Sync every scope now.
    Now,
    /// Turn cloud sync on.
    On {
        /// Also upload notes tagged contains-secrets (off by default: they stay on this machine).
        #[arg(long, conflicts_with = "exclude_secrets")]
        include_secrets: bool,
        /// Stop uploading notes tagged contains-secrets (the default).
        #[arg(long)]
        exclude_secrets: bool,
    },
    /// Turn cloud sync off (survives restarts and sign-ins; local notes keep working).
    Off,
    /// Agree to what a paused sync waits for (deletions, a new folder); the next sync does it.
    Confirm {
        /// user or project (default: every scope that waits).
        #[arg(long)]
        scope: Option<String>,
    },
    /// Decline what a paused sync waits for: notes missing here are restored from the last
    /// sync, notes deleted on another machine are kept (and uploaded again).
    Cancel {
        /// user or project (default: every scope that waits).
        #[arg(long)]
        scope: Option<String>,
    },
}

mod sync_cli {
    use std::path::Path;
    use std::sync::Arc;

    use anyhow::{Context, Result, bail};
    use memoria_engine::sync::{self, Keep, Settings, SyncClient, SyncError, Syncer, Token, token};
    use memoria_shared::SystemClock;
    use serde_json::json;

    use super::{Cli, SyncCommand, human_utc, open, print_json, scope_arg};

    fn env_token() -> Option<String> {
        std::env::var(token::TOKEN_ENV).ok()
    }

    pub fn sync(cli: &Cli, command: &SyncCommand) -> Result<()> {
        let engine = open(cli)?;
        let root = engine.home().root().to_path_buf();
        let dir = sync::sync_dir(&root);
        match command {
            SyncCommand::Login { server, token } => {
                let server = server.trim_end_matches('/').to_owned();
                let token = match token.clone().or_else(env_token) {
                    Some(t) => Token::new(t),
                    None => {
                        eprint!("token for {server}: ");
                        let mut line = String::new();
                        std::io::stdin()
                            .read_line(&mut line)
                            .context("reading the token")?;
                        Token::new(line)
                    }
                };
                if token.expose().is_empty() {
                    bail!("no token given: pass --token, set MEMORIA_SYNC_TOKEN, or type it");
                }
                let transport = Arc::new(sync::HttpTransport::new(&server)?);
                let identity = SyncClient::new(transport, token.clone())
                    .identity()
                    .context("signing in")?;
                let keychain = match token::store(&root, &server, &token) {
                    Ok(kc) => Some(kc),
                    Err(e) if env_token().is_some() => {
                        eprintln!("memoria: {e}; using MEMORIA_SYNC_TOKEN from the environment");
                        None
                    }
                    Err(e) => return Err(e.into()),
                };
                let on = Settings::update(&dir, |s| {
                    s.server = Some(server.clone());
                    *s.enabled.get_or_insert(true)
                })?;
                if cli.json {
                    print_json(
                        &json!({"server": server, "userId": identity.user_id, "on": on,
                        "keychain": keychain.map(|k| k.to_string())}),
                    )?;
                } else {
                    println!("signed in to {server} as {}", identity.user_id);
                    if let Some(kc) = keychain {
                        println!("the token is in {kc}");
                    }
                    if !on {
                        println!("cloud sync is off: turn it on with `memoria sync on`");
                    }
                }
            }
            SyncCommand::Logout => {
                let server = Settings::load(&dir)?.server;
                if let Some(server) = &server {
                    token::forget(&root, server)?;
                }
                Settings::update(&dir, |s| s.server = None)?;
                println!("signed out");
            }
            SyncCommand::On {
                include_secrets,
                exclude_secrets,
            } => {
                let secrets = Settings::update(&dir, |s| {
                    s.enabled = Some(true);
                    if *include_secrets || *exclude_secrets {
                        s.include_secrets = *include_secrets;
                    }
                    s.include_secrets
                })?;
                println!("cloud sync is on");
                println!(
                    "notes tagged contains-secrets are {}",
                    if secrets {
                        "uploaded too"
                    } else {
                        "kept on this machine (`memoria sync on --include-secrets` uploads them)"
                    }
                );
            }
            SyncCommand::Off => {
                Settings::update(&dir, |s| s.enabled = Some(false))?;
                println!("cloud sync is off");
            }
            SyncCommand::Confirm { scope } | SyncCommand::Cancel { scope } => {
                let mut engine = engine;
                let scope = scope_arg(&engine, scope.as_deref())?;
                let confirm = matches!(command, SyncCommand::Confirm { .. });
                let done = match confirm {
                    true => sync::confirm_pending(&mut engine, scope.as_ref()),
                    false => sync::cancel_pending(&mut engine, scope.as_ref()),
                }
                .map_err(|e| anyhow::anyhow!(e))?;
                if cli.json {
                    return print_json(&done);
                }
                for p in &done {
                    let what = match (&p.reason, confirm) {
                        (sync::PendingReason::NewFolder { .. }, true) => {
                            format!("{} syncs from {} too", p.scope, p.folder)
                        }
                        (sync::PendingReason::NewFolder { .. }, false) => {
                            format!("{} stays unsynced", p.folder)
                        }
                        (_, true) => format!(
                            "{}: {} deletion(s) confirmed",
                            p.scope,
                            p.local_deletes.len() + p.cloud_deletes.len()
                        ),
                        (_, false) => format!(
                            "{}: {} note(s) restored here, {} kept and uploaded again",
                            p.scope,
                            p.local_deletes.len(),
                            p.cloud_deletes.len()
                        ),
                    };
                    println!("{what}");
                }
                println!("run `memoria sync now` (or let the watcher sync) to go on");
            }
            SyncCommand::Now => {
                let mut engine = engine;
                let mut syncer = Syncer::from_settings(
                    &root,
                    env_token(),
                    Arc::new(SystemClock),
                    Arc::default(),
                )?;
                let results = syncer.sync_all(&mut engine);
                let mut failed = Vec::new();
                let mut out = Vec::new();
                for (scope, r) in &results {
                    match r {
                        Ok(rep) => {
                            if !cli.json {
                                println!(
                                    "{scope}: uploaded {}, downloaded +{} ~{} -{}, merged {}, held back {}",
                                    rep.uploaded,
                                    rep.download.added,
                                    rep.download.changed,
                                    rep.download.deleted,
                                    rep.merged,
                                    rep.held_back.len()
                                );
                                for (id, why) in &rep.held_back {
                                    println!("  {id}: {why}");
                                }
                            }
                            out.push(json!({"scope": scope.key(), "report": rep}));
                        }
                        Err(e) => {
                            failed.push(format!("{scope}: {e}"));
                            out.push(json!({"scope": scope.key(), "error": e.to_string()}));
                        }
                    }
                }
                if cli.json {
                    print_json(&out)?;
                }
                if !failed.is_empty() {
                    bail!("{}", failed.join("; "));
                }
            }
            SyncCommand::Status => status(cli, &engine, &root)?,
        }
        Ok(())
    }

    fn status(cli: &Cli, engine: &memoria_engine::Engine, root: &Path) -> Result<()> {
        let dir = sync::sync_dir(root);
        let s = Settings::load(&dir)?;
        let mut scopes = Vec::new();
        let mut oldest: Option<Option<i64>> = None;
        for scope in sync::synced_scopes(engine) {
            let sd = sync::base::ScopeDir::of(engine, &scope)?;
            let st = sd.load_status()?;
            let conflicts = sd.conflicts()?.len();
            let pending = sd.pending()?;
            oldest = Some(match oldest {
                None => st.last_synced_ms,
                Some(o) => o.zip(st.last_synced_ms).map(|(a, b)| a.min(b)),
            });
            scopes.push(json!({
                "scope": scope.key(),
                "lastSyncedMs": st.last_synced_ms,
                "lastError": st.last_error,
                "lastDownload": st.last_download,
                "quotas": st.quotas,
                "heldBack": st.held_back,
                "conflicts": conflicts,
                "pin": s.pins.get(&scope.key()),
                "pending": pending.as_ref().map(|p| {
                    let mut v = json!(p);
                    v["message"] = json!(p.message());
                    v
                }),
            }));
        }
        let last_synced = oldest.flatten();
        let v = json!({
            "on": s.is_on(),
            "server": s.server,
            "lastSyncedMs": last_synced,
            "pausedUntilMs": s.paused_until_ms,
            "includeSecrets": s.include_secrets,
            "scopes": scopes,
        });
        if cli.json {
            return print_json(&v);
        }
        println!(
            "cloud sync: {}{}",
            if s.is_on() { "on" } else { "off" },
            s.server
                .as_deref()
                .map_or_else(|| " (not signed in)".to_owned(), |u| format!(", {u}"))
        );
        println!(
            "last synced: {}",
            last_synced.map_or_else(|| "never".to_owned(), human_utc)
        );
        for sc in &scopes {
            let d = &sc["lastDownload"];
            println!(
                "{}: last download +{} ~{} -{}, {} conflict(s)",
                sc["scope"].as_str().unwrap_or(""),
                d["added"],
                d["changed"],
                d["deleted"],
                sc["conflicts"]
            );
            if let Some(p) = sc["pending"].as_object() {
                match p["confirmed"].as_bool() {
                    Some(true) => println!(
                        "  confirmed, done by the next sync: {}",
                        p["message"].as_str().unwrap_or("")
                    ),
                    _ => println!(
                        "  waiting for you: {} (`memoria sync confirm` or `memoria sync cancel`)",
                        p["message"].as_str().unwrap_or("")
                    ),
                }
            } else if let Some(e) = sc["lastError"].as_str() {
                println!("  error: {e}");
            }
            if let Some(q) = sc["quotas"].as_object() {
                println!(
                    "  limits: {} notes, {} bytes per note",
                    q["liveNotesPerScope"], q["bodyBytes"]
                );
            }
        }
        Ok(())
    }

    pub fn conflicts(cli: &Cli) -> Result<()> {
        let engine = open(cli)?;
        let list = sync::list_conflicts(&engine)?;
        if cli.json {
            return print_json(&list);
        }
        if list.is_empty() {
            println!("no sync conflicts");
        }
        for c in &list {
            let what = match &c.reason {
                sync::ConflictReason::Merge(kinds) => format!("{kinds:?}"),
                sync::ConflictReason::VanishedWhileEdited => {
                    "edited here, deleted in the cloud long ago".to_owned()
                }
            };
            println!("{}  {}  {what}", c.scope, c.id);
        }
        Ok(())
    }

    pub fn resolve(
        cli: &Cli,
        id: &str,
        keep: Option<&str>,
        merged_file: Option<&Path>,
        scope: Option<&str>,
    ) -> Result<()> {
        let mut engine = open(cli)?;
        let scope = scope_arg(&engine, scope)?;
        let keep = match (keep, merged_file) {
            (_, Some(f)) => Keep::Merged(
                std::fs::read_to_string(f).with_context(|| format!("reading {}", f.display()))?,
            ),
            (Some("local"), None) => Keep::Local,
            (Some("cloud"), None) => Keep::Cloud,
            (Some("both"), None) => Keep::Both,
            (Some(other), None) => bail!("--keep {other}: use local, cloud or both"),
            (None, None) => bail!("say what to keep: --keep local|cloud|both or --merged-file F"),
        };
        let r = sync::resolve(&mut engine, id, scope.as_ref(), keep)
            .map_err(|e: SyncError| anyhow::anyhow!(e))?;
        if cli.json {
            return print_json(&r);
        }
        println!("resolved {} in {}", r.id, r.scope);
        if let Some(n) = &r.new_id {
            println!("the cloud's version is now note {n}");
        }
        for b in &r.backups {
            println!("set aside in backup {b}");
        }
        println!("it uploads with the next sync");
        Ok(())
    }
}
