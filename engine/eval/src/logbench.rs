//! `memoria bench log`: hybrid recall over a large raw log of conversations.
//!
//! A home is filled with synthetic conversations (many of them, of varied length, spread over
//! years, in the user's scope and in a few projects' scopes, between the user, an assistant
//! and other people), each message written to the raw log and indexed in recall as the log's
//! messages are (`said::message_doc`: the end of the message before, the speaker and the
//! text). Then a fresh process opens the home as a long-running front end does and times
//! hybrid searches through the path the agent's search takes (`RecallIndex::search`, then
//! `said::rank_messages` over the log), and reports its peak memory and the disk each message
//! costs.
//!
//! Embedding a million messages with the real model would take days on a laptop's CPU, so the
//! messages' vectors come from the hash embedder, stored under the real model's id: the same
//! dimension and the same cost to store, load and search, but not the same meaning. Queries
//! are embedded by the real model. The figures are latency, memory and disk, never quality.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use anyhow::{Context, bail};
use memoria_engine::home::Home;
use memoria_engine::log::{Log, LogMessage, NewMessage, Role, message_key};
use memoria_engine::said;
use memoria_shared::{Clock, SystemClock};

use crate::recall::{RecallConfig, RecallDoc, RecallIndex, SearchOptions, embed};
use crate::{BenchEmbedder, ModelArgs, percentile, rss_kb};

#[derive(Debug, Clone, clap::Args)]
pub struct LogBenchArgs {
    /// Messages in the raw log.
    #[arg(long, default_value_t = 1_000_000)]
    pub messages: usize,
    /// Searches timed.
    #[arg(long, default_value_t = 200)]
    pub queries: usize,
    /// The benchmark's home: built there when it holds no log yet, reused as it is otherwise
    /// (a temporary directory by default).
    #[arg(long)]
    pub home: Option<PathBuf>,
    /// Messages whose facts and vectors a process keeps in memory (the newest); a value at
    /// least the log's size keeps every one, as recall did before it kept only the newest.
    #[arg(long, default_value_t = crate::recall::RESIDENT_MESSAGES)]
    pub resident_messages: usize,
    /// Only measure, in this process (what the command runs in a fresh process after
    /// building, so the building's memory is not counted).
    #[arg(long, hide = true)]
    pub measure_only: bool,
    #[command(flatten)]
    pub model: ModelArgs,
}

/// What a run measured.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LogBenchReport {
    pub messages: usize,
    pub conversations: usize,
    pub embedder: String,
    pub open_seconds: f64,
    pub hybrid_ms_p50: f64,
    pub hybrid_ms_p95: f64,
    pub hybrid_ms_max: f64,
    pub rss_mb_after_open: f64,
    pub rss_mb_after_search: f64,
    pub peak_rss_mb: f64,
    /// Bytes on disk: the raw log, the recall documents, the lexical index, the vector cache.
    pub log_bytes: u64,
    pub docs_bytes: u64,
    pub lexical_bytes: u64,
    pub vector_bytes: u64,
    pub bytes_per_message: f64,
    pub documents_with_vectors_in_memory: usize,
    pub resident_messages: usize,
}

/// The scopes a search sees: the user's and the project the bench's agent works in.
const VISIBLE: [&str; 2] = ["user", "project:atlas"];
/// Every scope the synthetic conversations are kept in.
const SCOPES: [&str; 5] = [
    "user",
    "user",
    "project:atlas",
    "project:beacon",
    "project:cobalt",
];
/// 2021-01-01T00:00:00Z: the first conversation starts after it.
const START_MS: i64 = 1_609_459_200_000;
/// Five years, over which conversations are spread.
const SPAN_MS: i64 = 5 * 365 * 24 * 3_600_000;

/// Runs `memoria bench log`.
pub fn run_log_bench(args: &LogBenchArgs, json: bool) -> anyhow::Result<()> {
    let tmp = tempfile::tempdir()?;
    let home = args.home.clone().unwrap_or_else(|| tmp.path().to_owned());
    if args.measure_only {
        let r = measure(args, &home)?;
        return print(&r, json);
    }
    if !memoria_engine::log::log_path(&home).exists() {
        build(args, &home)?;
    } else {
        eprintln!("reusing the log in {}", home.display());
    }
    // Measured in a process of its own: what a front end opening this home holds.
    let mut child = std::process::Command::new(std::env::current_exe()?);
    child
        .args(["--json", "bench", "log", "--measure-only", "--home"])
        .arg(&home)
        .args(["--queries", &args.queries.to_string()])
        .args(["--messages", &args.messages.to_string()])
        .args(["--resident-messages", &args.resident_messages.to_string()])
        .args(["--threads", &args.model.threads.to_string()]);
    if let Some(dir) = &args.model.model_dir {
        child.arg("--model-dir").arg(dir);
    }
    let out = child
        .stderr(std::process::Stdio::inherit())
        .output()
        .context("run the measuring process")?;
    if !out.status.success() {
        bail!("the measuring process failed ({})", out.status);
    }
    let r: LogBenchReport =
        serde_json::from_slice(&out.stdout).context("read the measuring process's report")?;
    print(&r, json)
}

fn print(r: &LogBenchReport, json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(r)?);
        return Ok(());
    }
    println!(
        "{} messages in {} conversations, embedder {}: hybrid p50 {:.2} ms p95 {:.2} ms max {:.2} ms",
        r.messages, r.conversations, r.embedder, r.hybrid_ms_p50, r.hybrid_ms_p95, r.hybrid_ms_max
    );
    println!(
        "opened in {:.1} s; RSS {:.0} MB after open, {:.0} MB after search, peak {:.0} MB; {} documents' vectors in memory",
        r.open_seconds,
        r.rss_mb_after_open,
        r.rss_mb_after_search,
        r.peak_rss_mb,
        r.documents_with_vectors_in_memory
    );
    let mb = |b: u64| b as f64 / 1e6;
    println!(
        "disk: log {:.0} MB, recall documents {:.0} MB, lexical index {:.0} MB, vectors {:.0} MB: {:.0} bytes per message",
        mb(r.log_bytes),
        mb(r.docs_bytes),
        mb(r.lexical_bytes),
        mb(r.vector_bytes),
        r.bytes_per_message
    );
    Ok(())
}

/// Writes `args.messages` synthetic messages to the home's log and indexes them in recall, in
/// batches of whole conversations.
fn build(args: &LogBenchArgs, home: &Path) -> anyhow::Result<()> {
    let (model, choice) = embed::load(args.model.resolve().as_deref(), args.model.threads);
    let bench = BenchEmbedder {
        // Stored under the real model's id, so the measuring process finds every vector cached.
        id: choice.model_id.clone(),
        inner: model,
        real_passages: Arc::new(AtomicBool::new(false)),
    };
    let config = RecallConfig {
        background_reembed: false,
        ..RecallConfig::new(crate::recall::default_dir(home))
    };
    let index =
        RecallIndex::open_with_embedder(&config, Box::new(bench), choice, Arc::new(SystemClock))?;
    let home = Home::resolve(Some(home))?;
    home.ensure()?;
    let mut log = Log::open(&home)?;
    let t = Instant::now();
    let mut synth = Synth::new(0x5eed);
    let mut done = 0;
    while done < args.messages {
        let want = (args.messages - done).min(10_000);
        let mut batch: Vec<LogMessage> = Vec::with_capacity(want + 200);
        while batch.len() < want {
            let room = want - batch.len();
            batch.extend(synth.conversation(room));
        }
        let now = SystemClock.now_ms();
        let new: Vec<NewMessage> = batch.iter().map(new_message).collect();
        log.append(&new, now)?;
        let docs: Vec<RecallDoc> = batch
            .iter()
            .enumerate()
            .map(|(i, m)| {
                let previous = i
                    .checked_sub(1)
                    .map(|p| &batch[p])
                    .filter(|p| p.conversation == m.conversation && p.scope == m.scope);
                said::message_doc(m, previous)
            })
            .collect();
        index.upsert(&docs)?;
        done += batch.len();
        eprintln!(
            "built {done}/{} messages ({:.0} s)",
            args.messages,
            t.elapsed().as_secs_f64()
        );
    }
    log.checkpoint()?;
    eprintln!("built in {:.0} s", t.elapsed().as_secs_f64());
    Ok(())
}

fn new_message(m: &LogMessage) -> NewMessage {
    NewMessage {
        scope: m.scope.clone(),
        conversation: m.conversation.clone(),
        message_id: m.message_id.clone(),
        seq: m.seq,
        at: m.at,
        role: m.role,
        speaker: m.speaker.clone(),
        host: m.host.clone(),
        model: m.model.clone(),
        text: m.text.clone(),
        secret: None,
        quarantined: None,
    }
}

/// Opens the home as a front end does and times searches.
fn measure(args: &LogBenchArgs, home: &Path) -> anyhow::Result<LogBenchReport> {
    let model_dir = args.model.resolve();
    let t = Instant::now();
    let mut config = RecallConfig::new(crate::recall::default_dir(home));
    config.model_dir = model_dir;
    config.threads = args.model.threads;
    config.resident_messages = args.resident_messages;
    let index = RecallIndex::open(&config, Arc::new(SystemClock))?;
    let log = Log::open(&Home::resolve(Some(home))?)?;
    let open_seconds = t.elapsed().as_secs_f64();
    let rss_open = rss_kb("VmRSS:");
    let status = index.status();
    let stats = log.stats()?;
    let opts = SearchOptions {
        visible_scopes: Some(VISIBLE.iter().map(|s| (*s).to_owned()).collect()),
        limit: 10,
        ..SearchOptions::default()
    };
    let now = SystemClock.now_ms();
    let ask = |q: &str| -> anyhow::Result<usize> {
        let mut hits = index.search(q, &opts)?;
        said::rank_messages(&log, q, now, &mut hits)?;
        Ok(hits.len())
    };
    let mut queries = Synth::new(0x9e3779b9);
    // Warm up: the model, the everyday sentences' vectors, the file caches of a first search.
    for _ in 0..5 {
        ask(&queries.query())?;
    }
    let mut times = Vec::with_capacity(args.queries);
    let mut found = 0;
    for _ in 0..args.queries {
        let q = queries.query();
        let t = Instant::now();
        found += ask(&q)?;
        times.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    if found == 0 {
        bail!("no search found anything: the home holds no messages");
    }
    times.sort_by(f64::total_cmp);
    let recall_dir = crate::recall::default_dir(home);
    let size = |p: &Path| -> u64 {
        ["", "-wal"]
            .iter()
            .filter_map(|ext| std::fs::metadata(format!("{}{ext}", p.display())).ok())
            .map(|m| m.len())
            .sum()
    };
    let lexical_bytes = dir_bytes(&recall_dir.join("lexical"));
    let (log_bytes, docs_bytes, vector_bytes) = (
        size(&memoria_engine::log::log_path(home)),
        size(&recall_dir.join("docs.sqlite")),
        size(&recall_dir.join("vectors.sqlite")),
    );
    let total = log_bytes + docs_bytes + lexical_bytes + vector_bytes;
    Ok(LogBenchReport {
        messages: stats.messages,
        conversations: stats.conversations,
        embedder: status.embedder.to_owned(),
        open_seconds,
        hybrid_ms_p50: percentile(&times, 0.5),
        hybrid_ms_p95: percentile(&times, 0.95),
        hybrid_ms_max: times.last().copied().unwrap_or(0.0),
        rss_mb_after_open: rss_open as f64 / 1024.0,
        rss_mb_after_search: rss_kb("VmRSS:") as f64 / 1024.0,
        peak_rss_mb: rss_kb("VmHWM:") as f64 / 1024.0,
        log_bytes,
        docs_bytes,
        lexical_bytes,
        vector_bytes,
        bytes_per_message: total as f64 / stats.messages.max(1) as f64,
        documents_with_vectors_in_memory: index.vectors_in_memory(),
        resident_messages: args.resident_messages,
    })
}

fn dir_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.metadata().ok())
        .filter(|m| m.is_file())
        .map(|m| m.len())
        .sum()
}

const PEOPLE: &[&str] = &[
    "Ana", "Carlos", "Mei", "Tomás", "Priya", "Jonas", "Fatima", "Liam", "Sofia", "Kenji", "Olga",
    "Marco", "Aisha", "Diego", "Hannah", "Wei", "Lucía", "Noah", "Ingrid", "Rafael",
];
const PLACES: &[&str] = &[
    "Lisbon",
    "Berlin",
    "Osaka",
    "Toronto",
    "Madrid",
    "Nairobi",
    "Oslo",
    "Lyon",
    "Austin",
    "Porto",
    "Seoul",
    "Bogotá",
    "Krakow",
    "Dublin",
    "the office",
    "the cabin",
];
const THINGS: &[&str] = &[
    "pricing page",
    "release train",
    "deployment window",
    "database migration",
    "onboarding flow",
    "quarterly review",
    "design system",
    "search index",
    "invoice export",
    "mobile app",
    "payment retries",
    "backup policy",
    "dark mode",
    "API rate limit",
    "hiring plan",
    "team offsite",
    "budget",
    "dashboard",
    "support queue",
    "sync protocol",
    "garden",
    "kitchen renovation",
    "marathon training",
    "piano lessons",
    "trip",
    "dentist appointment",
    "birthday party",
    "book club",
    "tax return",
    "car insurance",
    "apartment lease",
    "vegetable soup recipe",
    "photography course",
    "conference talk",
    "grant proposal",
    "thesis chapter",
];
const VERBS: &[&str] = &[
    "move", "finish", "review", "cancel", "postpone", "simplify", "test", "document", "rewrite",
    "split", "measure", "ship", "plan", "book", "fix", "price", "share", "archive", "prepare",
    "discuss",
];
const WHEN: &[&str] = &[
    "on Monday",
    "next week",
    "before the holidays",
    "after the launch",
    "by Friday",
    "in March",
    "this weekend",
    "tomorrow morning",
    "at the end of the month",
    "in the spring",
];
const FEELINGS: &[&str] = &[
    "I'm worried about",
    "I'm happy with",
    "I still don't understand",
    "I really like",
    "I'm tired of",
    "I'm curious about",
    "We should be careful with",
    "Nobody has looked at",
];
const SPANISH: &[&str] = &[
    "Mañana hablamos del presupuesto con el equipo.",
    "No olvides reservar el hotel para el viaje.",
    "La reunión se movió al jueves por la tarde.",
    "Me gustó mucho la propuesta de diseño nueva.",
    "Hay que revisar las facturas antes del cierre.",
];

/// A deterministic generator of conversations and queries.
struct Synth {
    x: u64,
    conversations: usize,
}

impl Synth {
    fn new(seed: u64) -> Self {
        Self {
            x: seed,
            conversations: 0,
        }
    }

    fn next(&mut self) -> u64 {
        // splitmix64
        self.x = self.x.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.x;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }

    fn sentence(&mut self, speaker: &str) -> String {
        let (p, q) = (self.pick(PEOPLE), self.pick(PEOPLE));
        let (t, v, w) = (self.pick(THINGS), self.pick(VERBS), self.pick(WHEN));
        let n = self.below(500);
        match self.below(12) {
            0 => format!("{p} said we should {v} the {t} {w}."),
            1 => format!("Can you {v} the {t} {w}? {q} is waiting for it."),
            2 => format!(
                "{} the {t}, the numbers changed again ({n}).",
                self.pick(FEELINGS)
            ),
            3 => format!(
                "I met {p} in {} and we talked about the {t}.",
                self.pick(PLACES)
            ),
            4 => format!(
                "The {t} costs {n} euros now, up from {} last time.",
                n / 2 + 7
            ),
            5 => format!("Reminder for {speaker}: {v} the {t} {w}, ticket OPS-{n}."),
            6 => format!("{p} and {q} disagree about the {t}; let's {v} it {w}."),
            7 => format!(
                "I moved to {} last year and I still miss the {t}.",
                self.pick(PLACES)
            ),
            8 => format!("Yes, that works. I'll {v} it {w} and tell {p}."),
            9 => format!("My favourite part of the {t} is how {p} explained it."),
            10 => self.pick(SPANISH).to_owned(),
            _ => format!("We agreed to {v} the {t} {w}, {n} items left."),
        }
    }

    /// One conversation of at most `room` messages (at least one), its messages a few minutes
    /// apart, starting somewhere in five years.
    fn conversation(&mut self, room: usize) -> Vec<LogMessage> {
        self.conversations += 1;
        let id = format!("conv-{:07}", self.conversations);
        let scope = self.pick(&SCOPES).to_owned();
        // Mostly short chats, some long ones: 2 to 200 messages.
        let len = match self.below(10) {
            0 => 100 + self.below(101),
            1..=3 => 20 + self.below(80),
            _ => 2 + self.below(30),
        }
        .min(room)
        .max(1);
        let other = self.pick(PEOPLE);
        let with_person = self.below(5) == 0;
        let mut at = START_MS + (self.next() % SPAN_MS as u64) as i64;
        (0..len)
            .map(|seq| {
                let (role, speaker) = match (seq % 2, with_person) {
                    (0, _) => (Role::User, Some("Ana".to_owned())),
                    (_, true) => (Role::Other, Some(other.to_owned())),
                    (_, false) => (Role::Assistant, None),
                };
                let who = speaker.clone().unwrap_or_else(|| "assistant".into());
                let sentences = 1 + self.below(4);
                let text: Vec<String> = (0..sentences).map(|_| self.sentence(&who)).collect();
                at += 20_000 + (self.next() % 600_000) as i64;
                let message_id = format!("m{seq}");
                LogMessage {
                    key: message_key(&scope, &id, &message_id),
                    scope: scope.clone(),
                    conversation: id.clone(),
                    message_id,
                    seq: seq as i64 + 1,
                    at: Some(at),
                    role,
                    speaker,
                    host: Some("bench".into()),
                    model: None,
                    text: text.join(" "),
                    secret: None,
                    quarantined: None,
                    captured_at: at,
                }
            })
            .collect()
    }

    /// A question an agent might ask of such a log.
    fn query(&mut self) -> String {
        let (p, t, v) = (self.pick(PEOPLE), self.pick(THINGS), self.pick(VERBS));
        match self.below(6) {
            0 => format!("what did {p} say about the {t}"),
            1 => format!("when did we {v} the {t}"),
            2 => format!("how much does the {t} cost"),
            3 => format!("where did I meet {p}"),
            4 => format!("what did we decide about the {t} last May"),
            _ => format!("{t} {v} plan"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversations_are_the_same_on_every_run_and_varied() {
        let (mut a, mut b) = (Synth::new(1), Synth::new(1));
        let (ca, cb) = (a.conversation(500), b.conversation(500));
        assert_eq!(ca, cb);
        let mut all = Vec::new();
        while all.len() < 5_000 {
            all.extend(a.conversation(5_000 - all.len()));
        }
        assert_eq!(all.len(), 5_000, "a batch is filled exactly");
        let texts: std::collections::HashSet<&str> = all.iter().map(|m| m.text.as_str()).collect();
        assert!(texts.len() > 4_500, "{} distinct texts", texts.len());
        let conversations: std::collections::HashSet<&str> =
            all.iter().map(|m| m.conversation.as_str()).collect();
        assert!(conversations.len() > 50, "{}", conversations.len());
        let years: std::collections::HashSet<i64> = all
            .iter()
            .map(|m| m.at.unwrap() / (365 * 24 * 3_600_000))
            .collect();
        assert!(years.len() >= 4, "spread over years: {years:?}");
        assert!(all.iter().all(|m| m.seq >= 1 && !m.text.is_empty()));
    }
}
