//! The review queue at 5,000 notes: a full `api::hygiene::review` (the recall index brought in
//! step, the index read with bodies, usage, cached vectors from the recall index's files, every
//! finding kind, dismissals), the same-topic grouping alone, and the notes' words alone. The notes are generated: sentences of a Zipf-like vocabulary,
//! one note in twenty a reworded copy of another, links (some broken), some long bodies, and a
//! cached vector per note (copies get a nearby vector) under a model id of their own.
//!
//! `cargo bench -p memoria-engine --bench review` (release). `MEMORIA_BENCH_NOTES` changes the
//! number of notes.

use std::path::Path;

use criterion::{Criterion, criterion_group, criterion_main};
use memoria_engine::api::hygiene::{self, ReviewQuery};
use memoria_engine::api::notes::{self, ListQuery};
use memoria_engine::hygiene::topic::{self, TopicDoc};
use memoria_engine::recall::store::VectorStore;
use memoria_engine::vault::Limits;
use memoria_engine::{Engine, OpenOptions};

/// A small deterministic generator (xorshift), so every run reviews the same notes.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

const SYLLABLES: [&str; 16] = [
    "ka", "lo", "mi", "ren", "tu", "vas", "po", "qui", "sel", "dar", "no", "fe", "gri", "hal",
    "jun", "bex",
];

fn word(i: usize) -> String {
    let mut w = String::new();
    let mut n = i + 16;
    while n > 0 {
        w.push_str(SYLLABLES[n % 16]);
        n /= 16;
    }
    w
}

fn sentence(rng: &mut Rng) -> String {
    let len = 8 + (rng.next() % 10) as usize;
    let words: Vec<String> = (0..len)
        .map(|_| word((rng.unit().powi(3) * 20_000.0) as usize))
        .collect();
    format!("{}.", words.join(" "))
}

fn random_vector(rng: &mut Rng) -> Vec<f32> {
    let mut v: Vec<f32> = (0..384).map(|_| rng.unit() as f32 - 0.5).collect();
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    v.iter_mut().for_each(|x| *x /= n);
    v
}

/// Writes `n` note files into the home's user folder.
fn write_vault(home: &Path, n: usize) {
    let dir = home.join("memory").join("user");
    std::fs::create_dir_all(&dir).unwrap();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut bodies: Vec<Vec<String>> = Vec::with_capacity(n);
    for i in 0..n {
        let mut sentences: Vec<String> = if i % 20 == 19 {
            // A reworded copy: the sentences of an earlier note, one dropped, reordered.
            let mut s = bodies[i - 1 - (rng.next() % 10) as usize].clone();
            s.remove(0);
            s.rotate_left(1);
            s
        } else {
            let count = if i % 250 == 0 {
                400
            } else {
                10 + (rng.next() % 12) as usize
            };
            (0..count).map(|_| sentence(&mut rng)).collect()
        };
        if i % 7 == 0 {
            sentences.push(format!(
                "See [[note-{}]].",
                rng.next() as usize % (n + n / 10)
            ));
        }
        let summary = sentences[0].trim_end_matches('.').to_owned();
        let text = format!(
            "---\nid: note-{i}\nsummary: {summary}\ntags: [bench]\ncreatedAt: {}\nupdatedAt: {}\n---\n{}\n",
            1_700_000_000_000i64 + i as i64,
            1_700_000_000_000i64 + i as i64,
            sentences.join(" ")
        );
        std::fs::write(dir.join(format!("note-{i}.md")), text).unwrap();
        bodies.push(sentences);
    }
}

fn open(home: &Path) -> Engine {
    Engine::open(OpenOptions {
        limits: Limits {
            notes_per_scope: 100_000,
            ..Limits::default()
        },
        ..OpenOptions::without_model(home)
    })
    .unwrap()
}

/// Caches a vector per note under a model of its own; a copy's vector is near its source's.
fn cache_vectors(home: &Path, engine: &Engine) {
    let rows = notes::list(engine, &ListQuery::default()).unwrap();
    let mut rng = Rng(7);
    let mut items = Vec::with_capacity(rows.len());
    for r in &rows {
        items.push((r.hash.clone().unwrap(), vec![random_vector(&mut rng)]));
    }
    let mut store =
        VectorStore::open(&home.join("index").join("recall").join("vectors.sqlite")).unwrap();
    store.put_many("bench-model-384", &items).unwrap();
}

/// This thread's CPU time (user and system) in milliseconds, from `/proc` (0 where there is
/// none): on a busy machine the wall time criterion reports measures the load too.
fn cpu_ms() -> u64 {
    let Ok(stat) = std::fs::read_to_string("/proc/thread-self/stat") else {
        return 0;
    };
    let Some(end) = stat.rfind(')') else { return 0 };
    let fields: Vec<&str> = stat[end + 2..].split(' ').collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // utime and stime, in clock ticks of 10 ms.
    (ticks(11) + ticks(12)) * 10
}

/// The mean CPU time of `runs` calls of `f`, in milliseconds.
fn cpu_per_call<T>(runs: u64, mut f: impl FnMut() -> T) -> u64 {
    let start = cpu_ms();
    for _ in 0..runs {
        std::hint::black_box(f());
    }
    (cpu_ms() - start) / runs
}

fn bench(c: &mut Criterion) {
    let n: usize = std::env::var("MEMORIA_BENCH_NOTES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5_000);
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    write_vault(&home, n);
    let engine = open(&home);
    cache_vectors(&home, &engine);
    let r = hygiene::review(&engine, &ReviewQuery::default()).unwrap();
    let mut kinds = std::collections::BTreeMap::new();
    for f in &r.findings {
        *kinds.entry(f.kind().as_str()).or_insert(0) += 1;
    }
    eprintln!(
        "{} notes, vectors: {}, findings: {kinds:?}",
        r.notes, r.vectors
    );
    let mut group = c.benchmark_group("review");
    group.sample_size(10);
    group.bench_function(format!("full review, {n} notes"), |b| {
        b.iter(|| hygiene::review(&engine, &ReviewQuery::default()).unwrap())
    });
    let docs: Vec<TopicDoc> = {
        let mut rng = Rng(11);
        notes::list(&engine, &ListQuery::default())
            .unwrap()
            .iter()
            .map(|row| {
                let body = std::fs::read_to_string(&row.path).unwrap();
                TopicDoc {
                    scope: row.scope.clone(),
                    words: topic::note_words(&row.summary, &row.tags, &body),
                    vector: Some(random_vector(&mut rng)),
                }
            })
            .collect()
    };
    let texts: Vec<(String, Vec<String>, String)> = notes::list(&engine, &ListQuery::default())
        .unwrap()
        .iter()
        .map(|row| {
            let body = std::fs::read_to_string(&row.path).unwrap();
            (row.summary.clone(), row.tags.clone(), body)
        })
        .collect();
    eprintln!(
        "CPU time per call: full review {} ms, same-topic groups {} ms, the notes' words {} ms",
        cpu_per_call(5, || hygiene::review(&engine, &ReviewQuery::default())
            .unwrap()),
        cpu_per_call(5, || topic::groups(&docs)),
        cpu_per_call(5, || texts
            .iter()
            .map(|(s, t, b)| topic::note_words(s, t, b).len())
            .sum::<usize>()),
    );
    group.bench_function(format!("same-topic groups, {n} notes"), |b| {
        b.iter(|| topic::groups(&docs))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
