//! `memoria eval topics`: the review's same-topic findings among short notes, against labelled
//! groups.
//!
//! Each set goes into a home of its own as notes of the user scope (`api::notes::add`, the
//! text as summary and body, with its tags), and the review runs as `memoria review` does
//! (`api::hygiene::review`): once on a home whose model cannot load (words only), once with
//! the model (words and vectors). A found pair is two notes of one same-topic finding; it is
//! right when the set puts both in one group. Pair precision and recall are over every pair
//! of the set.
//!
//! Two sets: a file of short notes (JSON Lines: `group` — notes of one group say the same,
//! `null` for a note that is its own — `lang`, `tags`, `text`), and SciFact's claims, where
//! claims that cite the same abstract are one group.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, bail};
use memoria_engine::api::hygiene::{FindingKind, review};
use memoria_engine::api::notes::{AddNote, add};
use memoria_engine::hygiene::ReviewQuery;
use memoria_engine::vault::{Engine, OpenOptions};
use memoria_shared::SystemClock;
use serde::Deserialize;

use crate::ModelArgs;

#[derive(Debug, clap::Args)]
pub struct TopicsArgs {
    /// Short notes, one JSON object per line: `group` (null: a note of its own), `lang`,
    /// `tags`, `text`.
    #[arg(long)]
    pub data: Option<PathBuf>,
    /// SciFact's folder (`queries.jsonl`, `qrels/*.tsv`): claims citing one abstract are one
    /// group.
    #[arg(long)]
    pub scifact: Option<PathBuf>,
    /// Fail unless the ONNX model loaded for the run with vectors.
    #[arg(long)]
    pub require_model: bool,
    /// Write every pair of notes that share a word or tag here (TSV: set, truth, word
    /// overlap, cosine, length in words of each, both texts), for a study of the rule.
    #[arg(long)]
    pub pairs: Option<PathBuf>,
    #[command(flatten)]
    pub model: ModelArgs,
}

/// One labelled note.
#[derive(Debug, Clone, Deserialize)]
pub struct LabelledNote {
    pub group: Option<String>,
    #[serde(default)]
    pub lang: String,
    #[serde(default)]
    pub tags: Vec<String>,
    pub text: String,
}

/// Pair precision and recall of one run.
#[derive(Debug, Clone, Default, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PairScores {
    pub found: usize,
    pub right: usize,
    pub truth: usize,
    pub precision: f64,
    pub recall: f64,
    /// Whether the review had vectors to use.
    pub vectors: bool,
}

/// The runs of one set.
#[derive(Debug, Clone, Default, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SetReport {
    pub name: String,
    pub notes: usize,
    pub words_only: PairScores,
    pub with_vectors: PairScores,
    /// Per language, with vectors.
    pub by_lang: BTreeMap<String, PairScores>,
}

/// Reads a short-note file.
pub fn read_notes(path: &Path) -> anyhow::Result<Vec<LabelledNote>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l)
                .with_context(|| format!("{} line {}: not a labelled note", path.display(), i + 1))
        })
        .collect()
}

/// SciFact's claims as notes: claims that cite one abstract (directly or through another
/// claim) are one group; a claim citing none is its own.
pub fn scifact_claims(dir: &Path) -> anyhow::Result<Vec<LabelledNote>> {
    let queries = dir.join("queries.jsonl");
    let text = std::fs::read_to_string(&queries)
        .with_context(|| format!("reading {}", queries.display()))?;
    let mut claims: Vec<(String, String)> = Vec::new();
    for l in text.lines().filter(|l| !l.trim().is_empty()) {
        let v: serde_json::Value = serde_json::from_str(l)?;
        let id = v["_id"].as_str().context("a claim without _id")?.to_owned();
        let t = v["text"]
            .as_str()
            .context("a claim without text")?
            .to_owned();
        claims.push((id, t));
    }
    let mut cites: HashMap<String, Vec<String>> = HashMap::new();
    let qrels = dir.join("qrels");
    for entry in
        std::fs::read_dir(&qrels).with_context(|| format!("reading {}", qrels.display()))?
    {
        let path = entry?.path();
        if path.extension().is_none_or(|e| e != "tsv") {
            continue;
        }
        for l in std::fs::read_to_string(&path)?.lines().skip(1) {
            let mut f = l.split('\t');
            if let (Some(q), Some(d)) = (f.next(), f.next()) {
                cites.entry(q.to_owned()).or_default().push(d.to_owned());
            }
        }
    }
    // Claims linked through a shared abstract: union-find over claim indexes.
    let mut parent: Vec<usize> = (0..claims.len()).collect();
    fn root(p: &mut [usize], mut i: usize) -> usize {
        while p[i] != i {
            p[i] = p[p[i]];
            i = p[i];
        }
        i
    }
    let mut first_citer: HashMap<&str, usize> = HashMap::new();
    for (i, (id, _)) in claims.iter().enumerate() {
        for d in cites.get(id).into_iter().flatten() {
            match first_citer.get(d.as_str()) {
                Some(&j) => {
                    let (a, b) = (root(&mut parent, i), root(&mut parent, j));
                    parent[a.max(b)] = a.min(b);
                }
                None => {
                    first_citer.insert(d, i);
                }
            }
        }
    }
    let roots: Vec<usize> = (0..claims.len()).map(|i| root(&mut parent, i)).collect();
    let mut size: HashMap<usize, usize> = HashMap::new();
    for &r in &roots {
        *size.entry(r).or_default() += 1;
    }
    Ok(claims
        .iter()
        .zip(&roots)
        .map(|((_, text), &r)| LabelledNote {
            group: (size[&r] > 1).then(|| format!("scifact-{}", claims[r].0)),
            lang: "en".into(),
            tags: Vec::new(),
            text: text.clone(),
        })
        .collect())
}

/// Every pair of notes the set puts in one group, as indexes `(i, j)`, `i < j`.
fn truth_pairs(notes: &[LabelledNote]) -> HashSet<(usize, usize)> {
    let mut by_group: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, n) in notes.iter().enumerate() {
        if let Some(g) = &n.group {
            by_group.entry(g).or_default().push(i);
        }
    }
    let mut out = HashSet::new();
    for members in by_group.values() {
        for (a, &i) in members.iter().enumerate() {
            for &j in &members[a + 1..] {
                out.insert((i.min(j), i.max(j)));
            }
        }
    }
    out
}

fn scores(
    found: &HashSet<(usize, usize)>,
    truth: &HashSet<(usize, usize)>,
    vectors: bool,
) -> PairScores {
    let right = found.intersection(truth).count();
    PairScores {
        found: found.len(),
        right,
        truth: truth.len(),
        precision: if found.is_empty() {
            1.0
        } else {
            right as f64 / found.len() as f64
        },
        recall: if truth.is_empty() {
            1.0
        } else {
            right as f64 / truth.len() as f64
        },
        vectors,
    }
}

/// The pairs the review finds among `notes`, written into a fresh home whose model is
/// `model_dir` (`None`: a folder without one, so words only), and whether it used vectors.
fn found_pairs(
    notes: &[LabelledNote],
    model_dir: Option<PathBuf>,
    require_model: bool,
    mut dump: Option<(&str, &mut dyn std::io::Write)>,
) -> anyhow::Result<(HashSet<(usize, usize)>, bool)> {
    let home = tempfile::tempdir()?;
    let no_model = tempfile::tempdir()?;
    let mut engine = Engine::open(OpenOptions {
        home: Some(home.path().to_path_buf()),
        clock: Arc::new(SystemClock),
        model_dir: Some(model_dir.unwrap_or_else(|| no_model.path().to_path_buf())),
        ..Default::default()
    })?;
    let mut by_id: HashMap<String, usize> = HashMap::new();
    for (i, n) in notes.iter().enumerate() {
        let written = add(
            &mut engine,
            AddNote {
                summary: n.text.clone(),
                body: n.text.clone(),
                tags: n.tags.clone(),
                scope: Some("user".into()),
                ..Default::default()
            },
        )
        .with_context(|| format!("adding note {}: {}", i + 1, n.text))?;
        by_id.insert(written.id.clone(), i);
    }
    let r = review(&engine, &ReviewQuery::default())?;
    if require_model && !r.vectors {
        bail!("the review had no vectors: the embedding model did not load");
    }
    if let Some((set, out)) = dump.as_mut() {
        write_pairs(&engine, notes, &by_id, set, &mut **out)?;
    }
    let mut found = HashSet::new();
    for f in r
        .findings
        .iter()
        .filter(|f| f.kind() == FindingKind::SameTopic)
    {
        let members: Vec<usize> = f
            .notes
            .iter()
            .filter_map(|n| by_id.get(&n.id).copied())
            .collect();
        for (a, &i) in members.iter().enumerate() {
            for &j in &members[a + 1..] {
                found.insert((i.min(j), i.max(j)));
            }
        }
    }
    Ok((found, r.vectors))
}

/// The study's rows: every pair of notes sharing a word or tag, with its signals.
fn write_pairs(
    engine: &Engine,
    notes: &[LabelledNote],
    by_id: &HashMap<String, usize>,
    set: &str,
    out: &mut dyn std::io::Write,
) -> anyhow::Result<()> {
    use memoria_engine::hygiene::topic::{Similarity, TopicDoc, note_words, similarity};
    let mut hash_of: Vec<Option<String>> = vec![None; notes.len()];
    for (id, &i) in by_id {
        hash_of[i] = memoria_engine::api::notes::show(engine, id, Some("user"))?.hash;
    }
    let hashes: Vec<String> = hash_of.iter().flatten().cloned().collect();
    let vectors = memoria_engine::hygiene::cached_vectors(engine, &hashes)?;
    let docs: Vec<TopicDoc> = notes
        .iter()
        .zip(&hash_of)
        .map(|(n, h)| TopicDoc {
            scope: "user".into(),
            words: note_words(&n.text, &n.tags, &n.text),
            vector: h.as_ref().and_then(|h| vectors.get(h)).cloned(),
        })
        .collect();
    for i in 0..notes.len() {
        for j in i + 1..notes.len() {
            let s: Similarity = similarity(&docs[i], &docs[j]);
            if s.lexical == 0.0 {
                continue;
            }
            let truth = notes[i].group.is_some() && notes[i].group == notes[j].group;
            writeln!(
                out,
                "{set}\t{}\t{:.4}\t{}\t{}\t{}\t{}\t{}",
                u8::from(truth),
                s.lexical,
                s.cosine.map_or("".into(), |c| format!("{c:.4}")),
                docs[i].words.len(),
                docs[j].words.len(),
                notes[i].text.replace('\t', " "),
                notes[j].text.replace('\t', " ")
            )?;
        }
    }
    Ok(())
}

/// Both runs over one set.
pub fn evaluate(
    name: &str,
    notes: &[LabelledNote],
    model_dir: Option<PathBuf>,
    require_model: bool,
    dump: Option<&mut dyn std::io::Write>,
) -> anyhow::Result<SetReport> {
    let truth = truth_pairs(notes);
    let (words, words_vec) = found_pairs(notes, None, false, None)?;
    let (both, with_vec) = found_pairs(notes, model_dir, require_model, dump.map(|d| (name, d)))?;
    let mut by_lang = BTreeMap::new();
    let langs: HashSet<&str> = notes.iter().map(|n| n.lang.as_str()).collect();
    if langs.len() > 1 {
        for lang in langs {
            let keep = |&(i, j): &(usize, usize)| notes[i].lang == lang && notes[j].lang == lang;
            let t: HashSet<_> = truth.iter().copied().filter(keep).collect();
            let f: HashSet<_> = both.iter().copied().filter(keep).collect();
            by_lang.insert(lang.to_owned(), scores(&f, &t, with_vec));
        }
    }
    Ok(SetReport {
        name: name.to_owned(),
        notes: notes.len(),
        words_only: scores(&words, &truth, words_vec),
        with_vectors: scores(&both, &truth, with_vec),
        by_lang,
    })
}

fn line(label: &str, s: &PairScores) -> String {
    format!(
        "  {label:<14} precision {:.3} ({}/{})  recall {:.3} ({}/{}){}",
        s.precision,
        s.right,
        s.found,
        s.recall,
        s.right,
        s.truth,
        if s.vectors { "" } else { "  [no vectors]" }
    )
}

pub fn run_topics(args: &TopicsArgs, json: bool) -> anyhow::Result<()> {
    if args.data.is_none() && args.scifact.is_none() {
        bail!("name a set: --data FILE (short notes, JSON Lines) and/or --scifact DIR");
    }
    let model_dir = args.model.resolve();
    let mut dump = match &args.pairs {
        Some(p) => Some(std::io::BufWriter::new(
            std::fs::File::create(p).with_context(|| format!("creating {}", p.display()))?,
        )),
        None => None,
    };
    let mut reports = Vec::new();
    if let Some(path) = &args.data {
        let notes = read_notes(path)?;
        reports.push(evaluate(
            "short notes",
            &notes,
            model_dir.clone(),
            args.require_model,
            dump.as_mut().map(|d| d as &mut dyn std::io::Write),
        )?);
    }
    if let Some(dir) = &args.scifact {
        let notes = scifact_claims(dir)?;
        reports.push(evaluate(
            "scifact claims",
            &notes,
            model_dir.clone(),
            args.require_model,
            dump.as_mut().map(|d| d as &mut dyn std::io::Write),
        )?);
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&reports)?);
        return Ok(());
    }
    for r in &reports {
        println!("{} ({} notes)", r.name, r.notes);
        println!("{}", line("words only", &r.words_only));
        println!("{}", line("with vectors", &r.with_vectors));
        for (lang, s) in &r.by_lang {
            println!("{}", line(&format!("  {lang}"), s));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn note(group: Option<&str>, text: &str) -> LabelledNote {
        LabelledNote {
            group: group.map(str::to_owned),
            lang: "en".into(),
            tags: Vec::new(),
            text: text.into(),
        }
    }

    #[test]
    fn pairs_are_scored_against_the_groups() {
        let notes = vec![
            note(Some("a"), "x"),
            note(Some("a"), "y"),
            note(Some("a"), "z"),
            note(None, "w"),
        ];
        let truth = truth_pairs(&notes);
        assert_eq!(truth.len(), 3);
        let found: HashSet<_> = [(0, 1), (2, 3)].into_iter().collect();
        let s = scores(&found, &truth, true);
        assert_eq!((s.right, s.found, s.truth), (1, 2, 3));
        assert!((s.precision - 0.5).abs() < 1e-9 && (s.recall - 1.0 / 3.0).abs() < 1e-9);
    }

    #[test]
    fn scifact_claims_citing_one_abstract_are_one_group() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("queries.jsonl"),
            "{\"_id\":\"1\",\"text\":\"A\"}\n{\"_id\":\"2\",\"text\":\"B\"}\n\
             {\"_id\":\"3\",\"text\":\"C\"}\n{\"_id\":\"4\",\"text\":\"D\"}\n",
        )
        .unwrap();
        std::fs::create_dir(dir.path().join("qrels")).unwrap();
        std::fs::write(
            dir.path().join("qrels/train.tsv"),
            "query-id\tcorpus-id\tscore\n1\td1\t1\n2\td1\t1\n2\td2\t1\n3\td2\t1\n",
        )
        .unwrap();
        let notes = scifact_claims(dir.path()).unwrap();
        assert_eq!(notes[0].group, notes[1].group);
        assert_eq!(notes[1].group, notes[2].group);
        assert!(notes[0].group.is_some());
        assert_eq!(notes[3].group, None);
        assert_eq!(truth_pairs(&notes).len(), 3);
    }
}
