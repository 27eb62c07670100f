//! Checks on the engine's recall text processing: the embedding model's tokenizer and the
//! BM25 analyzer (word stems and CJK n-grams).

use std::sync::OnceLock;

use memoria_engine::recall::analyzer::{
    Detected, analyze_doc, analyze_query_groups, analyze_query_words, detect,
};
use memoria_engine::recall::tokenize::Tokenizer;

/// A small Unigram vocabulary in `tokenizer.json` form: the three control pieces, the word
/// marker, Latin and CJK pieces that overlap (so Viterbi has choices) and characters it lacks.
const VOCAB: &str = r#"{"model":{"type":"Unigram","unk_id":0,"vocab":[
 ["<unk>",0.0],["<s>",0.0],["</s>",0.0],["\u2581",-2.0],["\u2581a",-3.0],["a",-4.0],
 ["b",-4.5],["ab",-3.5],["abc",-3.2],["\u2581the",-1.5],["the",-2.5],["e",-5.0],["\u00e9",-6.0],
 ["\u65e5",-5.0],["\u672c",-5.0],["\u65e5\u672c",-4.0],["\u65e5\u672c\u8a9e",-3.9],
 ["1",-6.0],["12",-5.5],["\u2581\u2581",-7.0],["<s",-8.0],[">",-8.0]]}}"#;

/// Vocabulary ids of `<unk>`, `<s>` and `</s>` in [`VOCAB`], and its size.
const UNK: i64 = 0;
const BOS: i64 = 1;
const EOS: i64 = 2;
const VOCAB_LEN: i64 = 22;

/// Length limits the fuzzed texts are encoded under: the smallest possible, a short one, and
/// the model's.
const MAX_LENS: [usize; 3] = [2, 7, 512];

fn tokenizers() -> &'static [Tokenizer] {
    static T: OnceLock<Vec<Tokenizer>> = OnceLock::new();
    T.get_or_init(|| {
        MAX_LENS
            .iter()
            .map(|&n| Tokenizer::from_json(VOCAB.as_bytes(), n).expect("the fuzz vocabulary"))
            .collect()
    })
}

/// Input that starts with `{` is read as a `tokenizer.json` (refused or built, never a panic)
/// and, when built, encodes a fixed text; any other input is text, encoded under each length
/// limit: `<s>` first, `</s>` last, within the limit, only vocabulary ids, no two `<unk>` in a
/// row, the same ids every time, and a shorter limit gives a prefix of a longer one's ids.
pub fn tokenize(data: &[u8]) {
    if data.first() == Some(&b'{') {
        if let Ok(t) = Tokenizer::from_json(data, 16) {
            let ids = t.encode("the abc 日本語 é");
            assert!(ids.len() <= 16);
        }
        return;
    }
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut longest: Vec<i64> = Vec::new();
    for (t, &max_len) in tokenizers().iter().zip(&MAX_LENS).rev() {
        let ids = t.encode(text);
        assert!((2..=max_len).contains(&ids.len()), "{} ids", ids.len());
        assert_eq!(ids.first(), Some(&BOS));
        assert_eq!(ids.last(), Some(&EOS));
        assert!(ids.iter().all(|id| (0..VOCAB_LEN).contains(id)), "{ids:?}");
        assert!(
            !ids.windows(2).any(|w| w == [UNK, UNK]),
            "two <unk> in a row: {ids:?}"
        );
        assert_eq!(t.encode(text), ids, "encoding is not deterministic");
        let inner = &ids[..ids.len() - 1];
        if longest.is_empty() {
            longest = inner.to_vec();
        } else {
            assert!(
                longest.starts_with(inner),
                "{inner:?} is not a prefix of {longest:?}"
            );
        }
    }
}

/// Any text analyses without panicking, into non-empty terms; a query's word groups are
/// non-empty, free of repeats, and the first of its BM25 groups; analysis is deterministic.
pub fn analyzer(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let detected = detect(text);
    assert_eq!(detect(text), detected);
    for lang in [detected, Detected::Unclear] {
        let terms = analyze_doc(text, lang);
        assert!(
            terms.iter().all(|t| !t.is_empty()),
            "empty term in {terms:?}"
        );
        assert_eq!(analyze_doc(text, lang), terms);
    }
    let words = analyze_query_words(text);
    for (i, g) in words.iter().enumerate() {
        assert!(!g.is_empty(), "empty group in {words:?}");
        assert!(g.iter().all(|t| !t.is_empty()), "empty term in {words:?}");
        assert!(!words[..i].contains(g), "repeated group in {words:?}");
    }
    let groups = analyze_query_groups(text);
    assert!(
        groups.starts_with(&words),
        "{groups:?} does not start with {words:?}"
    );
    assert!(
        groups.iter().all(|g| !g.is_empty()),
        "empty group in {groups:?}"
    );
}
