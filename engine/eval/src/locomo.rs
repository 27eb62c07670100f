//! `memoria eval locomo`: recall over what was said, on LoCoMo's long conversations.
//!
//! Each conversation goes into a home of its own through the capture path an agent's hook
//! uses (one captured conversation per session, the session's date as its messages' time,
//! an image's caption with its turn), then every question of categories 1–4 is asked, a day
//! after the conversation's last message (the engine's and recall's clock stand there),
//! through the agent's search (`api::agent::search`, what `memory_search` answers). The ids read back
//! are LoCoMo's `dia_id`s in the order an agent would read them: a message hit is its own id.
//! Evidence recall@k is the share of a question's evidence turns among the first k ids,
//! averaged over questions. A TREC run (`<sample_id>-q<index in qa>`) can be written for
//! outside scoring.

use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, bail};
use memoria_engine::api::agent::{AgentQuery, search};
use memoria_engine::backup;
use memoria_engine::capture::{CaptureOptions, Incoming, capture};
use memoria_engine::log::Role;
use memoria_engine::recall::{RecallConfig, RecallIndex};
use memoria_engine::search::SharedRecall;
use memoria_engine::vault::{Engine, OpenOptions};
use memoria_shared::FixedClock;
use serde_json::Value;

use crate::ModelArgs;

#[derive(Debug, clap::Args)]
pub struct LocomoArgs {
    /// LoCoMo's JSON file (a list of samples with `conversation` and `qa`).
    #[arg(long)]
    pub data: PathBuf,
    /// Only the first N conversations.
    #[arg(long)]
    pub conversations: Option<usize>,
    /// Only the first N questions of each conversation (of categories 1–4).
    #[arg(long)]
    pub questions: Option<usize>,
    /// Write the TREC run here.
    #[arg(long)]
    pub run: Option<PathBuf>,
    /// How many results each question asks the agent's search for (its `limit`, at most 50);
    /// recall@5 and @10 read the first 5 and 10 of them, the run writes them all.
    #[arg(long, default_value_t = 10)]
    pub limit: usize,
    /// Fail unless the ONNX model loaded.
    #[arg(long)]
    pub require_model: bool,
    /// Fail when evidence recall@5 is below this.
    #[arg(long)]
    pub min_recall5: Option<f64>,
    /// Keep only the newest N messages of each conversation in recall's memory, as a process
    /// does with a log larger than `RecallConfig::resident_messages`: the older ones are
    /// found by their words only (a study of what that costs; the product keeps 50,000).
    #[arg(long)]
    pub resident_messages: Option<usize>,
    /// Where vectors are cached by (content hash, model id) between runs (default
    /// `~/.cache/memoria/vectors`, shared with `eval beir`): a second run embeds only the
    /// questions and the messages whose text changed.
    #[arg(long)]
    pub cache_dir: Option<PathBuf>,
    #[command(flatten)]
    pub model: ModelArgs,
}

/// The results of a run.
#[derive(Debug, Clone, Default, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LocomoReport {
    pub conversations: usize,
    pub messages: usize,
    pub questions: usize,
    pub recall_at_5: f64,
    pub recall_at_10: f64,
    /// Per category (1 single-hop, 2 temporal, 3 multi-hop, 4 open-domain): questions, R@5, R@10.
    pub by_category: Vec<(u64, usize, f64, f64)>,
    pub embedder: String,
    pub capture_ms: u128,
    pub search_ms_per_question: f64,
}

/// LoCoMo's session time, `1:56 pm on 8 May, 2023`, in ms since the epoch (as UTC).
pub fn session_time(text: &str) -> Option<i64> {
    let (clock, date) = text.split_once(" on ")?;
    let (hm, half) = clock.trim().rsplit_once(' ')?;
    let (h, m) = hm.split_once(':')?;
    let (mut h, m): (i64, i64) = (h.trim().parse().ok()?, m.trim().parse().ok()?);
    match half.to_ascii_lowercase().as_str() {
        "pm" if h != 12 => h += 12,
        "am" if h == 12 => h = 0,
        "am" | "pm" => {}
        _ => return None,
    }
    let date = date.replace(',', "");
    let mut parts = date.split_whitespace();
    let day: u32 = parts.next()?.parse().ok()?;
    let month = parts.next()?.to_ascii_lowercase();
    let year: i32 = parts.next()?.parse().ok()?;
    const MONTHS: [&str; 12] = [
        "january",
        "february",
        "march",
        "april",
        "may",
        "june",
        "july",
        "august",
        "september",
        "october",
        "november",
        "december",
    ];
    let mo = MONTHS.iter().position(|x| *x == month)? + 1;
    let day_ms = backup::date_to_ms(&format!("{year:04}-{mo:02}-{day:02}"))?;
    Some(day_ms + (h * 60 + m) * 60_000)
}

/// A conversation's turns as the capture path reads them, session by session.
pub fn incoming_of(sample_id: &str, conversation: &Value) -> anyhow::Result<Vec<Incoming>> {
    let mut out = Vec::new();
    for k in 1.. {
        let Some(turns) = conversation
            .get(format!("session_{k}"))
            .and_then(Value::as_array)
        else {
            if k > 1 && conversation.get(format!("session_{}", k + 1)).is_none() {
                break;
            }
            continue;
        };
        let when = conversation
            .get(format!("session_{k}_date_time"))
            .and_then(Value::as_str)
            .and_then(session_time)
            .with_context(|| format!("{sample_id}: session {k} has no readable date"))?;
        for (i, t) in turns.iter().enumerate() {
            let text = t.get("text").and_then(Value::as_str).unwrap_or("");
            let mut m = Incoming::new(Role::User, text);
            m.conversation = Some(format!("{sample_id}-session-{k}"));
            m.id = t.get("dia_id").and_then(Value::as_str).map(str::to_owned);
            // Turns keep their order within the session's minute.
            m.at = Some(when + i as i64 * 1000);
            m.speaker = t.get("speaker").and_then(Value::as_str).map(str::to_owned);
            if let Some(c) = t.get("blip_caption").and_then(Value::as_str) {
                m.captions.push(c.to_owned());
            }
            out.push(m);
        }
    }
    Ok(out)
}

/// `D1:3` and `D1:03` name the same turn.
fn normal_dia(id: &str) -> String {
    match id.trim().rsplit_once(':') {
        Some((d, t)) => format!("{d}:{}", t.trim_start_matches('0')),
        None => id.trim().to_owned(),
    }
}

/// One question's lines of a TREC run: each id in the order the agent reads it, with the score
/// of the hit it was read from, each at least a millionth below the one before it, so tools
/// that order a run by score (ties by id) keep the agent's order.
fn write_run(w: &mut impl Write, query: &str, ids: &[(String, f64)]) -> std::io::Result<()> {
    let mut last = f64::INFINITY;
    for (rank, (d, score)) in ids.iter().enumerate() {
        last = score.min(last - 1e-6);
        writeln!(w, "{query} Q0 {d} {} {last:.9} memoria", rank + 1)?;
    }
    Ok(())
}

/// How long after a conversation's last message its questions are asked: a day, the user
/// coming back to it the next day. An agent is asked during or right after the conversation it
/// took part in, so recency and a question's time expression ("last week", "two weeks before
/// the trip") are read against the conversation's own time, not against the day the eval runs;
/// a day keeps "yesterday" meaning the conversation's last day while leaving its last session
/// as recent as a real user's would be.
pub const ASKED_AFTER_MS: i64 = 24 * 60 * 60 * 1000;

/// When a conversation's questions are asked: [`ASKED_AFTER_MS`] after its last message, or
/// `None` for a conversation without a dated message.
pub fn asked_at(incoming: &[Incoming]) -> Option<i64> {
    incoming
        .iter()
        .filter_map(|m| m.at)
        .max()
        .map(|last| last + ASKED_AFTER_MS)
}

/// Where each conversation's recall finds its model and vector cache.
struct Setup {
    model_dir: Option<PathBuf>,
    vector_cache: Option<PathBuf>,
    resident_messages: Option<usize>,
}

/// A conversation captured into a home of its own, with the engine and recall index an agent
/// would search, both on `clock`: the time the questions are asked.
fn open_conversation(
    id: &str,
    incoming: Vec<Incoming>,
    clock: Arc<FixedClock>,
    setup: &Setup,
) -> anyhow::Result<(tempfile::TempDir, Engine, u128)> {
    let home = tempfile::tempdir()?;
    let engine = Engine::open(OpenOptions {
        home: Some(home.path().to_path_buf()),
        clock: clock.clone(),
        model_dir: setup.model_dir.clone(),
        ..Default::default()
    })?;
    let n = incoming.len();
    let started = std::time::Instant::now();
    let captured = capture(
        &engine,
        incoming,
        &CaptureOptions {
            host: Some("locomo".into()),
            ..Default::default()
        },
    )?;
    let capture_ms = started.elapsed().as_millis();
    if captured.added != n {
        bail!("{id}: {n} turns, {} captured", captured.added);
    }
    // The index the engine would open, its vectors cached across runs; opened after the
    // capture, as the default path opens it, so nothing is embedded in the background while
    // questions are asked.
    let mut config = RecallConfig::new(memoria_engine::recall::default_dir(home.path()));
    config.model_dir = setup.model_dir.clone();
    config.vector_cache = setup.vector_cache.clone();
    if let Some(resident) = setup.resident_messages {
        config.resident_messages = resident;
    }
    let index = RecallIndex::open(&config, clock)?;
    let _ = engine.recall_index.set(SharedRecall::new(index));
    // Opening recall brings the messages in with their vectors, as a session's indexer leaves
    // them before the questions.
    engine.recall()?;
    Ok((home, engine, capture_ms))
}

/// One question through the agent's search: each message's `dia_id` in the order the agent
/// reads it, with the score of the hit it was read from.
fn ask(engine: &mut Engine, question: &str, limit: usize) -> anyhow::Result<Vec<(String, f64)>> {
    let hits = search(
        engine,
        &AgentQuery {
            queries: vec![question.to_owned()],
            limit,
            ..Default::default()
        },
    )?;
    let mut ids: Vec<(String, f64)> = Vec::new();
    let log = engine.log()?;
    // A message stands for itself; a fact or summary for the messages it names, in order,
    // each taking a place.
    for h in &hits {
        let keys = if h.sources.is_empty() {
            std::slice::from_ref(&h.id)
        } else {
            h.sources.as_slice()
        };
        for key in keys {
            // A run names each message once, where the agent first reads it.
            if let Some(m) = log.get(key)?
                && !ids.iter().any(|(d, _)| *d == normal_dia(&m.message_id))
            {
                ids.push((normal_dia(&m.message_id), h.score));
            }
        }
    }
    Ok(ids)
}

pub fn run_locomo(args: &LocomoArgs, json: bool) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(&args.data)
        .with_context(|| format!("reading {}", args.data.display()))?;
    let samples: Vec<Value> = serde_json::from_str(&text).with_context(|| {
        format!(
            "{} is not LoCoMo's JSON list of samples",
            args.data.display()
        )
    })?;
    let mut run = match &args.run {
        Some(p) => Some(std::io::BufWriter::new(
            std::fs::File::create(p).with_context(|| format!("creating {}", p.display()))?,
        )),
        None => None,
    };
    let model_dir = args.model.resolve();
    let cache_dir = args
        .cache_dir
        .clone()
        .unwrap_or_else(crate::default_cache_dir);
    std::fs::create_dir_all(&cache_dir)
        .with_context(|| format!("creating the vector cache {}", cache_dir.display()))?;
    let setup = Setup {
        model_dir: model_dir.clone(),
        vector_cache: Some(cache_dir.join("vectors.sqlite")),
        resident_messages: args.resident_messages,
    };
    let mut report = LocomoReport::default();
    let mut per_cat: HashMap<u64, (usize, f64, f64)> = HashMap::new();
    let (mut sum5, mut sum10) = (0.0, 0.0);
    let mut search_ms = 0.0;
    for sample in samples
        .iter()
        .take(args.conversations.unwrap_or(usize::MAX))
    {
        let id = sample
            .get("sample_id")
            .and_then(Value::as_str)
            .context("a sample has no sample_id")?;
        let conv = sample
            .get("conversation")
            .context("a sample has no conversation")?;
        let incoming = incoming_of(id, conv)?;
        let n = incoming.len();
        let clock = Arc::new(FixedClock::new(asked_at(&incoming).with_context(|| {
            format!("{id}: the conversation has no turns to ask about")
        })?));
        let (_home, mut engine, capture_ms) = open_conversation(id, incoming, clock, &setup)?;
        report.capture_ms += capture_ms;
        report.messages += n;
        let status = engine.recall()?.status();
        report.embedder = status.model_id.clone();
        if args.require_model && status.fallback_reason.is_some() {
            bail!(
                "the embedding model did not load: {}",
                status.fallback_reason.unwrap_or_default()
            );
        }
        report.conversations += 1;
        let qa = sample
            .get("qa")
            .and_then(Value::as_array)
            .context("no qa")?;
        let (mut asked, mut conv5) = (0, 0.0);
        for (qi, q) in qa.iter().enumerate() {
            let cat = q.get("category").and_then(Value::as_u64).unwrap_or(0);
            if !(1..=4).contains(&cat) {
                continue;
            }
            if args.questions.is_some_and(|max| asked >= max) {
                break;
            }
            asked += 1;
            let question = q.get("question").and_then(Value::as_str).unwrap_or("");
            let evidence: Vec<String> = q
                .get("evidence")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).map(normal_dia).collect())
                .unwrap_or_default();
            let t = std::time::Instant::now();
            let ids = ask(&mut engine, question, args.limit)?;
            search_ms += t.elapsed().as_secs_f64() * 1000.0;
            if let Some(w) = run.as_mut() {
                write_run(w, &format!("{id}-q{qi}"), &ids)?;
            }
            let found = |k: usize| {
                if evidence.is_empty() {
                    return 0.0;
                }
                let top: Vec<&String> = ids.iter().take(k).map(|(d, _)| d).collect();
                evidence.iter().filter(|e| top.contains(e)).count() as f64 / evidence.len() as f64
            };
            let (r5, r10) = (found(5), found(10));
            sum5 += r5;
            sum10 += r10;
            conv5 += r5;
            let c = per_cat.entry(cat).or_default();
            c.0 += 1;
            c.1 += r5;
            c.2 += r10;
            report.questions += 1;
        }
        eprintln!(
            "{id}: {n} turns, {asked} questions, R@5 {:.3}, so far {:.3}",
            conv5 / asked.max(1) as f64,
            sum5 / report.questions.max(1) as f64
        );
    }
    if let Some(mut w) = run {
        w.flush()?;
    }
    let q = report.questions.max(1) as f64;
    report.recall_at_5 = sum5 / q;
    report.recall_at_10 = sum10 / q;
    report.search_ms_per_question = search_ms / q;
    let mut cats: Vec<_> = per_cat.into_iter().collect();
    cats.sort_by_key(|(c, _)| *c);
    report.by_category = cats
        .into_iter()
        .map(|(c, (n, r5, r10))| (c, n, r5 / n as f64, r10 / n as f64))
        .collect();
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!(
            "LoCoMo: {} conversations, {} turns, {} questions (categories 1-4), embedder {}",
            report.conversations, report.messages, report.questions, report.embedder
        );
        println!(
            "evidence recall@5 {:.4}  recall@10 {:.4}",
            report.recall_at_5, report.recall_at_10
        );
        for (c, n, r5, r10) in &report.by_category {
            println!("  category {c}: {n} questions, R@5 {r5:.4}, R@10 {r10:.4}");
        }
        println!(
            "capture {} ms in all; search {:.1} ms per question",
            report.capture_ms, report.search_ms_per_question
        );
    }
    if let Some(min) = args.min_recall5
        && report.recall_at_5 < min
    {
        bail!(
            "evidence recall@5 {:.4} is below the gate {min}",
            report.recall_at_5
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_times_read_as_locomo_writes_them() {
        let day = backup::date_to_ms("2023-05-08").unwrap();
        assert_eq!(
            session_time("1:56 pm on 8 May, 2023"),
            Some(day + (13 * 60 + 56) * 60_000)
        );
        assert_eq!(
            session_time("12:09 am on 8 May, 2023"),
            Some(day + 9 * 60_000)
        );
        assert_eq!(session_time("sometime"), None);
        assert_eq!(normal_dia("D30:05"), "D30:5");
    }

    /// Four sessions: the kitten in January and in the last session (22 May), the garden plan
    /// on 1 May (said most) and on 12 May (the week before the questions). The older of each
    /// pair says more of a question's words.
    fn sessions() -> Value {
        serde_json::json!({
            "speaker_a": "Ana",
            "speaker_b": "Ben",
            "session_1_date_time": "10:00 am on 3 January, 2023",
            "session_1": [
                {"speaker": "Ana", "dia_id": "D1:1",
                 "text": "Our kitten Miso is a tiny grey kitten, the kitten sleeps all day."}
            ],
            "session_2_date_time": "1:00 pm on 1 May, 2023",
            "session_2": [
                {"speaker": "Ana", "dia_id": "D2:1",
                 "text": "The garden plan: tomatoes in the garden, garden beds, garden paths."}
            ],
            "session_3_date_time": "1:00 pm on 12 May, 2023",
            "session_3": [
                {"speaker": "Ben", "dia_id": "D3:1",
                 "text": "I changed the garden plan, beans instead of tomatoes."}
            ],
            "session_4_date_time": "9:30 am on 22 May, 2023",
            "session_4": [
                {"speaker": "Ana", "dia_id": "D4:1", "text": "Our kitten Miso learned to open doors."}
            ]
        })
    }

    /// The first turn the agent reads for each question, asked at `at`.
    fn first_answers(at: i64, home: &std::path::Path, questions: &[&str]) -> Vec<String> {
        let incoming = incoming_of("conv", &sessions()).unwrap();
        let setup = Setup {
            model_dir: Some(home.join("no-model")),
            vector_cache: None,
            resident_messages: None,
        };
        let (_home, mut engine, _) =
            open_conversation("conv", incoming, Arc::new(FixedClock::new(at)), &setup).unwrap();
        questions
            .iter()
            .map(|q| {
                let ids = ask(&mut engine, q, 10).unwrap();
                ids.first().map(|(d, _)| d.clone()).unwrap_or_default()
            })
            .collect()
    }

    #[test]
    fn questions_are_asked_the_day_after_the_conversation() {
        let incoming = incoming_of("conv", &sessions()).unwrap();
        let last = session_time("9:30 am on 22 May, 2023").unwrap();
        assert_eq!(asked_at(&incoming), Some(last + ASKED_AFTER_MS));
        assert_eq!(asked_at(&[]), None);

        // Asked then, "last week" is the week of the garden's second session; asked years
        // later, "last week" names no turn and the same search prefers the turn with more of
        // the words. A message's age never counts against it: the kitten's months-old turn
        // with more of the question's words comes before the recent one, asked then or later.
        let questions = [
            "What did we say about the garden plan last week?",
            "Tell me about our kitten Miso.",
        ];
        let dir = tempfile::tempdir().unwrap();
        let then = first_answers(asked_at(&incoming).unwrap(), dir.path(), &questions);
        assert_eq!(then, ["D3:1", "D1:1"]);
        let wall = memoria_shared::Clock::now_ms(&memoria_shared::SystemClock);
        assert_eq!(
            first_answers(wall, dir.path(), &questions),
            ["D2:1", "D1:1"]
        );
    }

    #[test]
    fn a_run_keeps_the_agents_order_when_read_by_score() {
        // A summary's messages share its score, and the first of them sorts last by id.
        let ids: Vec<(String, f64)> = [("D9:1", 0.8), ("D10:2", 0.5), ("D1:3", 0.5), ("D2:4", 0.5)]
            .iter()
            .map(|(d, s)| ((*d).to_owned(), *s))
            .collect();
        let mut out = Vec::new();
        write_run(&mut out, "conv-1-q0", &ids).unwrap();
        let lines: Vec<Vec<String>> = String::from_utf8(out)
            .unwrap()
            .lines()
            .map(|l| l.split(' ').map(str::to_owned).collect())
            .collect();
        let mut by_score = lines.clone();
        by_score.sort_by(|a, b| {
            let s = |l: &Vec<String>| l[4].parse::<f64>().unwrap();
            s(b).total_cmp(&s(a)).then_with(|| b[2].cmp(&a[2]))
        });
        assert_eq!(by_score, lines);
        let read: Vec<(&str, &str, f64)> = lines
            .iter()
            .map(|l| (l[2].as_str(), l[3].as_str(), l[4].parse().unwrap()))
            .collect();
        assert_eq!(read[0], ("D9:1", "1", 0.8));
        assert_eq!(read[1].0, "D10:2");
        assert!((read[3].2 - (0.5 - 2e-6)).abs() < 1e-12);
    }
}
