//! `search` and `recall`.

use anyhow::Result;
use clap::{Args, ValueEnum};
use memoria_engine::api::search::{self, RecallRequest, ScoreParts, SearchMode, SearchRequest};

use super::{Globals, out, outln, print_json};

/// Which retrievers take part in a search.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ModeArg {
    Bm25,
    Vector,
    Hybrid,
}

impl From<ModeArg> for SearchMode {
    fn from(m: ModeArg) -> SearchMode {
        match m {
            ModeArg::Bm25 => SearchMode::Bm25,
            ModeArg::Vector => SearchMode::Vector,
            ModeArg::Hybrid => SearchMode::Hybrid,
        }
    }
}

#[derive(Args, Debug)]
pub struct SearchArgs {
    query: String,
    #[arg(long, default_value_t = 10)]
    limit: usize,
    /// Show the parts of each result's score.
    #[arg(long)]
    explain: bool,
    #[arg(long, value_enum, default_value_t = ModeArg::Hybrid)]
    mode: ModeArg,
    /// Search archived notes too (notes nobody recalled, opened or edited for long).
    #[arg(long)]
    archived: bool,
    /// Only notes of this type (repeat for several; `message` for what was said).
    #[arg(long = "type", value_name = "TYPE")]
    types: Vec<String>,
    /// Only notes carrying this tag (repeat: all of them).
    #[arg(long = "tag", value_name = "TAG")]
    tags: Vec<String>,
    /// Only notes created (messages said) on or after this date (YYYY-MM-DD or RFC 3339).
    #[arg(long, value_name = "DATE")]
    after: Option<String>,
    /// Only notes created (messages said) on or before this date (YYYY-MM-DD or RFC 3339).
    #[arg(long, value_name = "DATE")]
    before: Option<String>,
    /// List every hit, also those unlikely to answer (the list stops at the recall block's
    /// relevance floor otherwise; `--json` always lists every hit).
    #[arg(long)]
    all: bool,
}

fn date_arg(flag: &str, value: Option<&str>) -> Result<Option<i64>> {
    value
        .map(|v| {
            memoria_engine::backup::time_to_ms(v).ok_or_else(|| {
                anyhow::anyhow!(
                    "--{flag} {v:?} is not a date: give YYYY-MM-DD or 2024-05-08T13:56:00Z"
                )
            })
        })
        .transpose()
}

pub fn search(g: &Globals, a: &SearchArgs) -> Result<()> {
    let req = SearchRequest {
        query: a.query.clone(),
        limit: a.limit,
        mode: a.mode.into(),
        explain: a.explain,
        snippets: false,
        archived: a.archived,
        relevant_only: !a.all && !g.json,
        types: a.types.clone(),
        tags: a.tags.clone(),
        after: date_arg("after", a.after.as_deref())?,
        before: date_arg("before", a.before.as_deref())?,
    };
    let found = search::search_with_floor(&g.location.open()?, &req)?;
    let hits = found.hits;
    if g.json {
        return print_json(&hits);
    }
    if hits.is_empty() {
        outln!("no matches");
    } else {
        // Ranked by the score (words, meaning, trust, age and use); "relevant" is how likely
        // each hit answers the query, where the semantic model can tell.
        outln!(" score  relevant");
    }
    for h in &hits {
        let kind = h.scope.split(':').next().unwrap_or("");
        // How likely the note answers the query, where the semantic model can tell.
        let relevance = h
            .relevance
            .map_or_else(|| "–".to_owned(), |r| format!("{:.0}%", r * 100.0));
        let archived = if h.archived { "  (archived)" } else { "" };
        outln!(
            "{:>6.3}  {relevance:>8}  vt:{kind}/{:<32} {}{archived}",
            h.score,
            h.id,
            h.summary
        );
        // What was said, or what was derived from it, has no title of its own.
        if let (Some(said), true) = (&h.snippet, memoria_engine::said::is_said_key(&h.id)) {
            outln!("        “{said}”");
        }
        if let Some(x) = &h.explain {
            outln!("        {}", explain_line(x));
        }
    }
    if found.below_floor > 0 {
        outln!(
            "{} unlikely to answer not shown (--all lists them)",
            memoria_engine::counted(found.below_floor, "more hit")
        );
    }
    Ok(())
}

/// The parts of a score in numbers and words.
pub fn explain_line(x: &ScoreParts) -> String {
    let bm25 = match (x.bm25_rank, x.bm25_score) {
        (Some(r), _) if x.other_language => {
            format!("words: rank {r}, not counted (the note is in another language)")
        }
        (Some(r), Some(s)) => format!("words: rank {r}, bm25 {s:.3}"),
        (Some(r), None) => format!("words: rank {r}"),
        (None, _) => "words: no match".to_owned(),
    };
    let vector = match (x.vector_rank, x.cosine) {
        (Some(r), Some(c)) => format!("meaning: rank {r}, cosine {c:.3}"),
        (Some(r), None) => format!("meaning: rank {r}"),
        (None, _) => "meaning: no match".to_owned(),
    };
    let fusion = match (x.vector_weight, x.coverage) {
        (Some(w), Some(c)) => format!(
            " (meaning weighs {w:.2}; {:.0} % of the query's words are in the notes)",
            c * 100.0
        ),
        (Some(w), None) => format!(" (meaning weighs {w:.2})"),
        _ => String::new(),
    };
    // Shown only for a note something else replaced, as most notes stand at 1.
    let standing = if x.standing < 1.0 {
        format!(" × replaced {:.2}", x.standing)
    } else {
        String::new()
    };
    format!(
        "{bm25} · {vector} · fused {:.3}{fusion} × decay {:.2} × trust {:.2} × importance {:.2} × access {:.2}{standing}",
        x.fused, x.decay, x.trust, x.importance, x.access
    )
}

#[derive(Args, Debug)]
pub struct RecallArgs {
    message: String,
    /// The block's size in characters (default: 2,400 scaled to --window).
    #[arg(long)]
    budget: Option<usize>,
    /// The model's context window in tokens (default 100,000).
    #[arg(long)]
    window: Option<usize>,
    /// Recall archived notes too (notes nobody recalled, opened or edited for long); one
    /// recalled this way leaves the archive.
    #[arg(long)]
    archived: bool,
}

pub fn recall(g: &Globals, a: &RecallArgs) -> Result<()> {
    let req = RecallRequest {
        message: a.message.clone(),
        budget: a.budget,
        window: a.window,
        archived: a.archived,
    };
    let block = search::recall(&mut g.location.open()?, &req)?;
    if g.json {
        return print_json(&block);
    }
    out!("{}", block.text);
    Ok(())
}
