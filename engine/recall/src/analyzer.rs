//! Text analysis for the lexical index: language detection, word and CJK-bigram tokens,
//! per-language stop words and stemming.
//!
//! Documents are analysed with the language detected over the whole note (summary, tags and
//! body together), so a short summary is stemmed like its body. A note with no clear language
//! (a short sentence, a list of names) gets each word's stems in every supported language.
//! Queries are analysed with their own detected language; a short query with no clear language
//! is expanded the same way and loses the stop words of every language. Questions lose their
//! question words (`how`, `cuántos`, `什么`…), which the notes that answer rarely contain.
//! Text in Chinese, Japanese or Korean script becomes overlapping character bigrams plus its
//! single characters, so no segmenter is needed: bigrams reward a matching phrase, single
//! characters find one-character words (XQuAD zh BM25 nDCG@10 0.8367 with bigrams only, 0.8572
//! with both). Stems are folded to ASCII afterwards, so `canción` and `cancion` meet.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::sync::OnceLock;

use tantivy::tokenizer::{
    Language, Stemmer, StopWordFilter, TextAnalyzer, Token, TokenStream, WhitespaceTokenizer,
};

/// The languages that get stemming and stop words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Lang {
    En,
    Es,
    De,
    Fr,
    Hu,
}

impl Lang {
    pub const ALL: [Lang; 5] = [Lang::En, Lang::Es, Lang::De, Lang::Fr, Lang::Hu];

    fn tantivy(self) -> Language {
        match self {
            Lang::En => Language::English,
            Lang::Es => Language::Spanish,
            Lang::De => Language::German,
            Lang::Fr => Language::French,
            Lang::Hu => Language::Hungarian,
        }
    }

    pub fn code(self) -> &'static str {
        match self {
            Lang::En => "en",
            Lang::Es => "es",
            Lang::De => "de",
            Lang::Fr => "fr",
            Lang::Hu => "hu",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Words longer than this are not indexed (base64 blobs, hashes pasted into notes).
const MAX_WORD_CHARS: usize = 40;

/// What the detector decided about a text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Detected {
    /// One language clearly dominates the Latin-script words.
    Clear(Lang),
    /// Too little evidence (short text, or a tie).
    Unclear,
}

/// One raw piece of text before stemming.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    /// A lowercased alphanumeric word.
    Word(String),
    /// A CJK unigram or bigram; never stemmed or stop-filtered.
    Cjk(String),
}

/// True for Han, Hiragana, Katakana and Hangul characters.
pub fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30FF      // Hiragana, Katakana
        | 0x3400..=0x4DBF    // CJK Extension A
        | 0x4E00..=0x9FFF    // CJK Unified Ideographs
        | 0xF900..=0xFAFF    // CJK Compatibility Ideographs
        | 0xAC00..=0xD7AF    // Hangul syllables
        | 0x1100..=0x11FF    // Hangul Jamo
        | 0x20000..=0x2FFFF) // Extensions B..
}

/// Splits text into lowercased words and CJK bigrams, in order.
fn pieces(text: &str) -> Vec<Piece> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut cjk: Vec<char> = Vec::new();
    let flush_word = |word: &mut String, out: &mut Vec<Piece>| {
        if !word.is_empty() {
            if word.chars().count() <= MAX_WORD_CHARS {
                out.push(Piece::Word(std::mem::take(word)));
            } else {
                word.clear();
            }
        }
    };
    let flush_cjk = |cjk: &mut Vec<char>, out: &mut Vec<Piece>| {
        match cjk.len() {
            0 => {}
            1 => out.push(Piece::Cjk(cjk[0].to_string())),
            _ => {
                for pair in cjk.windows(2) {
                    out.push(Piece::Cjk(pair.iter().collect()));
                }
            }
        }
        cjk.clear();
    };
    for c in text.chars() {
        if is_cjk(c) {
            flush_word(&mut word, &mut out);
            cjk.push(c);
        } else if c.is_ascii_alphanumeric() {
            flush_cjk(&mut cjk, &mut out);
            word.push(c.to_ascii_lowercase());
        } else if c.is_alphanumeric() {
            flush_cjk(&mut cjk, &mut out);
            word.extend(c.to_lowercase());
        } else {
            flush_word(&mut word, &mut out);
            flush_cjk(&mut cjk, &mut out);
        }
    }
    flush_word(&mut word, &mut out);
    flush_cjk(&mut cjk, &mut out);
    out
}

thread_local! {
    /// Per language: stop-word removal then stemming (tantivy's Snowball stemmers and lists).
    static FULL: Vec<TextAnalyzer> = Lang::ALL
        .iter()
        .map(|l| {
            TextAnalyzer::builder(WhitespaceTokenizer::default())
                .filter(StopWordFilter::new(l.tantivy()).expect("tantivy ships this stop list"))
                .filter(Stemmer::new(l.tantivy()))
                .build()
        })
        .collect();
}

/// The most words [`term_of`] remembers per language before it starts over.
const REMEMBERED_WORDS: usize = 50_000;

thread_local! {
    /// Each word's term per language as [`FULL`] makes it (`None`: a stop word). The same words
    /// recur in note after note: each is stemmed once.
    static TERMS: RefCell<Vec<HashMap<String, Option<String>>>> =
        RefCell::new(Lang::ALL.iter().map(|_| HashMap::new()).collect());
}

/// One word's term in `lang` (`None` for a stop word): what [`run`] makes of it alone. Words
/// hold no whitespace, so each is one token of the analyzer and its term does not depend on
/// the words around it.
fn term_of(lang: Lang, word: &str) -> Option<String> {
    TERMS.with(|t| {
        let mut tables = t.borrow_mut();
        let table = &mut tables[lang.index()];
        if let Some(term) = table.get(word) {
            return term.clone();
        }
        let term = run(&FULL, lang, word).into_iter().next();
        if table.len() >= REMEMBERED_WORDS {
            table.clear();
        }
        table.insert(word.to_owned(), term.clone());
        term
    })
}

/// Runs whitespace-joined words through one of the per-language analyzers.
fn run(
    analyzers: &'static std::thread::LocalKey<Vec<TextAnalyzer>>,
    lang: Lang,
    words: &str,
) -> Vec<String> {
    analyzers.with(|a| {
        let mut analyzer = a[lang.index()].clone();
        let mut stream = analyzer.token_stream(words);
        let mut out = Vec::new();
        while stream.advance() {
            out.push(fold_ascii(&stream.token().text));
        }
        out
    })
}

/// True when `word` (lowercased) is a stop word of `lang` (the word-by-word reference the
/// tests hold [`stems_of_every_language`] to).
#[cfg(test)]
fn is_stop_word(lang: Lang, word: &str) -> bool {
    !word.contains(char::is_whitespace) && run(&FULL, lang, word).is_empty()
}

/// Language-evidence words: frequent function words that are rare in the other languages.
fn marker_words(lang: Lang) -> &'static [&'static str] {
    match lang {
        Lang::En => &[
            "the", "and", "of", "is", "are", "was", "with", "what", "which", "who", "how", "when",
            "where", "why", "does", "this", "that", "from", "have", "has", "to", "in", "for", "it",
            "be", "by", "not", "or", "on", "as", "at", "an", "were", "been", "their",
        ],
        Lang::Es => &[
            "el", "la", "los", "las", "del", "y", "que", "qué", "es", "son", "por", "para", "con",
            "una", "un", "se", "su", "sus", "cuál", "cuáles", "cómo", "dónde", "quién", "cuándo",
            "fue", "más", "lo", "al", "en", "como", "pero", "muy", "también", "de", "cuánto",
            "cuánta", "cuántos", "cuántas", "hay", "este", "esta", "estos", "desde", "según",
        ],
        Lang::De => &[
            "der", "die", "das", "und", "ist", "nicht", "mit", "ein", "eine", "einer", "den",
            "dem", "des", "zu", "von", "auf", "für", "sich", "auch", "wird", "wurde", "sind",
            "wie", "was", "wer", "wo", "ich", "im", "bei", "oder",
        ],
        Lang::Fr => &[
            "le", "les", "des", "et", "est", "une", "du", "au", "aux", "dans", "pour", "avec",
            "qui", "que", "sur", "pas", "sont", "ce", "cette", "il", "elle", "quel", "quelle",
            "où", "comment", "par", "plus", "mais", "ou", "de", "la", "un",
        ],
        Lang::Hu => &[
            "az", "egy", "és", "hogy", "nem", "van", "volt", "meg", "is", "ez", "azt", "ezt",
            "mint", "csak", "vagy", "mi", "ki", "hol", "mikor", "miért", "szerint", "között",
            "után", "lesz", "el",
        ],
    }
}

/// Question words: a query asks with them, but the note that answers rarely contains them, so
/// in a query they match only notes that happen to ask something alike. Dropped from queries
/// (not from notes), on top of the language's stop words.
fn question_words(lang: Lang) -> &'static [&'static str] {
    match lang {
        Lang::En => &[
            "what", "which", "who", "whom", "whose", "when", "where", "why", "how", "many", "much",
            "does", "did", "do",
        ],
        Lang::Es => &[
            "qué", "cuál", "cuáles", "quién", "quiénes", "dónde", "cuándo", "cómo", "cuánto",
            "cuánta", "cuántos", "cuántas",
        ],
        Lang::De => &[
            "wer", "wann", "warum", "wieso", "weshalb", "wieviel", "wieviele", "viele",
        ],
        Lang::Fr => &["combien", "où", "quand", "comment", "pourquoi", "quoi"],
        Lang::Hu => &[
            "mi", "ki", "hol", "mikor", "miért", "hány", "mennyi", "melyik", "milyen",
        ],
    }
}

/// Chinese question words, longest first. Written inside a run of characters, so they would
/// otherwise reach the query as bigrams ("什么", and "么是" across the word boundary).
const CJK_QUESTION_WORDS: &[&str] = &[
    "为什么",
    "怎么样",
    "什么",
    "怎么",
    "怎样",
    "如何",
    "哪里",
    "哪儿",
    "哪个",
    "哪些",
    "多少",
    "何时",
    "为何",
    "是否",
    "谁",
    "哪",
    "几",
    "吗",
    "呢",
];

/// The query with its Chinese question words replaced by spaces, which split the run of
/// characters into the parts that carry the question's content.
fn without_cjk_question_words(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(is_cjk) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = text.to_owned();
    for w in CJK_QUESTION_WORDS {
        if out.contains(w) {
            out = out.replace(w, " ");
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Letters that point at one language.
fn marker_char(c: char) -> Option<Lang> {
    match c {
        'ñ' => Some(Lang::Es),
        'ß' | 'ä' => Some(Lang::De),
        'ő' | 'ű' => Some(Lang::Hu),
        'ç' | 'è' | 'ê' | 'à' | 'â' | 'î' | 'ô' | 'û' | 'œ' => Some(Lang::Fr),
        _ => None,
    }
}

/// Detects the language of a text's Latin-script words.
pub fn detect(text: &str) -> Detected {
    detect_in(&pieces(text), text)
}

/// [`detect`] over the text's pieces, already split.
fn detect_in(pieces: &[Piece], text: &str) -> Detected {
    static MARKERS: OnceLock<Vec<HashSet<&'static str>>> = OnceLock::new();
    let markers = MARKERS.get_or_init(|| {
        Lang::ALL
            .iter()
            .map(|l| marker_words(*l).iter().copied().collect())
            .collect()
    });
    // `lead`: evidence that points at one language only (its own marker words, 2 each; its
    // letters, 1 each). `shared`: marker words of several languages ("la", "de", "que" in
    // Spanish and French; "is" in English and Hungarian), 1 each: they count as evidence that
    // the text is one of those languages but never decide which.
    let mut lead = [0u32; 5];
    let mut shared = [0u32; 5];
    let mut words = 0u32;
    // Enough evidence is gathered from the first few hundred words.
    for piece in pieces.iter().take(400) {
        if let Piece::Word(w) = piece {
            words += 1;
            let mut marked = [false; 5];
            for l in Lang::ALL {
                marked[l.index()] = markers[l.index()].contains(w.as_str());
            }
            match marked.iter().filter(|&&m| m).count() {
                0 => {}
                1 => Lang::ALL
                    .iter()
                    .filter(|l| marked[l.index()])
                    .for_each(|l| lead[l.index()] += 2),
                _ => Lang::ALL
                    .iter()
                    .filter(|l| marked[l.index()])
                    .for_each(|l| shared[l.index()] += 1),
            }
            for c in w.chars() {
                if let Some(l) = marker_char(c) {
                    lead[l.index()] += 1;
                }
            }
        }
    }
    // Opening question and exclamation marks are Spanish only, as telling as a marker word;
    // they are not part of any word.
    let inverted = text
        .chars()
        .take(4000)
        .filter(|c| matches!(c, '¿' | '¡'))
        .count();
    lead[Lang::Es.index()] += 2 * inverted.min(4) as u32;
    let mut ranked: Vec<(u32, Lang)> = Lang::ALL.iter().map(|l| (lead[l.index()], *l)).collect();
    ranked.sort_by_key(|r| std::cmp::Reverse(r.0));
    let (best, lang) = ranked[0];
    let second = ranked[1].0;
    // Evidence worth two marker words at least, and a clear lead over the runner-up.
    if words > 0 && best >= 2 && best + shared[lang.index()] >= 4 && best * 2 >= second * 3 {
        Detected::Clear(lang)
    } else {
        Detected::Unclear
    }
}

/// Folds the accented Latin letters of the supported languages to ASCII.
pub fn fold_ascii(s: &str) -> String {
    if s.is_ascii() {
        return s.to_owned();
    }
    s.chars()
        .map(|c| match c {
            'á' | 'à' | 'â' | 'ä' | 'ã' | 'å' => 'a',
            'é' | 'è' | 'ê' | 'ë' => 'e',
            'í' | 'ì' | 'î' | 'ï' => 'i',
            'ó' | 'ò' | 'ô' | 'ö' | 'õ' | 'ő' => 'o',
            'ú' | 'ù' | 'û' | 'ü' | 'ű' => 'u',
            'ñ' => 'n',
            'ç' => 'c',
            'ý' | 'ÿ' => 'y',
            c => c,
        })
        .collect()
}

/// Each character of the CJK runs of two or more characters (a run of one is already its own
/// unigram).
fn cjk_unigrams(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut run: Vec<char> = Vec::new();
    for c in text.chars().chain(std::iter::once(' ')) {
        if is_cjk(c) {
            run.push(c);
        } else {
            if run.len() >= 2 {
                out.extend(run.iter().map(|c| c.to_string()));
            }
            run.clear();
        }
    }
    out
}

/// Analyses a document: one language for the whole note; a note of unclear language gets each
/// word's stems in every language.
pub fn analyze_doc(text: &str, lang: Detected) -> Vec<String> {
    analyze_pieces(pieces(text), text, lang)
}

/// [`analyze_doc`] in the language [`detect`] finds, the text split once; a text whose
/// language is unclear is analysed as `unclear` when it is given.
pub fn analyze_detected(text: &str, unclear: Option<Lang>) -> Vec<String> {
    let pieces = pieces(text);
    let lang = match (detect_in(&pieces, text), unclear) {
        (Detected::Unclear, Some(l)) => Detected::Clear(l),
        (found, _) => found,
    };
    analyze_pieces(pieces, text, lang)
}

fn analyze_pieces(pieces: Vec<Piece>, text: &str, lang: Detected) -> Vec<String> {
    let mut words: Vec<String> = Vec::new();
    let mut out = Vec::new();
    for p in pieces {
        match p {
            Piece::Word(w) => words.push(w),
            Piece::Cjk(s) => out.push(s),
        }
    }
    match lang {
        Detected::Clear(l) => out.extend(words.iter().filter_map(|w| term_of(l, w))),
        Detected::Unclear => out.extend(stems_of_every_language(&words).into_iter().flatten()),
    }
    out.extend(cjk_unigrams(text));
    out
}

/// The words of a text whose language is unclear, each as its distinct stems in every supported
/// language, or as nothing when it is a stop word of any of them. Notes and queries of unclear
/// language are analysed alike, and each still meets a clear text through that text's
/// language's stem. One pass per language over the whole text: the stop-word filter drops a
/// token but keeps the others' positions, which say which word each stem came from.
fn stems_of_every_language(words: &[String]) -> Vec<Vec<String>> {
    let joined = words.join(" ");
    let mut stems: Vec<Vec<String>> = vec![Vec::new(); words.len()];
    let mut languages = vec![0usize; words.len()];
    for l in Lang::ALL {
        FULL.with(|a| {
            let mut analyzer = a[l.index()].clone();
            let mut stream = analyzer.token_stream(&joined);
            while stream.advance() {
                let token = stream.token();
                let Some(group) = stems.get_mut(token.position) else {
                    continue;
                };
                languages[token.position] += 1;
                let t = fold_ascii(&token.text);
                if !group.contains(&t) {
                    group.push(t);
                }
            }
        });
    }
    // A word some language left out is one of its stop words.
    for (group, n) in stems.iter_mut().zip(languages) {
        if n < Lang::ALL.len() {
            group.clear();
        }
    }
    stems
}

/// Every distinct term of [`analyze_query_groups`], in order (what the tests read).
#[cfg(test)]
pub fn analyze_query(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for t in analyze_query_groups(text).into_iter().flatten() {
        if !out.contains(&t) {
            out.push(t);
        }
    }
    out
}

/// The query's terms for BM25, one group per word: the word groups of [`analyze_query_words`],
/// then each CJK character as its own group. A group scores as its best term, so a word that
/// expanded to several stems counts once.
pub fn analyze_query_groups(text: &str) -> Vec<Vec<String>> {
    let mut out = analyze_query_words(text);
    for t in cjk_unigrams(&without_cjk_question_words(text)) {
        if !out.iter().any(|g| g.len() == 1 && g[0] == t) {
            out.push(vec![t]);
        }
    }
    out
}

/// The query's terms grouped by the word (or CJK bigram) they came from: a short query of
/// unclear language expands one word into the stems of every language, and a word counts once
/// when measuring how much of a query the notes' vocabulary covers. Stop words give no group.
pub fn analyze_query_words(text: &str) -> Vec<Vec<String>> {
    let detected = detect(text);
    let mut out: Vec<Vec<String>> = Vec::new();
    for p in pieces(&without_cjk_question_words(text)) {
        let mut group: Vec<String> = Vec::new();
        match p {
            Piece::Cjk(s) => group.push(s),
            Piece::Word(w) => match detected {
                Detected::Clear(l) => {
                    if !question_words(l).contains(&w.as_str()) {
                        group.extend(run(&FULL, l, &w))
                    }
                }
                Detected::Unclear => {
                    if !Lang::ALL
                        .iter()
                        .any(|l| question_words(*l).contains(&w.as_str()))
                    {
                        group = stems_of_every_language(&[w]).pop().unwrap_or_default();
                    }
                }
            },
        }
        if !group.is_empty() && !out.contains(&group) {
            out.push(group);
        }
    }
    out
}

/// Turns analysed terms into tantivy tokens for a pre-tokenized field value.
pub fn to_tokens(terms: Vec<String>) -> Vec<Token> {
    terms
        .into_iter()
        .enumerate()
        .map(|(i, text)| Token {
            offset_from: 0,
            offset_to: 0,
            position: i,
            text,
            position_length: 1,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(text: &str) -> Vec<String> {
        analyze_doc(text, detect(text))
    }

    #[test]
    fn english_is_stemmed_and_stop_words_dropped() {
        let t = doc("The runners were running and the cats are jumping over the fences");
        assert_eq!(
            detect("The runners were running and the cats are jumping"),
            Detected::Clear(Lang::En)
        );
        assert!(t.contains(&"run".to_owned()), "{t:?}");
        assert!(t.contains(&"cat".to_owned()), "{t:?}");
        assert!(t.contains(&"fenc".to_owned()), "{t:?}");
        assert!(!t.contains(&"the".to_owned()), "{t:?}");
        assert!(!t.contains(&"and".to_owned()), "{t:?}");
    }

    #[test]
    fn spanish_german_french_hungarian_are_detected_and_stemmed() {
        let es = "Las canciones de los niños son muy bonitas y la canción del perro también";
        assert_eq!(detect(es), Detected::Clear(Lang::Es));
        let t = doc(es);
        assert!(t.contains(&"cancion".to_owned()), "{t:?}");
        assert!(!t.contains(&"los".to_owned()), "{t:?}");

        let de = "Die Häuser der Stadt sind nicht alt und das Haus ist schön";
        assert_eq!(detect(de), Detected::Clear(Lang::De));
        let t = doc(de);
        assert!(t.contains(&"haus".to_owned()), "{t:?}");
        assert!(!t.contains(&"die".to_owned()), "{t:?}");

        let fr = "Les maisons de la ville sont belles et elle est dans la maison avec les enfants";
        assert_eq!(detect(fr), Detected::Clear(Lang::Fr));
        let t = doc(fr);
        assert!(t.contains(&"maison".to_owned()), "{t:?}");
        assert!(!t.contains(&"les".to_owned()), "{t:?}");

        let hu = "A házak a városban vannak és az egy nagy ház, hogy nem volt ott";
        assert_eq!(detect(hu), Detected::Clear(Lang::Hu));
        let t = doc(hu);
        assert!(t.contains(&"haz".to_owned()), "{t:?}");
        assert!(!t.contains(&"az".to_owned()), "{t:?}");
    }

    #[test]
    fn cjk_becomes_overlapping_bigrams_and_unigrams() {
        let t = doc("北京大学 is in 中国");
        assert_eq!(
            t,
            [
                "北京", "京大", "大学", "中国", "北", "京", "大", "学", "中", "国"
            ]
        );
        assert_eq!(analyze_query("京"), vec!["京".to_owned()]);
        // Query: bigrams, then unigrams; question words split the run and are dropped, and only
        // the bigrams count as words for coverage.
        assert_eq!(
            analyze_query("什么是光合作用"),
            ["是光", "光合", "合作", "作用", "是", "光", "合", "作", "用"]
        );
        assert_eq!(
            analyze_query_words("谁发明了电话").len(),
            4,
            "发明 明了 了电 电话"
        );
        // Mixed script splits at the boundary: "gpu" stays a word, "模型" a bigram.
        let q = analyze_query("GPU模型");
        assert!(q.contains(&"模型".to_owned()), "{q:?}");
        assert!(q.contains(&"gpu".to_owned()), "{q:?}");
    }

    #[test]
    fn short_query_without_clear_language_drops_all_stop_words_and_expands_stems() {
        assert_eq!(detect("las canciones"), Detected::Unclear);
        let q = analyze_query("las canciones");
        assert!(!q.contains(&"las".to_owned()), "{q:?}");
        // Spanish stem present, as well as the English one.
        assert!(q.contains(&"cancion".to_owned()), "{q:?}");
        assert!(q.contains(&"canciones".to_owned()) || q.contains(&"cancion".to_owned()));
        let q = analyze_query("der Hund");
        assert!(!q.contains(&"der".to_owned()), "{q:?}");
        assert!(q.contains(&"hund".to_owned()), "{q:?}");
    }

    #[test]
    fn query_words_group_their_stems_and_skip_stop_words() {
        // Unclear language: each word's stems in every language form one group.
        let g = analyze_query_words("the running cats");
        assert_eq!(g.len(), 2, "{g:?}");
        assert!(g[0].contains(&"run".to_owned()), "{g:?}");
        assert!(g[1].contains(&"cat".to_owned()), "{g:?}");
        // CJK bigrams are one group each.
        assert_eq!(analyze_query_words("量子计算").len(), 3);
        assert!(analyze_query_words("the and of").is_empty());
        // The flat list is the groups' terms without repeats.
        let flat: Vec<String> = g.into_iter().flatten().fold(Vec::new(), |mut v, t| {
            if !v.contains(&t) {
                v.push(t);
            }
            v
        });
        assert_eq!(analyze_query("the running cats"), flat);
    }

    #[test]
    fn words_shared_by_languages_do_not_decide_and_inverted_marks_are_spanish() {
        // "la" and "de" mark Spanish and French alike: the Spanish-only "es" and "una" decide.
        let es = "La historia de la música de la región es una parte de la cultura de la costa.";
        assert_eq!(detect(es), Detected::Clear(Lang::Es));
        assert!(doc(es).contains(&"music".to_owned()), "{:?}", doc(es));
        // A short question: "¿" is Spanish evidence even though it is not part of a word.
        assert_eq!(detect("¿Quién ganó la copa?"), Detected::Clear(Lang::Es));
        assert_eq!(
            detect("¿Cuántos goles marcó Pérez?"),
            Detected::Clear(Lang::Es)
        );
        // English with the article "a" is not Hungarian.
        assert_ne!(
            detect("A cat is a pet with a tail and a dog is a friend"),
            Detected::Clear(Lang::Hu)
        );
        assert_eq!(
            detect("La maison de la rue est une maison de la ville et le jardin est grand"),
            Detected::Clear(Lang::Fr)
        );
    }

    #[test]
    fn a_note_of_unclear_language_gets_the_stems_of_every_language() {
        let t = doc("Geólogos modernos, Hutton");
        assert_eq!(detect("Geólogos modernos, Hutton"), Detected::Unclear);
        // The Spanish query's stems meet it, and so would the English ones.
        let q = analyze_query("¿Quiénes son los geólogos modernos más citados?");
        let content: Vec<&String> = q.iter().filter(|q| *q == "geolog" || *q == "mod").collect();
        assert_eq!(content.len(), 2, "{q:?}");
        for q in content {
            assert!(t.contains(q), "{q} not in {t:?}");
        }
        assert!(t.contains(&"hutton".to_owned()), "{t:?}");
        assert!(t.len() > 3, "{t:?}");
    }

    #[test]
    fn one_pass_stems_match_word_by_word_analysis() {
        let text = "the Häuser und canciones de los niños are running quickly über die Brücke \
                    az egy ház pricing cards fill 2026 x";
        let words: Vec<String> = pieces(text)
            .into_iter()
            .filter_map(|p| match p {
                Piece::Word(w) => Some(w),
                Piece::Cjk(_) => None,
            })
            .collect();
        let one_pass = stems_of_every_language(&words);
        for (w, got) in words.iter().zip(&one_pass) {
            let mut want: Vec<String> = Vec::new();
            if !Lang::ALL.iter().any(|l| is_stop_word(*l, w)) {
                for l in Lang::ALL {
                    for t in run(&FULL, l, w) {
                        if !want.contains(&t) {
                            want.push(t);
                        }
                    }
                }
            }
            assert_eq!(got, &want, "{w}");
        }
        assert!(
            one_pass.iter().any(|g| g.is_empty()),
            "stop words give no stems"
        );
        assert!(
            one_pass.iter().any(|g| g.len() > 1),
            "some word has several stems"
        );
    }

    #[test]
    fn clear_query_uses_its_language_only() {
        let q = analyze_query("¿Cuáles son las canciones más populares del año?");
        assert!(q.contains(&"cancion".to_owned()), "{q:?}");
        assert!(!q.contains(&"son".to_owned()), "{q:?}");
        // Question words are dropped from queries, not from notes.
        assert!(!q.iter().any(|t| t.starts_with("cual")), "{q:?}");
        let q = analyze_query("How many tests did the importer run when it started?");
        assert_eq!(q, ["test", "import", "run", "start"], "{q:?}");
        assert!(doc("How the importer works").contains(&"how".to_owned()));
    }

    #[test]
    fn garbage_and_long_words_are_harmless() {
        assert!(analyze_query("").is_empty());
        assert!(analyze_query("!!! ??? ---").is_empty());
        let long = "x".repeat(500);
        assert!(analyze_query(&long).is_empty());
        let bin: String = (0u8..=255).map(char::from).collect();
        let _ = analyze_query(&bin);
        let _ = doc(&bin);
    }

    #[test]
    fn terms_word_by_word_are_the_terms_of_the_whole_text() {
        let texts = [
            "The deploys went out on Tuesdays; rollbacks need the second approver's sign-off.",
            "Los despliegues salen los martes y las reversiones necesitan aprobación.",
            "Die Bereitstellungen laufen dienstags, Rücknahmen brauchen eine Freigabe.",
            "Les déploiements partent le mardi; les retours arrière demandent une validation.",
            "A telepítések keddenként mennek ki, a visszaállításhoz jóváhagyás kell.",
        ];
        for lang in Lang::ALL {
            for text in texts {
                let words: Vec<String> = pieces(text)
                    .into_iter()
                    .filter_map(|p| match p {
                        Piece::Word(w) => Some(w),
                        Piece::Cjk(_) => None,
                    })
                    .collect();
                // Twice: the second pass reads the remembered terms.
                for _ in 0..2 {
                    assert_eq!(
                        analyze_doc(text, Detected::Clear(lang)),
                        run(&FULL, lang, &words.join(" ")),
                        "{lang:?}: {text}"
                    );
                }
            }
        }
    }
}
