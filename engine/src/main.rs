//! The `memoria` binary: parses arguments and dispatches to the engine.

use clap::{Parser, Subcommand};
use memoria_engine::recall::cli::{BenchArgs, EvalArgs};

#[derive(Debug, Parser)]
#[command(
    name = "memoria",
    version,
    about = "Local-first memory for people and their agents"
)]
struct Cli {
    /// Print machine-readable JSON.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Measure retrieval quality.
    #[command(subcommand)]
    Eval(EvalCommand),
    /// Measure speed and memory.
    #[command(subcommand)]
    Bench(BenchCommand),
}

#[derive(Debug, Subcommand)]
enum EvalCommand {
    /// Index a BEIR corpus into a temporary home and report nDCG@10, Recall@100, MRR@10.
    Beir(EvalArgs),
}

#[derive(Debug, Subcommand)]
enum BenchCommand {
    /// Search latency, indexing throughput and memory of hybrid recall.
    Recall(BenchArgs),
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Eval(EvalCommand::Beir(args)) => {
            memoria_engine::recall::cli::run_eval(&args, cli.json)
        }
        Command::Bench(BenchCommand::Recall(args)) => {
            memoria_engine::recall::cli::run_bench(&args, cli.json)
        }
    }
}
