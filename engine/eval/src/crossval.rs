//! Cross-validation over queries: every number reported for a tuned setting comes from queries
//! its tuning never saw. Queries are split into K folds by a hash of their id (the same split on
//! every run and machine); a setting is chosen on K−1 folds and scored on the one left out.

/// The fold (0-based, of `k`) a query belongs to.
pub fn fold_of(query_id: &str, k: usize) -> usize {
    let h = memoria_shared::hash::sha256_hex(query_id.as_bytes());
    let n = u64::from_str_radix(&h[..15], 16).unwrap_or(0);
    (n % k.max(1) as u64) as usize
}

/// Mean of `scores` (one per query) over the queries of each fold; a fold with no query is
/// left out.
pub fn per_fold(scores: &[f64], folds: &[usize], k: usize) -> Vec<f64> {
    (0..k)
        .filter_map(|f| mean_of(scores, folds, |q| q == f))
        .collect()
}

fn mean_of(scores: &[f64], folds: &[usize], keep: impl Fn(usize) -> bool) -> Option<f64> {
    let (sum, n) = scores
        .iter()
        .zip(folds)
        .filter(|(_, f)| keep(**f))
        .fold((0.0, 0usize), |(s, n), (x, _)| (s + x, n + 1));
    (n > 0).then(|| sum / n as f64)
}

/// One held-out fold of a tuned setting: which candidate the other folds chose, and its score
/// on this fold.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct TunedFold {
    pub fold: usize,
    pub chosen: String,
    pub held_out: f64,
}

/// For each fold, the candidate (label, per-query scores) with the best mean over the other
/// folds, scored on that fold. Ties go to the earlier candidate.
pub fn tune(candidates: &[(String, Vec<f64>)], folds: &[usize], k: usize) -> Vec<TunedFold> {
    let mut out = Vec::new();
    for f in 0..k {
        let mut best: Option<(&str, f64, f64)> = None;
        for (label, scores) in candidates {
            let (Some(train), Some(test)) = (
                mean_of(scores, folds, |q| q != f),
                mean_of(scores, folds, |q| q == f),
            ) else {
                continue;
            };
            if best.is_none_or(|b| train > b.1) {
                best = Some((label, train, test));
            }
        }
        if let Some((label, _, test)) = best {
            out.push(TunedFold {
                fold: f,
                chosen: label.to_owned(),
                held_out: test,
            });
        }
    }
    out
}

/// Mean and sample standard deviation.
pub fn mean_sd(v: &[f64]) -> (f64, f64) {
    if v.is_empty() {
        return (0.0, 0.0);
    }
    let m = v.iter().sum::<f64>() / v.len() as f64;
    if v.len() < 2 {
        return (m, 0.0);
    }
    let var = v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (v.len() - 1) as f64;
    (m, var.sqrt())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folds_are_stable_and_balanced() {
        let ids: Vec<String> = (0..1000).map(|i| format!("q{i}")).collect();
        let folds: Vec<usize> = ids.iter().map(|q| fold_of(q, 5)).collect();
        assert_eq!(folds, ids.iter().map(|q| fold_of(q, 5)).collect::<Vec<_>>());
        for f in 0..5 {
            let n = folds.iter().filter(|x| **x == f).count();
            assert!((150..250).contains(&n), "fold {f} has {n}");
        }
    }

    #[test]
    fn a_setting_is_scored_only_on_queries_it_was_not_chosen_on() {
        // Four queries, two folds. "a" is great on fold 0 only, "b" on fold 1 only: each fold's
        // choice is made on the other fold, so it is the wrong one, and the held-out score shows it.
        let folds = vec![0, 0, 1, 1];
        let candidates = vec![
            ("a".to_string(), vec![1.0, 1.0, 0.0, 0.0]),
            ("b".to_string(), vec![0.0, 0.0, 1.0, 1.0]),
        ];
        let t = tune(&candidates, &folds, 2);
        assert_eq!(
            t,
            vec![
                TunedFold {
                    fold: 0,
                    chosen: "b".into(),
                    held_out: 0.0
                },
                TunedFold {
                    fold: 1,
                    chosen: "a".into(),
                    held_out: 0.0
                },
            ]
        );
        assert_eq!(per_fold(&candidates[0].1, &folds, 2), vec![1.0, 0.0]);
        let (m, sd) = mean_sd(&[1.0, 0.0]);
        assert!((m - 0.5).abs() < 1e-12 && (sd - 0.5f64.sqrt()).abs() < 1e-12);
    }
}
