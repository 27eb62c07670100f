//! `eval` and `bench`: retrieval quality, speed and memory.

use anyhow::Result;
use clap::Subcommand;
use memoria_eval::growth::{GrowthArgs, run_growth};
use memoria_eval::{BenchArgs, EvalArgs, run_bench, run_eval};

#[derive(Debug, Subcommand)]
pub enum EvalCommand {
    /// Index a BEIR corpus into a temporary home and report nDCG@10, Recall@100, MRR@10.
    Beir(EvalArgs),
    /// Capture LoCoMo's conversations as an agent's hook would, ask each question (categories
    /// 1-4) through the agent's search, and report evidence recall@5 and @10.
    Locomo(memoria_eval::locomo::LocomoArgs),
    /// Index a BEIR corpus as notes, add five near-duplicate variants of every document
    /// relevant to the queries, and report nDCG@10 and top-1 clean, polluted and after the
    /// review's same-topic merges, with the same-topic rule's precision and recall.
    Growth(GrowthArgs),
    /// The review's same-topic findings among short notes against labelled groups (a JSON
    /// Lines file, SciFact's claims): pair precision and recall by words only and with vectors.
    Topics(memoria_eval::topics::TopicsArgs),
}

#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Search latency, indexing throughput and memory of hybrid recall.
    Recall(BenchArgs),
    /// Hybrid recall over a large raw log of conversations (synthesized): latency, memory,
    /// disk per message.
    Log(memoria_eval::logbench::LogBenchArgs),
}

pub fn eval(command: &EvalCommand, json: bool) -> Result<()> {
    match command {
        EvalCommand::Beir(args) => Ok(run_eval(args, json)?),
        EvalCommand::Growth(args) => Ok(run_growth(args, json)?),
        EvalCommand::Locomo(args) => Ok(memoria_eval::locomo::run_locomo(args, json)?),
        EvalCommand::Topics(args) => Ok(memoria_eval::topics::run_topics(args, json)?),
    }
}

pub fn bench(command: &BenchCommand, json: bool) -> Result<()> {
    match command {
        BenchCommand::Recall(args) => Ok(run_bench(args, json)?),
        BenchCommand::Log(args) => Ok(memoria_eval::logbench::run_log_bench(args, json)?),
    }
}
