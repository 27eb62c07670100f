//! `memoria eval beir` end to end on a tiny BEIR set (hash embedder: no model needed).

use std::path::Path;
use std::process::Command;

fn write(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn memoria(home: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_memoria"));
    c.env("MEMORIA_HOME", home)
        .env_remove("MEMORIA_MODEL_DIR")
        .env("HOME", home);
    c
}

fn tiny_set(dir: &Path) -> [std::path::PathBuf; 3] {
    let corpus = write(
        dir,
        "corpus.jsonl",
        concat!(
            "{\"_id\":\"d1\",\"title\":\"Vitamin D and bone density\",\"text\":\"Vitamin D supplements increase bone mineral density in older adults.\"}\n",
            "{\"_id\":\"d2\",\"title\":\"Aspirin and heart attacks\",\"text\":\"Daily aspirin lowers the risk of a first heart attack.\"}\n",
            "{\"_id\":\"d3\",\"title\":\"Sleep and memory\",\"text\":\"Sleep deprivation impairs memory consolidation.\"}\n",
        ),
    );
    let queries = write(
        dir,
        "queries.jsonl",
        concat!(
            "{\"_id\":\"q1\",\"text\":\"does vitamin D improve bone density\"}\n",
            "{\"_id\":\"q2\",\"text\":\"aspirin heart attack risk\"}\n",
            "{\"_id\":\"q3\",\"text\":\"is sleep needed for memory\"}\n",
        ),
    );
    let qrels = write(
        dir,
        "qrels.tsv",
        "query-id\tcorpus-id\tscore\r\nq1\td1\t1\r\nq2\td2\t1\r\nq3\td3\t1\r\n",
    );
    [corpus, queries, qrels]
}

#[test]
fn eval_beir_reports_metrics_and_writes_a_trec_run() {
    let dir = tempfile::tempdir().unwrap();
    let [corpus, queries, qrels] = tiny_set(dir.path());
    let run = dir.path().join("run.trec");
    let out = memoria(dir.path())
        .args(["eval", "beir", "--json", "--mode", "hybrid", "--cache-dir"])
        .arg(dir.path().join("cache"))
        .arg("--corpus")
        .arg(&corpus)
        .arg("--queries")
        .arg(&queries)
        .arg("--qrels")
        .arg(&qrels)
        .arg("--run-out")
        .arg(&run)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["queries"], 3);
    assert_eq!(v["embedder"], "hash");
    assert!(v["ndcg@10"].as_f64().unwrap() > 0.9, "{v}");
    let run = std::fs::read_to_string(run).unwrap();
    let first = run.lines().next().unwrap();
    assert!(first.starts_with("q1 Q0 d1 1 "), "{first}");
    assert!(first.ends_with(" memoria"));

    // The quality gate fails below its floor.
    let out = memoria(dir.path())
        .args([
            "eval",
            "beir",
            "--mode",
            "bm25",
            "--min-ndcg",
            "1.01",
            "--corpus",
        ])
        .arg(&corpus)
        .arg("--queries")
        .arg(&queries)
        .arg("--qrels")
        .arg(&qrels)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("quality gate failed"));

    // A gate that requires the model refuses to run on the hash fallback.
    let out = memoria(dir.path())
        .args(["eval", "beir", "--require-model", "--model-dir"])
        .arg(dir.path().join("no-model"))
        .arg("--corpus")
        .arg(&corpus)
        .arg("--queries")
        .arg(&queries)
        .arg("--qrels")
        .arg(&qrels)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("did not load"));
}

#[test]
fn a_corpus_line_that_is_not_json_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let [_, queries, qrels] = tiny_set(dir.path());
    let corpus = write(
        dir.path(),
        "bad.jsonl",
        "{\"_id\":\"d1\",\"text\":\"ok\"}\n\u{0}\u{1}garbage\n",
    );
    let out = memoria(dir.path())
        .args(["eval", "beir", "--corpus"])
        .arg(&corpus)
        .arg("--queries")
        .arg(&queries)
        .arg("--qrels")
        .arg(&qrels)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bad.jsonl:2") && err.contains("not a JSON"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
}
