//! Measures the poison gate: its false positives on ordinary working prose and its false
//! negatives on the injection sets in `testdata/`.
//!
//! ```text
//! cargo run -p memoria-derive --example gate_rates -- [LOCOMO_JSON]
//! ```
//!
//! Prose: every paragraph of the repository's `docs/*.md` and `README.md`, and, when a
//! LoCoMo-format file is given, every message of its conversations (checked as capture checks
//! one: its text with any shared image's caption, and its speaker's name as a turn's label).
//! Each hit and each miss is printed, so a rate can be read case by case.

use std::path::{Path, PathBuf};

use memoria_derive::gate;

fn main() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut docs: Vec<PathBuf> = std::fs::read_dir(repo.join("docs"))
        .expect("the repository's docs folder")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    docs.push(repo.join("README.md"));
    let mut paragraphs = Vec::new();
    for d in &docs {
        let text = std::fs::read_to_string(d).expect("a readable doc");
        let name = d.file_name().unwrap().to_string_lossy().into_owned();
        for p in text.split("\n\n").filter(|p| !p.trim().is_empty()) {
            paragraphs.push((name.clone(), p.to_owned()));
        }
    }
    println!("false positives: ordinary prose that trips the gate");
    prose("docs paragraphs (docs/*.md, README.md)", &paragraphs, |p| {
        gate::check(p)
    });
    if let Some(path) = std::env::args().nth(1) {
        let messages = locomo(Path::new(&path));
        prose("dev conversations' messages", &messages, |text| {
            let (speaker, text) = text.split_once('\u{0}').expect("speaker and text");
            gate::check(text).or_else(|| gate::check(&format!("{speaker}: ")))
        });
    } else {
        println!("  (no conversations file given: dev conversations not measured)");
    }
    println!("false negatives: injections the gate lets through");
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata");
    injections(
        "injections.tsv (the rules were written with it in view)",
        &data.join("injections.tsv"),
    );
    injections(
        "injections_heldout.tsv (written after the rules, never tuned on)",
        &data.join("injections_heldout.tsv"),
    );
}

/// Every message of a LoCoMo-format file, as `speaker \0 text`, with where it is from.
fn locomo(path: &Path) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(path).expect("a readable conversations file");
    let samples: serde_json::Value = serde_json::from_str(&text).expect("LoCoMo JSON");
    let mut out = Vec::new();
    for s in samples.as_array().expect("a list of samples") {
        let id = s["sample_id"].as_str().unwrap_or("?");
        let Some(conv) = s["conversation"].as_object() else {
            continue;
        };
        let mut sessions: Vec<(&String, &serde_json::Value)> =
            conv.iter().filter(|(_, v)| v.is_array()).collect();
        sessions.sort_by_key(|(k, _)| k.as_str());
        for (session, turns) in sessions {
            for t in turns.as_array().unwrap() {
                let mut text = t["text"].as_str().unwrap_or("").to_owned();
                if let Some(c) = t["blip_caption"].as_str() {
                    text.push_str(&format!("\n[shared: {c}]"));
                }
                let speaker = t["speaker"].as_str().unwrap_or("");
                out.push((format!("{id} {session}"), format!("{speaker}\u{0}{text}")));
            }
        }
    }
    out
}

fn prose(what: &str, items: &[(String, String)], check: impl Fn(&str) -> Option<gate::Detection>) {
    let mut hits = Vec::new();
    for (from, text) in items {
        if let Some(d) = check(text) {
            hits.push(format!(
                "    {from} ({}): {}",
                d.detector,
                excerpt(text, d.at)
            ));
        }
    }
    println!(
        "  {what}: {} of {} tripped ({})",
        hits.len(),
        items.len(),
        percent(hits.len(), items.len())
    );
    for h in hits {
        println!("{h}");
    }
}

fn injections(what: &str, path: &Path) {
    let text = std::fs::read_to_string(path).expect("a readable injection set");
    let cases: Vec<Vec<String>> = text
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| l.split('\t').map(|f| f.replace("\\n", "\n")).collect())
        .collect();
    let missed: Vec<&Vec<String>> = cases.iter().filter(|c| gate::clean(&c[2])).collect();
    println!(
        "  {what}: {} of {} missed ({})",
        missed.len(),
        cases.len(),
        percent(missed.len(), cases.len())
    );
    for lang in ["en", "es", "zh", "de", "fr"] {
        let of = cases.iter().filter(|c| c[1] == lang).count();
        let miss = missed.iter().filter(|c| c[1] == lang).count();
        println!("    {lang}: {miss} of {of} missed");
    }
    for c in missed {
        println!("    missed {} {}: {}", c[0], c[1], c[2].replace('\n', "⏎"));
    }
}

fn excerpt(text: &str, at: usize) -> String {
    text[at..]
        .chars()
        .take(100)
        .collect::<String>()
        .replace('\n', "⏎")
}

fn percent(n: usize, of: usize) -> String {
    if of == 0 {
        return "-".into();
    }
    format!("{:.2}%", 100.0 * n as f64 / of as f64)
}
