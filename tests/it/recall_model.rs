//! Recall with the real embedding model (multilingual-e5-small, int8, from
//! `scripts/install-model.sh`): our compact tokenizer gives exactly the ids of the reference
//! implementation (the Python `tokenizers` package reading the same `tokenizer.json`) on the
//! evaluation sets in English, Spanish and Chinese and on awkward input, and the model loaded
//! through ONNX Runtime ranks a matching passage first, across languages.

use memoria_engine::recall::embed;
use memoria_engine::recall::tokenize::Tokenizer;
use memoria_tests::{shared_data, test_base_model_dir, test_model_dir, test_python};

const REFERENCE: &str = r#"
import json, sys
from tokenizers import Tokenizer
tok = Tokenizer.from_file(sys.argv[1])
tok.enable_truncation(512)
texts = json.load(open(sys.argv[2]))
json.dump([e.ids for e in tok.encode_batch(texts, add_special_tokens=True)], open(sys.argv[3], "w"))
"#;

fn sample(path: &std::path::Path, n: usize) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .take(n)
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            let title = v["title"].as_str().unwrap_or("");
            let text = v["text"].as_str().unwrap();
            format!("{title} {text}").trim().to_owned()
        })
        .collect()
}

/// Runs the real CLI on `home` with `first` then `args` (no model from the environment), and
/// returns its standard output; a failure fails the test with its standard error.
fn run_memoria(home: &std::path::Path, first: &[&str], args: &[&str]) -> String {
    let out = std::process::Command::new(memoria_tests::workspace_bin("memoria"))
        .arg("--home")
        .arg(home)
        .args(first)
        .args(args)
        .current_dir(home)
        .env_remove("MEMORIA_MODEL_DIR")
        .env_remove("ORT_DYLIB_PATH")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn tokenizer_matches_the_reference_implementation() {
    let model = test_model_dir();
    let data = shared_data();
    let mut texts = sample(&data.join("scifact/corpus.jsonl"), 300);
    for lang in ["en", "es", "zh"] {
        texts.extend(sample(
            &data.join(format!("xquad-r/corpus-{lang}.jsonl")),
            200,
        ));
        texts.extend(sample(
            &data.join(format!("xquad-r/queries-{lang}.jsonl")),
            200,
        ));
    }
    // Everything with the e5 prefixes, as the embedder sends it.
    let prefixed: Vec<String> = texts
        .iter()
        .flat_map(|t| [format!("passage: {t}"), format!("query: {t}")])
        .collect();
    texts.extend(prefixed);
    texts.extend(
        [
            "  leading and trailing spaces  ",
            "tabs\tand\nnew\r\nlines",
            "ｆｕｌｌｗｉｄｔｈ ＡＢＣ １２３ and ﬁ ligatures, Ⅻ",
            "emoji 🧠🧠 and ☃ snow",
            "control\u{7}char and zero\u{200b}width",
            "a literal ▁ metaspace",
            "unknown 𓀀𓀁 hieroglyphs 𓀂",
            "한국어 문장, العربية, हिन्दी, ελληνικά, русский",
            "café naïve résumé Ångström",
            "x",
            "2026-11-30T10:00:00Z vt:user/abc123 https://example.com/a?b=c",
        ]
        .map(String::from),
    );
    texts.push("word ".repeat(700));

    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("texts.json");
    let output = dir.path().join("ids.json");
    std::fs::write(&input, serde_json::to_string(&texts).unwrap()).unwrap();
    let status = std::process::Command::new(test_python())
        .arg("-c")
        .arg(REFERENCE)
        .arg(model.join("tokenizer.json"))
        .arg(&input)
        .arg(&output)
        .status()
        .unwrap();
    assert!(status.success(), "the reference tokenizer failed");
    let expected: Vec<Vec<i64>> =
        serde_json::from_str(&std::fs::read_to_string(&output).unwrap()).unwrap();
    assert_eq!(expected.len(), texts.len());

    let ours = Tokenizer::load(&model, 512).unwrap();
    let mut mismatches = Vec::new();
    for (text, want) in texts.iter().zip(&expected) {
        let got = ours.encode(text);
        if &got != want {
            mismatches.push(format!("{text:?}\n  ours {got:?}\n  want {want:?}"));
        }
    }
    assert!(
        mismatches.is_empty(),
        "{} of {} texts tokenized differently, first: {}",
        mismatches.len(),
        texts.len(),
        mismatches[0]
    );
}

#[test]
fn real_model_ranks_the_matching_passage_first_across_languages() {
    let model = test_model_dir();
    let (mut e, choice) = embed::load(Some(&model), 1);
    assert_eq!(choice.kind, "onnx", "{:?}", choice.fallback_reason);
    let passages: Vec<String> = [
        "The deploy pipeline runs on GitHub Actions and publishes to the staging bucket.",
        "Mi abuela prepara la paella con arroz bomba y azafrán cada domingo.",
        "量子计算机使用量子比特进行计算。",
        "Pricing cards use subtle fills instead of borders.",
    ]
    .map(String::from)
    .to_vec();
    let vectors = e.embed_passages(&passages).unwrap();
    assert!(vectors.iter().all(|v| v.len() == embed::DIM));
    for (query, want) in [
        ("how do we deploy to staging?", 0),
        ("what rice is used for paella", 1),
        ("¿Qué usan los ordenadores cuánticos?", 2),
        ("estilo de las tarjetas de precios", 3),
    ] {
        let q = e.embed_query(query).unwrap();
        let dot = |v: &Vec<f32>| v.iter().zip(&q).map(|(a, b)| a * b).sum::<f32>();
        let best = (0..passages.len())
            .max_by(|&a, &b| dot(&vectors[a]).total_cmp(&dot(&vectors[b])))
            .unwrap();
        assert_eq!(best, want, "{query:?} matched {:?}", passages[best]);
    }
    // A passage's vector does not depend on what it was embedded with.
    let alone = e.embed_passages(&passages[2..3]).unwrap();
    let cos: f32 = alone[0].iter().zip(&vectors[2]).map(|(a, b)| a * b).sum();
    assert!(cos > 0.99999, "{cos}");
    // Bulk sessions embed side by side and give the very same vectors, in order.
    e.set_sessions(2).unwrap();
    assert_eq!(e.sessions(), 2);
    let many: Vec<String> = passages.iter().cycle().take(9).cloned().collect();
    let side_by_side = e.embed_passages(&many).unwrap();
    for (i, v) in side_by_side.iter().enumerate() {
        assert_eq!(v, &vectors[i % passages.len()], "passage {i}");
    }
    e.set_sessions(1).unwrap();
    assert_eq!(e.sessions(), 1);
}

/// `--model-dir` reaches every command that opens the engine, and `memoria doctor` says which
/// embedder recall uses (the model, or the hash fallback and why).
#[test]
fn model_dir_flag_loads_the_model_and_doctor_reports_the_embedder() {
    let model = test_model_dir();
    let home = tempfile::tempdir().unwrap();
    let memoria = |args: &[&str]| run_memoria(home.path(), &[], args);
    memoria(&[
        "add",
        "--type",
        "user",
        "--summary",
        "Prefers paella with arroz bomba",
    ]);
    let model_arg = model.to_str().unwrap();
    let with: serde_json::Value =
        serde_json::from_str(&memoria(&["--model-dir", model_arg, "--json", "doctor"])).unwrap();
    assert_eq!(with["recall"]["embedder"], "onnx", "{with}");
    let hits: serde_json::Value = serde_json::from_str(&memoria(&[
        "--model-dir",
        model_arg,
        "--json",
        "search",
        "¿qué arroz le gusta para la paella?",
    ]))
    .unwrap();
    assert!(hits.to_string().contains("arroz bomba"), "{hits}");
    let without: serde_json::Value = serde_json::from_str(&memoria(&["--json", "doctor"])).unwrap();
    assert_eq!(without["recall"]["embedder"], "hash", "{without}");
    assert!(
        without["recall"]["fallbackReason"]
            .as_str()
            .unwrap()
            .contains("model.onnx"),
        "{without}"
    );
    assert!(memoria(&["doctor"]).contains("recall:   hash embedder"));
}

/// The int8 model `scripts/install-model.sh` builds stays close to the f32 model it was made
/// from: the smoothing in `scripts/quantize-model.py` keeps a passage's vector within a cosine of
/// ~0.999 of the f32 one. The unsmoothed int8 model fails here (mean 0.9963 on these texts).
#[test]
fn int8_model_stays_close_to_the_f32_model_it_was_built_from() {
    let base = test_base_model_dir();
    let (mut int8, choice) = embed::load(Some(&test_model_dir()), 1);
    assert_eq!(choice.kind, "onnx", "{:?}", choice.fallback_reason);
    let (mut f32, choice) = embed::load(Some(&base), 1);
    assert_eq!(choice.kind, "onnx", "{:?}", choice.fallback_reason);
    let data = shared_data();
    let mut texts = sample(&data.join("scifact/corpus.jsonl"), 12);
    texts.extend(sample(&data.join("xquad-r/corpus-es.jsonl"), 12));
    texts.extend(sample(&data.join("xquad-r/corpus-zh.jsonl"), 12));
    let (a, b) = (
        int8.embed_passages(&texts).unwrap(),
        f32.embed_passages(&texts).unwrap(),
    );
    let cos: Vec<f32> = a
        .iter()
        .zip(&b)
        .map(|(x, y)| x.iter().zip(y).map(|(p, q)| p * q).sum())
        .collect();
    let mean = cos.iter().sum::<f32>() / cos.len() as f32;
    let min = cos.iter().copied().fold(f32::INFINITY, f32::min);
    assert!(
        mean > 0.998 && min > 0.995,
        "int8 vs f32 cosine: mean {mean:.5}, min {min:.5}"
    );
}

/// The installed model keeps its weights in `model.data` beside `model.onnx` (ONNX Runtime maps
/// them instead of copying them into each session): the pair is one model, so its id covers both
/// files, and a directory that lost `model.data` falls back to the hash embedder with a reason
/// that names the missing file, never a crash.
#[test]
fn weights_beside_the_graph_are_part_of_the_model() {
    let model = test_model_dir();
    assert!(
        model.join("model.data").exists(),
        "scripts/install-model.sh stores the weights in model.data"
    );
    let (_, installed) = embed::load(Some(&model), 1);
    assert_eq!(installed.kind, "onnx", "{:?}", installed.fallback_reason);

    let copy = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(&model).unwrap() {
        let entry = entry.unwrap();
        if entry.file_name() != "model.data" {
            std::os::unix::fs::symlink(entry.path(), copy.path().join(entry.file_name())).unwrap();
        }
    }
    let (_, without) = embed::load(Some(copy.path()), 1);
    assert_eq!(without.kind, "hash");
    let reason = without.fallback_reason.unwrap();
    assert!(reason.contains("model.data"), "{reason}");

    // Other weights under the same graph are another model: vectors are not mixed up.
    let data = std::fs::read(model.join("model.data")).unwrap();
    let mut other = data.clone();
    let last = other.len() - 1;
    other[last] ^= 1;
    std::fs::write(copy.path().join("model.data"), &other).unwrap();
    let (_, changed) = embed::load(Some(copy.path()), 1);
    assert_eq!(changed.kind, "onnx", "{:?}", changed.fallback_reason);
    assert_ne!(changed.model_id, installed.model_id);
}

/// A relevance means the same for every question: a nonsense query's best hit is unlikely, and
/// a Spanish question over English notes keeps its answer in the recall block, as a Chinese
/// one over Chinese notes does (a fixed cosine floor dropped cross-lingual answers, and min-max
/// scaling gave the nonsense query's best hit the score of a true match).
#[test]
fn relevance_is_low_for_nonsense_and_keeps_answers_across_languages() {
    let model = test_model_dir();
    let home = tempfile::tempdir().unwrap();
    let model_arg = model.to_str().unwrap().to_owned();
    let memoria = |args: &[&str]| run_memoria(home.path(), &["--model-dir", &model_arg], args);
    let notes = [
        (
            "deploy",
            "The deploy pipeline runs on GitHub Actions and publishes to the staging bucket every night.",
        ),
        (
            "paella",
            "Grandmother cooks paella with bomba rice and saffron every Sunday.",
        ),
        (
            "quantum",
            "Quantum computers compute with qubits, which hold superpositions of zero and one.",
        ),
        (
            "cards",
            "Pricing cards use subtle background fills instead of borders.",
        ),
        (
            "dentist",
            "The dentist appointment is on the third of March at nine in the morning.",
        ),
        ("router", "办公室的路由器在管理页面 192.168.1.1 上重置。"),
        (
            "garden",
            "The vegetable garden gets watered at dawn, before the heat sets in.",
        ),
        ("invoice", "发票在每个月的第一个工作日寄出。"),
    ];
    for (id, text) in notes {
        memoria(&[
            "add",
            "--id",
            id,
            "--type",
            "reference",
            "--scope",
            "user",
            "--summary",
            text,
        ]);
    }
    let search = |q: &str| -> Vec<serde_json::Value> {
        serde_json::from_str::<serde_json::Value>(&memoria(&["--json", "search", q]))
            .unwrap()
            .as_array()
            .unwrap()
            .clone()
    };
    for (question, want) in [
        ("¿Con qué arroz cocina la abuela la paella?", "paella"),
        (
            "¿Qué usan los ordenadores cuánticos para calcular?",
            "quantum",
        ),
        ("¿Cuándo es la cita con el dentista?", "dentist"),
        ("发票什么时候寄出？", "invoice"),
        ("怎么重置办公室的路由器？", "router"),
    ] {
        let hits = search(question);
        assert_eq!(hits[0]["id"], want, "{question}: {hits:?}");
        let r = hits[0]["relevance"].as_f64().unwrap();
        assert!(r >= 0.5, "{question}: relevance {r}");
        let block = memoria(&["recall", question]);
        let relevant = block
            .split("## Relevant to this message")
            .nth(1)
            .unwrap_or_else(|| panic!("{question}: no relevant notes in\n{block}"));
        assert!(
            relevant.contains(&format!("vt:user/{want}")),
            "{question}:\n{block}"
        );
    }
    // Made-up words: none is likely to be answered by any note (their min-max scores were as
    // high as a true match's). The first is the string the problem was reported with; its
    // block lists no note as relevant.
    for (i, nonsense) in ["zzqx vvbn plok", "qwfp arst zxcv", "blorft snee gavu"]
        .into_iter()
        .enumerate()
    {
        let hits = search(nonsense);
        let best = hits
            .iter()
            .filter_map(|h| h["relevance"].as_f64())
            .fold(0.0, f64::max);
        assert!(best < 0.25, "{nonsense}: relevance {best} in {hits:?}");
        if i == 0 {
            assert!(best < 0.1, "{nonsense}: relevance {best} in {hits:?}");
            let block = memoria(&["recall", nonsense]);
            assert!(
                !block.contains("## Relevant to this message"),
                "{nonsense}:\n{block}"
            );
        }
    }
}

/// With the real model, the recall block an agent turn gets shows a captured message as the
/// passage around what was asked (at most 280 characters), and lists no message in its index
/// of durable notes.
#[test]
fn the_recall_block_shows_a_long_message_as_the_passage_around_the_match() {
    let model = test_model_dir();
    let home = tempfile::tempdir().unwrap();
    let memoria = |args: &[&str]| run_memoria(home.path(), &[], args);
    memoria(&[
        "add",
        "--summary",
        "Release checklist",
        "--body",
        "Tag, build, publish.",
    ]);
    let long = format!(
        "{} the rollback is kubectl rollout undo on the quokkablue cluster {}",
        "warming up ".repeat(40),
        "and more afterwards ".repeat(40)
    );
    let line = serde_json::json!({"conversation": "ops", "id": "1", "role": "user",
        "speaker": "Ana", "time": "2026-11-01T10:00:00Z", "text": long});
    let file = home.path().join("ops.jsonl");
    std::fs::write(&file, format!("{line}\n")).unwrap();
    memoria(&["capture", file.to_str().unwrap()]);
    let block = memoria(&[
        "--model-dir",
        model.to_str().unwrap(),
        "recall",
        "how do I roll back the quokkablue cluster?",
    ]);
    assert!(block.contains("kubectl rollout undo"), "{block}");
    assert!(block.contains("## Memory index (1 note)"), "{block}");
    let shown = block
        .lines()
        .find(|l| l.contains("kubectl rollout undo"))
        .unwrap();
    assert!(shown.chars().count() <= 290, "a passage: {shown}");
}
