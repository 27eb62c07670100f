//! Does a relevance mean what it says? For the judged queries' top ten hits: the share that
//! is relevant at each level of predicted relevance, and how often the recall block's floor
//! keeps a right first answer; for nonsense queries, how often their best hit clears it.

use serde::Serialize;

use crate::recall::relevance::BLOCK_FLOOR;

/// One band of predicted relevance.
#[derive(Debug, Serialize, PartialEq)]
pub struct Band {
    pub from: f64,
    pub to: f64,
    pub hits: usize,
    /// Mean predicted relevance in the band.
    pub predicted: f64,
    /// Share of the band's hits that are judged relevant.
    pub observed: f64,
}

#[derive(Debug, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Calibration {
    pub bands: Vec<Band>,
    /// Queries whose first hit is judged relevant and has a relevance.
    pub right_first: usize,
    /// Of those, the share the block's floor keeps.
    pub right_first_kept: f64,
    /// The same per held-out fold, when folds were asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub right_first_kept_per_fold: Option<Vec<f64>>,
    pub nonsense_queries: usize,
    /// Share of nonsense queries whose best hit clears the floor.
    pub nonsense_through: f64,
}

/// One judged query: its fold, and its hits best first as (relevance, judged relevant).
pub type JudgedQuery = (usize, Vec<(Option<f64>, bool)>);

const EDGES: [f64; 7] = [0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0001];

/// `nonsense`: per nonsense query, its hits' relevances.
pub fn calibrate(
    judged: &[JudgedQuery],
    folds: Option<usize>,
    nonsense: &[Vec<Option<f64>>],
) -> Calibration {
    let mut bands: Vec<(usize, f64, usize)> = vec![(0, 0.0, 0); EDGES.len() - 1];
    for (_, hits) in judged {
        for (r, rel) in hits.iter().take(10) {
            let Some(r) = r else { continue };
            let b = EDGES.windows(2).position(|w| *r >= w[0] && *r < w[1]);
            if let Some(b) = b {
                bands[b].0 += 1;
                bands[b].1 += r;
                bands[b].2 += usize::from(*rel);
            }
        }
    }
    let kept = |keep: &dyn Fn(usize) -> bool| -> (usize, f64) {
        let firsts: Vec<f64> = judged
            .iter()
            .filter(|(f, _)| keep(*f))
            .filter_map(|(_, h)| match h.first() {
                Some((Some(r), true)) => Some(*r),
                _ => None,
            })
            .collect();
        let n = firsts.len();
        let share = firsts.iter().filter(|r| **r >= BLOCK_FLOOR).count() as f64 / n.max(1) as f64;
        (n, share)
    };
    let (right_first, right_first_kept) = kept(&|_| true);
    let through = nonsense
        .iter()
        .filter(|h| h.iter().flatten().any(|r| *r >= BLOCK_FLOOR))
        .count();
    Calibration {
        bands: bands
            .iter()
            .enumerate()
            .map(|(i, (n, sum, relevant))| Band {
                from: EDGES[i],
                to: EDGES[i + 1].min(1.0),
                hits: *n,
                predicted: sum / (*n).max(1) as f64,
                observed: *relevant as f64 / (*n).max(1) as f64,
            })
            .collect(),
        right_first,
        right_first_kept,
        right_first_kept_per_fold: folds.map(|k| (0..k).map(|f| kept(&|x| x == f).1).collect()),
        nonsense_queries: nonsense.len(),
        nonsense_through: through as f64 / nonsense.len().max(1) as f64,
    }
}

/// `n` strings of two to four made-up lowercase words, the same on every run.
pub fn nonsense_queries(n: usize) -> Vec<String> {
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move |m: u64| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % m
    };
    (0..n)
        .map(|_| {
            let words = 2 + next(3);
            (0..words)
                .map(|_| {
                    let len = 3 + next(4);
                    (0..len)
                        .map(|_| char::from(b'a' + next(26) as u8))
                        .collect::<String>()
                })
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bands_count_hits_and_the_floor_keeps_right_first_answers() {
        let judged = vec![
            (0, vec![(Some(0.95), true), (Some(0.05), false)]),
            (1, vec![(Some(0.05), true), (Some(0.92), false)]),
            (1, vec![(None, true)]),
        ];
        let nonsense = vec![vec![Some(0.02), None], vec![Some(0.5)]];
        let c = calibrate(&judged, Some(2), &nonsense);
        assert_eq!(c.bands[0].hits, 2);
        assert_eq!(c.bands[0].observed, 0.5);
        assert_eq!(c.bands[5].hits, 2);
        assert_eq!(c.right_first, 2);
        assert_eq!(c.right_first_kept, 0.5);
        assert_eq!(c.right_first_kept_per_fold, Some(vec![1.0, 0.0]));
        assert_eq!(c.nonsense_through, 0.5);
    }

    #[test]
    fn nonsense_queries_are_stable_and_made_of_letters() {
        let a = nonsense_queries(5);
        assert_eq!(a, nonsense_queries(5));
        assert!(
            a.iter().all(|q| q.split(' ').count() >= 2
                && q.chars().all(|c| c == ' ' || c.is_ascii_lowercase()))
        );
    }
}
