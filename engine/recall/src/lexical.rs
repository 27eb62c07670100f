//! The BM25 index (tantivy) over summary, tags and body.
//!
//! Text is analysed by [`super::analyzer`] and handed to tantivy pre-tokenized, so one field
//! holds stems of every language and the document's language is decided once per note.
//!
//! Many processes share one home: tantivy allows one writer at a time (its lock file), so a
//! writer is taken only for one batch, committed and dropped; a process that finds the lock
//! busy retries with a short backoff for up to [`WRITER_WAIT`]. Readers never block.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use tantivy::collector::TopDocs;
use tantivy::directory::error::LockError;
use tantivy::query::{
    BooleanQuery, BoostQuery, ConstScoreQuery, DisjunctionMaxQuery, Occur, Query, TermQuery,
};
use tantivy::schema::{
    Field, IndexRecordOption, STORED, STRING, Schema, TextFieldIndexing, TextOptions, Value,
};
use tantivy::tokenizer::PreTokenizedString;
use tantivy::{Index, IndexReader, IndexWriter, ReloadPolicy, TantivyDocument, TantivyError, Term};

use super::analyzer::{
    Detected, Lang, analyze_doc, analyze_query_groups, analyze_query_words, detect, to_tokens,
};
use super::{Error, RecallDoc};

/// Longest a writer waits for another process's writer to finish.
pub const WRITER_WAIT: Duration = Duration::from_secs(15);

/// Field boosts: a hit in the summary or tags says more than one in the body.
pub const SUMMARY_BOOST: f32 = 1.0;
pub const TAGS_BOOST: f32 = 1.0;
pub const BODY_BOOST: f32 = 1.0;

/// Bumped whenever the schema or the analysis changes; a mismatch rebuilds the index (v2:
/// language detection, question words, CJK unigrams; v3: each note's language stored).
const SCHEMA_VERSION: &str = "lexical-v3";

struct Fields {
    key: Field,
    scope: Field,
    /// The note's detected language code, empty when unclear.
    lang: Field,
    summary: Field,
    tags: Field,
    body: Field,
}

/// One BM25 match.
#[derive(Debug, Clone, PartialEq)]
pub struct LexicalHit {
    pub key: String,
    pub score: f32,
    /// The note's language, when one clearly dominates its Latin-script words.
    pub lang: Option<Lang>,
}

pub struct LexicalIndex {
    dir: PathBuf,
    index: Index,
    reader: IndexReader,
    f: Fields,
}

fn schema() -> (Schema, Fields) {
    let mut b = Schema::builder();
    let text = TextOptions::default().set_indexing_options(
        TextFieldIndexing::default()
            .set_tokenizer("raw")
            .set_index_option(IndexRecordOption::WithFreqs),
    );
    let f = Fields {
        key: b.add_text_field("key", STRING | STORED),
        scope: b.add_text_field("scope", STRING),
        lang: b.add_text_field("lang", STRING | STORED),
        summary: b.add_text_field("summary", text.clone()),
        tags: b.add_text_field("tags", text.clone()),
        body: b.add_text_field("body", text),
    };
    (b.build(), f)
}

impl LexicalIndex {
    /// Opens the index in `dir`, creating it if absent. An unreadable index or one from another
    /// schema version is wiped and recreated; the returned flag says so (the caller re-adds
    /// every document).
    pub fn open(dir: &Path) -> Result<(Self, bool), Error> {
        std::fs::create_dir_all(dir)?;
        let version_file = dir.join("SCHEMA_VERSION");
        let version_ok = std::fs::read_to_string(&version_file)
            .map(|v| v.trim() == SCHEMA_VERSION)
            .unwrap_or(false);
        let has_meta = dir.join("meta.json").exists();
        if has_meta
            && version_ok
            && let Ok(me) = Self::open_existing(dir)
        {
            return Ok((me, false));
        }
        let rebuilt = has_meta;
        for entry in std::fs::read_dir(dir)? {
            let p = entry?.path();
            if p.is_file() {
                let _ = std::fs::remove_file(&p);
            }
        }
        let (schema, f) = schema();
        let index = Index::create_in_dir(dir, schema)?;
        std::fs::write(&version_file, SCHEMA_VERSION)?;
        let reader = Self::reader(&index)?;
        let me = Self {
            dir: dir.to_path_buf(),
            index,
            reader,
            f,
        };
        me.make_private()?;
        Ok((me, rebuilt))
    }

    fn open_existing(dir: &Path) -> Result<Self, Error> {
        let index = Index::open_in_dir(dir)?;
        let (expected, f) = schema();
        if index.schema() != expected {
            return Err(Error::Corrupt("lexical schema differs".into()));
        }
        // Reading every segment's files proves they are there and readable.
        let reader = Self::reader(&index)?;
        let searcher = reader.searcher();
        for seg in searcher.segment_readers() {
            seg.inverted_index(f.body)?;
        }
        let me = Self {
            dir: dir.to_path_buf(),
            index,
            reader,
            f,
        };
        me.make_private()?;
        Ok(me)
    }

    /// Makes every file of the index private to the user (0600): tantivy creates its files
    /// with the process's default mode.
    fn make_private(&self) -> Result<(), Error> {
        for entry in std::fs::read_dir(&self.dir)? {
            let p = entry?.path();
            if p.is_file() {
                crate::fsx::private_file(&p)
                    .map_err(|e| Error::Io(std::io::Error::other(e.to_string())))?;
            }
        }
        Ok(())
    }

    fn reader(index: &Index) -> Result<IndexReader, Error> {
        Ok(index
            .reader_builder()
            .reload_policy(ReloadPolicy::OnCommitWithDelay)
            .try_into()?)
    }

    /// Takes the writer lock, retrying while another process holds it.
    fn writer(&self) -> Result<IndexWriter, Error> {
        let start = Instant::now();
        let mut pause = Duration::from_millis(10);
        loop {
            match self.index.writer_with_num_threads(1, 20_000_000) {
                Ok(w) => return Ok(w),
                Err(TantivyError::LockFailure(LockError::LockBusy, _))
                    if start.elapsed() < WRITER_WAIT =>
                {
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_millis(200));
                }
                Err(TantivyError::LockFailure(LockError::LockBusy, _)) => {
                    return Err(Error::Busy(
                        "another Memoria process holds the search index writer".into(),
                    ));
                }
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Adds or replaces documents, and removes `removed` keys, in one commit.
    pub fn apply(&self, docs: &[RecallDoc], removed: &[String]) -> Result<(), Error> {
        if docs.is_empty() && removed.is_empty() {
            return Ok(());
        }
        let mut w = self.writer()?;
        for k in removed {
            w.delete_term(Term::from_field_text(self.f.key, k));
        }
        for d in docs {
            let key = super::store::doc_key(&d.scope, &d.id);
            w.delete_term(Term::from_field_text(self.f.key, &key));
            w.add_document(self.document(d, key))?;
        }
        w.commit()?;
        // The merge policy picks segments to merge at each commit; waiting for those merges
        // before the writer goes keeps the index at a few segments however many single writes
        // it takes (a dropped writer abandons them, and each write would leave one more).
        w.wait_merging_threads()?;
        self.make_private()?;
        self.reader.reload()?;
        Ok(())
    }

    fn document(&self, d: &RecallDoc, key: String) -> TantivyDocument {
        let tags = d.tags.join(" ");
        let summary = d.searched_summary();
        let all = format!("{summary}\n{tags}\n{}", d.body);
        let lang = detect(&all);
        let pre = |text: &str| PreTokenizedString {
            text: String::new(),
            tokens: to_tokens(analyze_doc(text, lang)),
        };
        let mut doc = TantivyDocument::default();
        doc.add_text(self.f.key, key);
        doc.add_text(self.f.scope, &d.scope);
        doc.add_text(
            self.f.lang,
            match lang {
                Detected::Clear(l) => l.code(),
                Detected::Unclear => "",
            },
        );
        doc.add_pre_tokenized_text(self.f.summary, pre(summary));
        doc.add_pre_tokenized_text(self.f.tags, pre(&tags));
        doc.add_pre_tokenized_text(self.f.body, pre(&d.body));
        doc
    }

    /// Rewrites every segment without its deleted documents and removes the old files, so a
    /// removed note leaves no terms behind (a delete alone only marks documents until a merge).
    pub fn compact(&self) -> Result<(), Error> {
        let mut w = self.writer()?;
        let ids = self.index.searchable_segment_ids()?;
        if !ids.is_empty() {
            w.merge(&ids).wait()?;
        }
        w.garbage_collect_files().wait()?;
        w.wait_merging_threads()?;
        self.make_private()?;
        self.reader.reload()?;
        Ok(())
    }

    /// Picks up other processes' commits now rather than after the reload delay.
    pub fn refresh(&self) -> Result<(), Error> {
        Ok(self.reader.reload()?)
    }

    /// Segments of the index and files in its directory.
    pub fn footprint(&self) -> Result<(usize, usize), Error> {
        let segments = self.index.searchable_segment_ids()?.len();
        let files = std::fs::read_dir(&self.dir)?.count();
        Ok((segments, files))
    }

    pub fn num_docs(&self) -> u64 {
        self.reader.searcher().num_docs()
    }

    /// The share of the query's words (after stop words) that occur in at least one indexed
    /// note, in any field and any scope: near 1 when the notes speak the query's language, near
    /// 0 when they do not (a Spanish question over English notes). `None` for a query with no
    /// searchable words. Hybrid fusion leans on the vectors as this falls.
    pub fn coverage(&self, query: &str) -> Result<Option<f64>, Error> {
        let words = analyze_query_words(query);
        if words.is_empty() {
            return Ok(None);
        }
        let searcher = self.reader.searcher();
        let mut found = 0usize;
        for group in &words {
            'word: for t in group {
                for field in [self.f.summary, self.f.tags, self.f.body] {
                    if searcher.doc_freq(&Term::from_field_text(field, t))? > 0 {
                        found += 1;
                        break 'word;
                    }
                }
            }
        }
        Ok(Some(found as f64 / words.len() as f64))
    }

    /// The language most notes are clearly in; `None` when none is, or two tie.
    pub fn usual_language(&self) -> Result<Option<Lang>, Error> {
        let searcher = self.reader.searcher();
        let mut counts = Vec::new();
        for l in Lang::ALL {
            counts.push((
                l,
                searcher.doc_freq(&Term::from_field_text(self.f.lang, l.code()))?,
            ));
        }
        let best = counts.iter().map(|c| c.1).max().unwrap_or(0);
        let mut top = counts.iter().filter(|c| c.1 == best && best > 0);
        Ok(match (top.next(), top.next()) {
            (Some(c), None) => Some(c.0),
            _ => None,
        })
    }

    /// BM25 search: the best `limit` keys with their scores, among documents whose scope is in
    /// `scopes` (all scopes when `None`).
    pub fn search(
        &self,
        query: &str,
        scopes: Option<&[String]>,
        limit: usize,
    ) -> Result<Vec<LexicalHit>, Error> {
        let groups = analyze_query_groups(query);
        if groups.is_empty() || limit == 0 {
            return Ok(Vec::new());
        }
        // Per word: its best term (a word of unclear language expands to several stems, and a
        // note of unclear language holds several of them: it must not score once per stem);
        // per term: the sum over the fields.
        let mut should: Vec<(Occur, Box<dyn Query>)> = Vec::new();
        for group in &groups {
            let per_term: Vec<Box<dyn Query>> = group
                .iter()
                .map(|t| {
                    let fields: Vec<(Occur, Box<dyn Query>)> = [
                        (self.f.summary, SUMMARY_BOOST),
                        (self.f.tags, TAGS_BOOST),
                        (self.f.body, BODY_BOOST),
                    ]
                    .into_iter()
                    .map(|(field, boost)| {
                        let q = TermQuery::new(
                            Term::from_field_text(field, t),
                            IndexRecordOption::WithFreqs,
                        );
                        let q: Box<dyn Query> = Box::new(BoostQuery::new(Box::new(q), boost));
                        (Occur::Should, q)
                    })
                    .collect();
                    Box::new(BooleanQuery::new(fields)) as Box<dyn Query>
                })
                .collect();
            let word: Box<dyn Query> = match per_term.len() {
                1 => per_term.into_iter().next().expect("one term"),
                _ => Box::new(DisjunctionMaxQuery::new(per_term)),
            };
            should.push((Occur::Should, word));
        }
        let text_query: Box<dyn Query> = Box::new(BooleanQuery::new(should));
        let query: Box<dyn Query> = match scopes {
            None => text_query,
            Some(scopes) => {
                let scope_q: Vec<(Occur, Box<dyn Query>)> = scopes
                    .iter()
                    .map(|s| {
                        let q: Box<dyn Query> = Box::new(TermQuery::new(
                            Term::from_field_text(self.f.scope, s),
                            IndexRecordOption::Basic,
                        ));
                        (Occur::Should, q)
                    })
                    .collect();
                Box::new(BooleanQuery::new(vec![
                    (Occur::Must, text_query),
                    (
                        Occur::Must,
                        Box::new(ConstScoreQuery::new(
                            Box::new(BooleanQuery::new(scope_q)),
                            0.0,
                        )),
                    ),
                ]))
            }
        };
        let searcher = self.reader.searcher();
        let top = searcher.search(&query, &TopDocs::with_limit(limit).order_by_score())?;
        let mut out = Vec::with_capacity(top.len());
        for (score, addr) in top {
            let doc: TantivyDocument = searcher.doc(addr)?;
            if let Some(k) = doc.get_first(self.f.key).and_then(|v| v.as_str()) {
                let lang = doc
                    .get_first(self.f.lang)
                    .and_then(|v| v.as_str())
                    .and_then(|c| Lang::ALL.into_iter().find(|l| l.code() == c));
                out.push(LexicalHit {
                    key: k.to_owned(),
                    score,
                    lang,
                });
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Documents held in the segments, deleted ones included, and whether any segment's term
    /// dictionary still holds `word` in the body field.
    fn held(ix: &LexicalIndex, word: &str) -> (u32, bool) {
        let searcher = ix.reader.searcher();
        let mut docs = 0;
        let mut has = false;
        for seg in searcher.segment_readers() {
            docs += seg.max_doc();
            let inv = seg.inverted_index(ix.f.body).unwrap();
            has |= inv.terms().term_ord(word.as_bytes()).unwrap().is_some();
        }
        (docs, has)
    }

    #[test]
    fn many_single_writes_keep_few_segments() {
        let dir = tempfile::tempdir().unwrap();
        let (ix, _) = LexicalIndex::open(dir.path()).unwrap();
        for i in 0..48 {
            let d = RecallDoc::new("user", &format!("n{i}"), &format!("note {i}"), "some words");
            ix.apply(&[d], &[]).unwrap();
            if i % 4 == 0 {
                ix.apply(
                    &[],
                    &[crate::store::doc_key("user", &format!("n{}", i / 2))],
                )
                .unwrap();
            }
        }
        let (segments, files) = ix.footprint().unwrap();
        // One segment per write would be 48 segments and several hundred files.
        assert!(segments <= 12, "{segments} segments, {files} files");
        assert!(files <= 12 * 8 + 8, "{segments} segments, {files} files");
        assert_eq!(ix.num_docs(), 48 - 12);
    }

    #[test]
    fn compact_leaves_no_trace_of_removed_documents() {
        let dir = tempfile::tempdir().unwrap();
        let (ix, _) = LexicalIndex::open(dir.path()).unwrap();
        let keep = RecallDoc::new("user", "keep", "kept note", "ordinary words");
        let gone = RecallDoc::new("user", "gone", "forgotten note", "marzipanquokka");
        ix.apply(&[keep, gone.clone()], &[]).unwrap();
        assert_eq!(held(&ix, "marzipanquokka"), (2, true));
        ix.apply(&[], &[gone.key()]).unwrap();
        // A delete only marks the document: its terms stay in the segment files.
        assert_eq!(held(&ix, "marzipanquokka"), (2, true));
        ix.compact().unwrap();
        assert_eq!(held(&ix, "marzipanquokka"), (1, false));
        assert_eq!(ix.num_docs(), 1);
    }
}
