//! BEIR-format evaluation: reading corpus, queries and qrels, and the metrics
//! (nDCG@10, Recall@100, MRR@10) computed like `pytrec_eval` does for BEIR.

use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader};
use std::path::Path;

use crate::recall::Error;

#[derive(Debug, Clone, PartialEq)]
pub struct CorpusDoc {
    pub id: String,
    pub title: String,
    pub text: String,
}

/// Query id → (doc id → graded relevance).
pub type Qrels = HashMap<String, HashMap<String, i64>>;

fn lines(path: &Path) -> Result<impl Iterator<Item = (usize, std::io::Result<String>)>, Error> {
    let f = std::fs::File::open(path)
        .map_err(|e| Error::Input(format!("cannot open {}: {e}", path.display())))?;
    Ok(BufReader::new(f).lines().enumerate())
}

/// The non-blank lines of a JSON-lines file, parsed, with their 0-based line numbers.
fn json_lines(path: &Path) -> Result<Vec<(usize, serde_json::Value)>, Error> {
    let mut out = Vec::new();
    for (n, line) in lines(path)? {
        let line = line.map_err(|e| Error::Input(format!("{}: {e}", path.display())))?;
        if line.trim().is_empty() {
            continue;
        }
        let v = serde_json::from_str(&line).map_err(|e| {
            Error::Input(format!(
                "{}:{}: not a JSON object line ({e})",
                path.display(),
                n + 1
            ))
        })?;
        out.push((n, v));
    }
    Ok(out)
}

fn str_field(v: &serde_json::Value, k: &str) -> String {
    match v.get(k) {
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(serde_json::Value::Number(n)) => n.to_string(),
        _ => String::new(),
    }
}

/// Reads `corpus.jsonl` lines `{"_id","title","text"}`.
pub fn read_corpus(path: &Path) -> Result<Vec<CorpusDoc>, Error> {
    let mut out = Vec::new();
    for (n, v) in json_lines(path)? {
        let id = str_field(&v, "_id");
        if id.is_empty() {
            return Err(Error::Input(format!(
                "{}:{}: no \"_id\"",
                path.display(),
                n + 1
            )));
        }
        out.push(CorpusDoc {
            id,
            title: str_field(&v, "title"),
            text: str_field(&v, "text"),
        });
    }
    Ok(out)
}

/// Reads `queries.jsonl` lines `{"_id","text"}` as (id, text).
pub fn read_queries(path: &Path) -> Result<Vec<(String, String)>, Error> {
    Ok(json_lines(path)?
        .into_iter()
        .map(|(_, v)| (str_field(&v, "_id"), str_field(&v, "text")))
        .collect())
}

/// Reads a qrels TSV (`query-id corpus-id score`, header optional, CRLF tolerated).
pub fn read_qrels(path: &Path) -> Result<Qrels, Error> {
    let mut out: Qrels = HashMap::new();
    for (n, line) in lines(path)? {
        let line = line.map_err(|e| Error::Input(format!("{}: {e}", path.display())))?;
        let cols: Vec<&str> = line.trim_end_matches('\r').split('\t').collect();
        if cols.len() < 3 || cols.iter().all(|c| c.trim().is_empty()) {
            continue;
        }
        let Ok(score) = cols[2].trim().parse::<i64>() else {
            if n == 0 {
                continue; // header row
            }
            return Err(Error::Input(format!(
                "{}:{}: relevance {:?} is not an integer",
                path.display(),
                n + 1,
                cols[2]
            )));
        };
        out.entry(cols[0].trim().to_owned())
            .or_default()
            .insert(cols[1].trim().to_owned(), score);
    }
    Ok(out)
}

/// Per-query metrics.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize)]
pub struct Metrics {
    pub ndcg10: f64,
    pub recall100: f64,
    pub mrr10: f64,
}

/// nDCG@10 (gain = relevance, log2 discount), Recall@100 and MRR@10 of one ranked list.
pub fn metrics(ranked: &[String], rel: &HashMap<String, i64>) -> Metrics {
    let gain = |d: &String| rel.get(d).copied().unwrap_or(0).max(0) as f64;
    let dcg: f64 = ranked
        .iter()
        .take(10)
        .enumerate()
        .map(|(i, d)| gain(d) / ((i + 2) as f64).log2())
        .sum();
    let mut ideal: Vec<f64> = rel.values().map(|r| (*r).max(0) as f64).collect();
    ideal.sort_by(|a, b| b.total_cmp(a));
    let idcg: f64 = ideal
        .iter()
        .take(10)
        .enumerate()
        .map(|(i, g)| g / ((i + 2) as f64).log2())
        .sum();
    let relevant: HashSet<&String> = rel
        .iter()
        .filter(|(_, r)| **r > 0)
        .map(|(d, _)| d)
        .collect();
    let found = ranked
        .iter()
        .take(100)
        .filter(|d| relevant.contains(d))
        .count();
    let mrr = ranked
        .iter()
        .take(10)
        .position(|d| relevant.contains(d))
        .map_or(0.0, |p| 1.0 / (p + 1) as f64);
    Metrics {
        ndcg10: if idcg > 0.0 { dcg / idcg } else { 0.0 },
        recall100: if relevant.is_empty() {
            0.0
        } else {
            found as f64 / relevant.len() as f64
        },
        mrr10: mrr,
    }
}

/// The mean of per-query metrics.
pub fn mean(all: &[Metrics]) -> Metrics {
    let n = all.len().max(1) as f64;
    Metrics {
        ndcg10: all.iter().map(|m| m.ndcg10).sum::<f64>() / n,
        recall100: all.iter().map(|m| m.recall100).sum::<f64>() / n,
        mrr10: all.iter().map(|m| m.mrr10).sum::<f64>() / n,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rel(pairs: &[(&str, i64)]) -> HashMap<String, i64> {
        pairs.iter().map(|(d, r)| (d.to_string(), *r)).collect()
    }
    fn list(ids: &[&str]) -> Vec<String> {
        ids.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn metrics_match_hand_computation() {
        let m = metrics(&list(&["x", "a", "y", "b"]), &rel(&[("a", 1), ("b", 1)]));
        let dcg = 1.0 / 3f64.log2() + 1.0 / 5f64.log2();
        let idcg = 1.0 + 1.0 / 3f64.log2();
        assert!((m.ndcg10 - dcg / idcg).abs() < 1e-12);
        assert_eq!(m.recall100, 1.0);
        assert_eq!(m.mrr10, 0.5);
        let perfect = metrics(&list(&["a", "b"]), &rel(&[("a", 1), ("b", 1)]));
        assert!((perfect.ndcg10 - 1.0).abs() < 1e-12);
        let none = metrics(&list(&["x"]), &rel(&[("a", 1)]));
        assert_eq!((none.ndcg10, none.recall100, none.mrr10), (0.0, 0.0, 0.0));
    }

    #[test]
    fn bad_corpus_line_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("c.jsonl");
        std::fs::write(
            &p,
            "{\"_id\":\"1\",\"title\":\"t\",\"text\":\"x\"}\nnot json\n",
        )
        .unwrap();
        let e = read_corpus(&p).unwrap_err().to_string();
        assert!(e.contains("c.jsonl:2"), "{e}");
        let q = dir.path().join("q.tsv");
        std::fs::write(&q, "query-id\tcorpus-id\tscore\r\n1\t2\t1\r\n").unwrap();
        assert_eq!(read_qrels(&q).unwrap()["1"]["2"], 1);
        assert!(read_corpus(&dir.path().join("missing")).is_err());
    }
}
