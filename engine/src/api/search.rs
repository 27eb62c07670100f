//! Search and recall: ranked hits over the visible notes (with the parts of each score on
//! request), and the recall block an agent turn gets.

use serde::{Deserialize, Serialize};

use super::NoteRef;
use crate::error::Result;
use crate::project::Scope;
use crate::recall::{self, SearchOptions};
use crate::vault::Engine;

/// Which retrievers take part in a search.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SearchMode {
    /// Words only (BM25).
    Bm25,
    /// Meaning only (embeddings).
    Vector,
    /// Both, fused.
    #[default]
    Hybrid,
}

impl From<SearchMode> for recall::Mode {
    fn from(m: SearchMode) -> recall::Mode {
        match m {
            SearchMode::Bm25 => recall::Mode::Bm25,
            SearchMode::Vector => recall::Mode::Vector,
            SearchMode::Hybrid => recall::Mode::Hybrid,
        }
    }
}

/// A search.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SearchRequest {
    pub query: String,
    /// At most this many hits (1 to 1,000).
    pub limit: usize,
    pub mode: SearchMode,
    /// Include the parts of each hit's score.
    pub explain: bool,
    /// Include a piece of each hit's body around the query's words.
    pub snippets: bool,
    /// Include archived notes (importance decayed below the archive threshold), which are
    /// otherwise left out.
    pub archived: bool,
    /// Only hits as likely to answer as the recall block asks of its notes; the others are
    /// counted in `SearchResults::below_floor` (see [`search_with_floor`]).
    pub relevant_only: bool,
    /// Only notes of these types (`message` for what was said).
    pub types: Vec<String>,
    /// Only notes carrying all of these tags.
    pub tags: Vec<String>,
    /// Only notes created (messages said) at or after this time, in ms since the epoch.
    pub after: Option<i64>,
    /// Only notes created (messages said) at or before this time, in ms since the epoch.
    pub before: Option<i64>,
}

impl Default for SearchRequest {
    fn default() -> Self {
        SearchRequest {
            query: String::new(),
            limit: 10,
            mode: SearchMode::Hybrid,
            explain: false,
            snippets: false,
            archived: false,
            relevant_only: false,
            types: Vec::new(),
            tags: Vec::new(),
            after: None,
            before: None,
        }
    }
}

/// Hits, and how many more the relevance floor left out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SearchResults {
    pub hits: Vec<SearchHit>,
    pub below_floor: usize,
}

/// The parts of a hit's score. A retriever that did not find the note has no rank.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScoreParts {
    /// Place in the word (BM25) ranking, from 1.
    pub bm25_rank: Option<usize>,
    pub bm25_score: Option<f32>,
    /// Place in the meaning (vector) ranking, from 1.
    pub vector_rank: Option<usize>,
    pub cosine: Option<f32>,
    /// The note is in another language than the query, so its words did not count.
    #[serde(default)]
    pub other_language: bool,
    /// The fused score before the multipliers below.
    pub fused: f64,
    /// How likely the note is to answer the query, 0 to 1; `None` without a semantic-model
    /// cosine.
    #[serde(default)]
    pub relevance: Option<f64>,
    /// Share of the query's words found in the notes' vocabulary (hybrid fusion).
    pub coverage: Option<f64>,
    /// The vector side's weight in fusion for this query.
    pub vector_weight: Option<f64>,
    pub decay: f64,
    pub trust: f64,
    pub importance: f64,
    pub access: f64,
    /// Below 1 for a note consolidated into another or superseded by another.
    #[serde(default = "one")]
    pub standing: f64,
}

fn one() -> f64 {
    1.0
}

impl From<recall::Explain> for ScoreParts {
    fn from(x: recall::Explain) -> ScoreParts {
        ScoreParts {
            bm25_rank: x.bm25_rank,
            bm25_score: x.bm25_score,
            vector_rank: x.vector_rank,
            cosine: x.cosine,
            other_language: x.other_language,
            fused: x.fused,
            relevance: x.relevance,
            coverage: x.coverage,
            vector_weight: x.vector_weight,
            decay: x.decay,
            trust: x.trust,
            importance: x.importance,
            access: x.access,
            standing: x.standing,
        }
    }
}

/// One search hit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SearchHit {
    pub scope: String,
    pub id: String,
    pub summary: String,
    #[serde(rename = "type")]
    pub note_type: Option<String>,
    /// The ranking score (words, meaning, trust, age and use together): only its order means
    /// something.
    pub score: f64,
    /// How likely the note is to answer the query, 0 to 1, comparable across queries and
    /// languages; `None` without a semantic-model cosine (the hash embedder, or a note not
    /// embedded yet).
    pub relevance: Option<f64>,
    /// The note is archived (only found when archived notes were asked for).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub archived: bool,
    /// Present when the search asked for it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub explain: Option<ScoreParts>,
    /// Present when the search asked for it and the note has a body, and always for a
    /// message (its summary is only who said it and when).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snippet: Option<String>,
}

/// Hybrid search over the visible notes.
pub fn search(engine: &Engine, req: &SearchRequest) -> Result<Vec<SearchHit>> {
    Ok(search_with_floor(engine, req)?.hits)
}

/// Hybrid search over the visible notes, the filters applied, and how many hits the relevance
/// floor left out when asked for.
pub fn search_with_floor(engine: &Engine, req: &SearchRequest) -> Result<SearchResults> {
    let limit = req.limit.clamp(1, 1000);
    let filtered = !req.types.is_empty()
        || !req.tags.is_empty()
        || req.after.is_some()
        || req.before.is_some();
    let opts = SearchOptions {
        // Filters and the floor are applied to a larger pool, then cut to the limit.
        limit: if filtered || req.relevant_only {
            (limit * 5).clamp(50, 1000)
        } else {
            limit
        },
        mode: req.mode.into(),
        explain: req.explain,
        include_archived: req.archived,
        ..Default::default()
    };
    let mut hits = engine.hybrid_search(&req.query, opts)?;
    if filtered {
        hits.retain(|h| passes(engine, h, req));
    }
    let mut below_floor = 0;
    if req.relevant_only {
        let recall = engine.recall()?;
        let before = hits.len();
        hits.retain(|h| recall.relevant_to_the_message(h));
        below_floor = before - hits.len();
    }
    hits.truncate(limit);
    let hits = hits
        .into_iter()
        .map(|h| SearchHit {
            // A message has no title of its own: what was said is always shown.
            snippet: (req.snippets || crate::said::is_said_key(&h.id))
                .then(|| snippet(engine, &h.scope, &h.id, &req.query))
                .flatten(),
            scope: h.scope,
            id: h.id,
            summary: h.summary,
            note_type: h.note_type,
            score: h.score,
            relevance: h.relevance,
            archived: h.archived,
            explain: h.explain.map(ScoreParts::from),
        })
        .collect();
    Ok(SearchResults { hits, below_floor })
}

/// Whether a hit passes the request's filters: type, tags, and when it was created or said.
fn passes(engine: &Engine, h: &recall::Hit, req: &SearchRequest) -> bool {
    let (note_type, tags, at) = if crate::said::is_message_key(&h.id) {
        match engine.visible_message(&h.id) {
            Ok(m) => (Some(crate::said::MESSAGE_TYPE.to_owned()), Vec::new(), m.at),
            Err(_) => return false,
        }
    } else if crate::said::is_derived_key(&h.id) {
        match engine.visible_derived(&h.id) {
            Ok(d) => (Some(d.kind.as_str().to_owned()), Vec::new(), d.at),
            Err(_) => return false,
        }
    } else if crate::said::is_working_key(&h.id) {
        match engine.visible_working(&h.id) {
            Ok(b) => (
                Some(crate::recall::WORKING_TYPE.to_owned()),
                Vec::new(),
                Some(b.created_at),
            ),
            Err(_) => return false,
        }
    } else {
        let Ok(scope) = Scope::from_key(&h.scope) else {
            return false;
        };
        match engine.resolve(&h.id, Some(&scope)) {
            Ok((_, row)) => (row.note_type, row.tags, row.created_at),
            Err(_) => return false,
        }
    };
    let at = at.unwrap_or(0);
    (req.types.is_empty() || note_type.is_some_and(|t| req.types.contains(&t)))
        && req.tags.iter().all(|t| tags.contains(t))
        && req.after.is_none_or(|a| at >= a)
        && req.before.is_none_or(|b| at <= b)
}

/// The piece of a hit's body an agent's search shows, on one line.
fn snippet(engine: &Engine, scope: &str, id: &str, query: &str) -> Option<String> {
    if crate::said::is_message_key(id) {
        let m = engine.visible_message(id).ok()?;
        return Some(crate::agent::snippet(&m.text, &[query.to_owned()]));
    }
    if crate::said::is_derived_key(id) {
        let d = engine.visible_derived(id).ok()?;
        return Some(crate::agent::snippet(&d.text, &[query.to_owned()]));
    }
    if crate::said::is_working_key(id) {
        let b = engine.visible_working(id).ok()?;
        return Some(crate::agent::snippet(&b.text, &[query.to_owned()]));
    }
    let scope = Scope::from_key(scope).ok()?;
    let (_, row) = engine.resolve(id, Some(&scope)).ok()?;
    Some(crate::agent::snippet(&row.body, &[query.to_owned()])).filter(|s| !s.is_empty())
}

/// A recall block to ask for.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RecallRequest {
    pub message: String,
    /// The block's size in characters (default: scaled to the window).
    pub budget: Option<usize>,
    /// The model's context window in tokens.
    pub window: Option<usize>,
    /// Recall archived notes too (left out otherwise); one recalled leaves the archive.
    pub archived: bool,
}

/// The recall block for one agent turn and what went into it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Recalled {
    pub text: String,
    /// Relevant notes left out for the budget.
    pub not_shown: usize,
    /// The notes in the block.
    pub shown: Vec<NoteRef>,
}

/// The recall block an agent turn gets for `message`.
pub fn recall(engine: &mut Engine, req: &RecallRequest) -> Result<Recalled> {
    let block = engine.recall_block_with(&req.message, req.budget, req.window, req.archived)?;
    Ok(Recalled {
        shown: block.shown.iter().map(NoteRef::from_pair).collect(),
        text: block.text,
        not_shown: block.not_shown,
    })
}
