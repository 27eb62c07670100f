//! The SentencePiece-Unigram tokenizer of XLM-RoBERTa models (multilingual-e5), read from a
//! Hugging Face `tokenizer.json` and kept compact.
//!
//! Why our own: the `tokenizers` crate keeps a Unigram vocabulary as a trie with a hash map per
//! node; for e5's quarter of a million pieces that takes more memory than the model. Here
//! every piece lives in one sorted byte buffer and a prefix search is a narrowing binary
//! search, so loading is quick and small (docs/BENCHMARKS.md has the figures).
//!
//! The pipeline is the one `tokenizer.json` declares for these models, and produces the same ids
//! as `tokenizers` (tests/it/recall_model.rs checks it against the Python `tokenizers` package on
//! the evaluation sets): NFKC, control characters removed, Unicode spaces to " ", runs of spaces
//! collapsed; Metaspace pre-tokenization ("▁" for spaces, prepended, split before each "▁");
//! Viterbi over piece scores per word, unknown characters scored `min - 10` and consecutive
//! unknowns fused into one `<unk>`; `<s> … </s>` around at most `max_len` ids. One deliberate
//! difference: special-token text typed inside a note (a literal "<s>") is tokenized as text, not
//! turned into the control token.

use std::path::Path;

use serde::Deserialize;
use unicode_normalization::UnicodeNormalization;

use super::Error;

const UNK_PENALTY: f64 = 10.0;
const META: char = '\u{2581}';

/// Where [`Tokenizer::load`] keeps the tokenizer's compact form, beside `tokenizer.json`.
pub const COMPACT_FILE: &str = ".memoria-tokenizer";
/// First bytes of [`COMPACT_FILE`]; a new layout gets a new number.
const COMPACT_MAGIC: &[u8] = b"memoria-tokenizer 1\n";

/// Reads [`COMPACT_FILE`]'s pieces front to back.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, tail) = self.0.split_at_checked(n)?;
        self.0 = tail;
        Some(head)
    }
    fn u32s(&mut self, n: usize) -> Option<Vec<u32>> {
        let b = self.take(n.checked_mul(4)?)?;
        Some(
            b.chunks_exact(4)
                .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect(),
        )
    }
}

/// An encoded text: ids with `<s>`/`</s>` around them.
pub type Ids = Vec<i64>;

/// A Unigram tokenizer (XLM-R / e5 family).
#[derive(Debug, PartialEq)]
pub struct Tokenizer {
    /// All pieces, concatenated in byte order of the pieces.
    bytes: Vec<u8>,
    /// `starts[i]..starts[i + 1]` is the i-th piece in sorted order.
    starts: Vec<u32>,
    /// Vocabulary id of the i-th sorted piece.
    ids: Vec<u32>,
    /// Score by vocabulary id.
    scores: Vec<f32>,
    min_score: f64,
    unk: u32,
    bos: u32,
    eos: u32,
    /// Maximum ids per text, `<s>` and `</s>` included.
    max_len: usize,
}

#[derive(Deserialize)]
struct File<'a> {
    #[serde(borrow)]
    model: Model<'a>,
    #[serde(default)]
    added_tokens: Vec<Added>,
}

#[derive(Deserialize)]
struct Model<'a> {
    #[serde(rename = "type")]
    kind: String,
    /// Borrowed from the file's bytes where the JSON has no escapes (250k allocations saved).
    #[serde(borrow)]
    vocab: Vec<(Piece<'a>, f64)>,
    unk_id: Option<usize>,
}

/// A vocabulary piece, borrowed from the JSON text unless it had to be unescaped.
#[derive(Deserialize, PartialEq)]
struct Piece<'a>(#[serde(borrow)] std::borrow::Cow<'a, str>);

impl std::ops::Deref for Piece<'_> {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

#[derive(Deserialize)]
struct Added {
    id: u32,
    content: String,
}

impl Tokenizer {
    /// Reads `dir/tokenizer.json`, or the compact form built from it last time
    /// ([`COMPACT_FILE`], beside it, see [`super::beside`]): parsing and sorting 250k pieces was
    /// half the start-up of a one-shot command with the model.
    pub fn load(dir: &Path, max_len: usize) -> Result<Tokenizer, Error> {
        let path = dir.join("tokenizer.json");
        let cannot =
            |e: std::io::Error| Error::Model(format!("cannot read {}: {e}", path.display()));
        super::beside::remembered(
            &dir.join(COMPACT_FILE),
            &[&path],
            cannot,
            |kept, stamp| Self::from_compact(kept, stamp, max_len),
            || {
                let text = std::fs::read(&path).map_err(cannot)?;
                Self::from_json(&text, max_len)
                    .map_err(|e| Error::Model(format!("{}: {e}", path.display())))
            },
            |t, stamp| t.to_compact(stamp),
        )
    }

    /// The tokenizer as [`COMPACT_FILE`] holds it: a header, the JSON's stamp, then the tables
    /// as little-endian numbers.
    fn to_compact(&self, stamp: &str) -> Vec<u8> {
        let mut out =
            Vec::with_capacity(COMPACT_MAGIC.len() + self.bytes.len() + 12 * self.ids.len());
        out.extend_from_slice(COMPACT_MAGIC);
        for n in [
            stamp.len(),
            self.bytes.len(),
            self.ids.len(),
            self.scores.len(),
        ] {
            out.extend_from_slice(&(n as u32).to_le_bytes());
        }
        out.extend_from_slice(stamp.as_bytes());
        out.extend_from_slice(&self.min_score.to_le_bytes());
        for n in [self.unk, self.bos, self.eos] {
            out.extend_from_slice(&n.to_le_bytes());
        }
        out.extend_from_slice(&self.bytes);
        for n in self.starts.iter().chain(&self.ids) {
            out.extend_from_slice(&n.to_le_bytes());
        }
        for s in &self.scores {
            out.extend_from_slice(&s.to_bits().to_le_bytes());
        }
        out
    }

    /// Reads [`Self::to_compact`]'s bytes; `None` unless they are whole, consistent and were
    /// built from a JSON with this `stamp`.
    fn from_compact(b: &[u8], stamp: &str, max_len: usize) -> Option<Tokenizer> {
        let mut r = Reader(b.strip_prefix(COMPACT_MAGIC)?);
        let sizes = r.u32s(4)?;
        let [stamp_len, bytes_len, pieces, vocab] = [0, 1, 2, 3].map(|i| sizes[i] as usize);
        if r.take(stamp_len)? != stamp.as_bytes() {
            return None;
        }
        let min_score = f64::from_le_bytes(r.take(8)?.try_into().ok()?);
        let special = r.u32s(3)?;
        let bytes = r.take(bytes_len)?.to_vec();
        let starts = r.u32s(pieces.checked_add(1)?)?;
        let ids = r.u32s(pieces)?;
        let scores: Vec<f32> = r.u32s(vocab)?.into_iter().map(f32::from_bits).collect();
        let consistent = r.0.is_empty()
            && starts.first() == Some(&0)
            && starts.last().map(|&l| l as usize) == Some(bytes_len)
            && starts.windows(2).all(|w| w[0] <= w[1])
            && ids.iter().chain(&special).all(|&i| (i as usize) < vocab);
        consistent.then(|| Tokenizer {
            bytes,
            starts,
            ids,
            scores,
            min_score,
            unk: special[0],
            bos: special[1],
            eos: special[2],
            max_len: max_len.max(2),
        })
    }

    /// Builds the tokenizer from the bytes of a `tokenizer.json`.
    pub fn from_json(json: &[u8], max_len: usize) -> Result<Tokenizer, String> {
        let file: File<'_> =
            serde_json::from_slice(json).map_err(|e| format!("not a tokenizer: {e}"))?;
        if file.model.kind != "Unigram" {
            return Err(format!(
                "tokenizer model {:?} is not supported (Unigram models such as multilingual-e5 are)",
                file.model.kind
            ));
        }
        let vocab = file.model.vocab;
        if vocab.is_empty() || vocab.len() > u32::MAX as usize {
            return Err("the vocabulary is empty".into());
        }
        let special = |name: &str| {
            file.added_tokens
                .iter()
                .find(|a| a.content == name)
                .map(|a| a.id)
                .or_else(|| {
                    vocab
                        .iter()
                        .position(|(p, _)| &**p == name)
                        .map(|i| i as u32)
                })
                .ok_or_else(|| format!("no {name} token"))
        };
        let unk = match file.model.unk_id {
            Some(u) if u < vocab.len() => u as u32,
            Some(u) => return Err(format!("unk_id {u} is outside the vocabulary")),
            None => special("<unk>")?,
        };
        let (bos, eos) = (special("<s>")?, special("</s>")?);
        let min_score = vocab.iter().map(|(_, s)| *s).fold(f64::INFINITY, f64::min);
        let scores = vocab.iter().map(|(_, s)| *s as f32).collect();
        // Sorted by bytes; equal pieces keep the last id (as a map filled in vocabulary order).
        // Each piece's first eight bytes as a big-endian number decide most comparisons
        // without reading the piece (with a quarter of a million pieces the sort dominated a
        // one-shot search otherwise).
        let mut keyed: Vec<(u64, &[u8], u32)> = vocab
            .iter()
            .enumerate()
            .map(|(i, (p, _))| {
                let mut head = [0u8; 8];
                let n = p.len().min(8);
                head[..n].copy_from_slice(&p.as_bytes()[..n]);
                (u64::from_be_bytes(head), p.as_bytes(), i as u32)
            })
            .collect();
        keyed.sort_unstable_by(|a, b| {
            a.0.cmp(&b.0)
                .then_with(|| a.1.cmp(b.1))
                .then_with(|| b.2.cmp(&a.2))
        });
        let mut order: Vec<u32> = keyed.into_iter().map(|(_, _, i)| i).collect();
        order.dedup_by(|later, earlier| vocab[*later as usize].0 == vocab[*earlier as usize].0);
        let total: usize = order.iter().map(|&i| vocab[i as usize].0.len()).sum();
        let mut bytes = Vec::with_capacity(total);
        let mut starts = Vec::with_capacity(order.len() + 1);
        for &i in &order {
            starts.push(bytes.len() as u32);
            bytes.extend_from_slice(vocab[i as usize].0.as_bytes());
        }
        starts.push(bytes.len() as u32);
        Ok(Tokenizer {
            bytes,
            starts,
            ids: order,
            scores,
            min_score,
            unk,
            bos,
            eos,
            max_len: max_len.max(2),
        })
    }

    fn piece(&self, i: usize) -> &[u8] {
        &self.bytes[self.starts[i] as usize..self.starts[i + 1] as usize]
    }

    /// Calls `found(len, id)` for every piece that is a prefix of `s`, shortest first.
    fn prefixes(&self, s: &[u8], mut found: impl FnMut(usize, u32)) {
        let (mut lo, mut hi) = (0usize, self.ids.len());
        for (d, &b) in s.iter().enumerate() {
            // Every piece in lo..hi starts with s[..d]; the one equal to it (if any) sorts first.
            let first = partition(lo, hi, |i| {
                let p = self.piece(i);
                p.len() <= d || p[d] < b
            });
            let end = partition(first, hi, |i| self.piece(i)[d] <= b);
            if first == end {
                return;
            }
            (lo, hi) = (first, end);
            if self.piece(lo).len() == d + 1 {
                found(d + 1, self.ids[lo]);
            }
        }
    }

    /// Token ids of `text`, `<s>` and `</s>` included, cut to the maximum length.
    pub fn encode(&self, text: &str) -> Ids {
        let normalized = normalize(text);
        let mut out: Ids = vec![i64::from(self.bos)];
        let budget = self.max_len - 1;
        for word in words(&normalized) {
            self.viterbi(&word, &mut out);
            if out.len() >= budget {
                out.truncate(budget);
                break;
            }
        }
        out.push(i64::from(self.eos));
        out
    }

    fn viterbi(&self, word: &str, out: &mut Ids) {
        #[derive(Clone, Copy)]
        struct Best {
            score: f64,
            start: usize,
            id: u32,
            set: bool,
        }
        let s = word.as_bytes();
        let unk_score = self.min_score - UNK_PENALTY;
        let mut best = vec![
            Best {
                score: 0.0,
                start: 0,
                id: 0,
                set: false,
            };
            s.len() + 1
        ];
        for (start, ch) in word.char_indices() {
            let here = best[start].score;
            let char_len = ch.len_utf8();
            let mut single = false;
            self.prefixes(&s[start..], |len, id| {
                let cand = here + f64::from(self.scores[id as usize]);
                let node = &mut best[start + len];
                if !node.set || cand > node.score {
                    *node = Best {
                        score: cand,
                        start,
                        id,
                        set: true,
                    };
                }
                single |= len == char_len;
            });
            if !single {
                let cand = here + unk_score;
                let node = &mut best[start + char_len];
                if !node.set || cand > node.score {
                    *node = Best {
                        score: cand,
                        start,
                        id: self.unk,
                        set: true,
                    };
                }
            }
        }
        let mut path = Vec::new();
        let mut end = s.len();
        while end > 0 {
            let node = best[end];
            // Consecutive unknown characters become one `<unk>`.
            if !(node.id == self.unk && path.last() == Some(&self.unk)) {
                path.push(node.id);
            }
            end = node.start;
        }
        out.extend(path.iter().rev().map(|&id| i64::from(id)));
    }
}

/// First index in `lo..hi` where `before` turns false (`before` is true then false).
fn partition(mut lo: usize, mut hi: usize, before: impl Fn(usize) -> bool) -> usize {
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if before(mid) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

/// The XLM-R normalizer: NFKC, control characters dropped, Unicode spaces to " ", runs of
/// spaces to one.
fn normalize(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.nfkc() {
        let c = match c {
            '\u{1}'..='\u{8}' | '\u{b}' | '\u{e}'..='\u{1f}' | '\u{7f}' | '\u{8f}' | '\u{9f}' => {
                continue;
            }
            '\t'
            | '\n'
            | '\u{c}'
            | '\r'
            | '\u{1680}'
            | '\u{200b}'..='\u{200f}'
            | '\u{2028}'
            | '\u{2029}'
            | META
            | '\u{feff}'
            | '\u{fffd}' => ' ',
            c => c,
        };
        if c == ' ' && out.ends_with(' ') {
            continue;
        }
        out.push(c);
    }
    out
}

/// Metaspace pre-tokenization: spaces become "▁", one is prepended, and the text splits before
/// every "▁".
fn words(normalized: &str) -> Vec<String> {
    let mut text = normalized.replace(' ', "\u{2581}");
    if !text.starts_with(META) {
        text.insert(0, META);
    }
    let mut out = Vec::new();
    let mut current = String::new();
    for c in text.chars() {
        if c == META && !current.is_empty() {
            out.push(std::mem::take(&mut current));
        }
        current.push(c);
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toy() -> Tokenizer {
        let vocab = serde_json::json!({
            "added_tokens": [
                {"id": 0, "content": "<s>"}, {"id": 1, "content": "<pad>"},
                {"id": 2, "content": "</s>"}, {"id": 3, "content": "<unk>"}
            ],
            "model": {"type": "Unigram", "unk_id": 3, "vocab": [
                ["<s>", 0.0], ["<pad>", 0.0], ["</s>", 0.0], ["<unk>", 0.0],
                ["\u{2581}", -2.0], ["\u{2581}he", -3.0], ["llo", -3.0], ["\u{2581}hello", -4.0],
                ["h", -5.0], ["e", -5.0], ["l", -5.0], ["o", -5.0], ["\u{2581}w", -3.0],
                ["orld", -3.0], ["\u{2581}world", -7.0], ["\u{2581}hello", -1.0]
            ]}
        });
        Tokenizer::from_json(vocab.to_string().as_bytes(), 512).unwrap()
    }

    #[test]
    fn viterbi_picks_the_best_path_and_duplicates_keep_the_last_id() {
        let t = toy();
        // "▁hello" appears twice: id 15 (the later one) wins, as in a map filled in order.
        // "▁world" as one piece (-7) loses to "▁w"+"orld" (-6).
        assert_eq!(t.encode("hello world"), vec![0, 15, 12, 13, 2]);
    }

    #[test]
    fn unknown_characters_fuse_into_one_unk() {
        let t = toy();
        // "▁" then "xyz" unknown (fused), then "h".
        assert_eq!(t.encode("xyzh"), vec![0, 4, 3, 8, 2]);
    }

    #[test]
    fn normalizer_and_pre_tokenizer_follow_xlmr() {
        assert_eq!(normalize("a\u{3000}\u{3000}b\u{7}\tc"), "a b c");
        assert_eq!(normalize("ｆｕｌｌ"), "full");
        assert_eq!(normalize("x \u{7} y"), "x y");
        assert_eq!(words("hello world"), vec!["\u{2581}hello", "\u{2581}world"]);
        assert_eq!(words(" lead"), vec!["\u{2581}lead"]);
        assert_eq!(words("trail "), vec!["\u{2581}trail", "\u{2581}"]);
    }

    #[test]
    fn long_texts_are_cut_with_the_end_token_kept() {
        let json = toy_json_with_max();
        let t = Tokenizer::from_json(json.as_bytes(), 6).unwrap();
        let ids = t.encode("hello hello hello hello hello");
        assert_eq!(ids, vec![0, 15, 15, 15, 15, 2]);
    }

    fn toy_json_with_max() -> String {
        serde_json::json!({
            "model": {"type": "Unigram", "unk_id": 3, "vocab": [
                ["<s>", 0.0], ["<pad>", 0.0], ["</s>", 0.0], ["<unk>", 0.0],
                ["\u{2581}", -2.0], ["\u{2581}he", -3.0], ["llo", -3.0], ["\u{2581}hello", -4.0],
                ["h", -5.0], ["e", -5.0], ["l", -5.0], ["o", -5.0], ["\u{2581}w", -3.0],
                ["orld", -3.0], ["\u{2581}world", -7.0], ["\u{2581}hello", -1.0]
            ]}
        })
        .to_string()
    }

    #[test]
    fn escaped_pieces_in_the_json_are_unescaped() {
        // Pieces are borrowed from the JSON text unless they hold escapes; both must work.
        let json = r#"{"model":{"type":"Unigram","unk_id":3,"vocab":[
            ["<s>",0.0],["<pad>",0.0],["</s>",0.0],["<unk>",0.0],
            ["\u2581",-2.0],["\u2581\"caf\u00e9\"",-1.0],["\u2581plain",-1.0]]}}"#;
        let t = Tokenizer::from_json(json.as_bytes(), 16).unwrap();
        assert_eq!(t.encode("\"café\" plain"), vec![0, 5, 6, 2]);
    }

    #[test]
    fn the_compact_form_loads_the_same_tokenizer_and_bad_ones_are_rebuilt() {
        let dir = tempfile::tempdir().unwrap();
        let json = dir.path().join("tokenizer.json");
        std::fs::write(&json, toy_json_with_max()).unwrap();
        let parsed = Tokenizer::from_json(toy_json_with_max().as_bytes(), 512).unwrap();
        let first = Tokenizer::load(dir.path(), 512).unwrap();
        assert_eq!(first, parsed);
        let compact = dir.path().join(COMPACT_FILE);
        let bytes = std::fs::read(&compact).unwrap();
        let stamp = crate::beside::stamp(&[&json]).unwrap();
        assert_eq!(Tokenizer::from_compact(&bytes, &stamp, 512), Some(parsed));
        assert_eq!(Tokenizer::load(dir.path(), 512).unwrap(), first);
        assert_eq!(Tokenizer::load(dir.path(), 8).unwrap().max_len, 8);

        // Any cut, a wrong stamp or an id out of range is refused, never trusted.
        for cut in [0, 5, bytes.len() / 2, bytes.len() - 1] {
            assert_eq!(Tokenizer::from_compact(&bytes[..cut], &stamp, 512), None);
        }
        assert_eq!(Tokenizer::from_compact(&bytes, "1:2", 512), None);
        let mut bad = bytes.clone();
        let at = bad.len() - 4 * first.scores.len() - 4;
        bad[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(Tokenizer::from_compact(&bad, &stamp, 512), None);
        std::fs::write(&compact, b"garbage").unwrap();
        assert_eq!(Tokenizer::load(dir.path(), 512).unwrap(), first);
        assert_eq!(std::fs::read(&compact).unwrap(), bytes, "rebuilt");

        // A changed tokenizer.json is parsed again.
        let other = toy_json_with_max().replace("orld", "orlD");
        std::fs::write(&json, &other).unwrap();
        crate::fsx::touch_later(&json);
        assert_eq!(
            Tokenizer::load(dir.path(), 512).unwrap(),
            Tokenizer::from_json(other.as_bytes(), 512).unwrap()
        );
    }

    #[test]
    fn other_tokenizer_models_get_a_clear_error() {
        let e = Tokenizer::from_json(br#"{"model":{"type":"WordPiece","vocab":[["a",0.0]]}}"#, 8)
            .unwrap_err();
        assert!(e.contains("WordPiece") && e.contains("Unigram"), "{e}");
        assert!(
            Tokenizer::from_json(b"not json", 8)
                .unwrap_err()
                .contains("not a tokenizer")
        );
    }
}
