//! The in-memory vector index: every chunk vector of every document, quantized to int8 with
//! one scale per row (a quarter of f32's memory), searched exhaustively. At this app's sizes
//! (up to a hundred thousand notes) a full scan is fast enough and needs no approximate
//! structure that could miss a note.

use std::collections::HashMap;

use super::embed::DIM;
use super::relevance::CROWD_RANK;

#[derive(Debug, Default)]
pub struct VectorIndex {
    /// Row → owning document slot.
    row_doc: Vec<u32>,
    /// Row-major int8 vectors, `DIM` per row.
    data: Vec<i8>,
    /// Row → dequantization scale.
    scale: Vec<f32>,
    /// Document slot → (key, hash of the content the rows were made from, alive, rows).
    slots: Vec<(String, String, bool, usize)>,
    by_key: HashMap<String, u32>,
    dead_rows: usize,
}

fn quantize(v: &[f32]) -> (Vec<i8>, f32) {
    let max = v.iter().fold(0f32, |m, x| m.max(x.abs()));
    if max == 0.0 {
        return (vec![0; v.len()], 0.0);
    }
    let s = max / 127.0;
    (v.iter().map(|x| (x / s).round() as i8).collect(), s)
}

impl VectorIndex {
    pub fn len_docs(&self) -> usize {
        self.by_key.len()
    }

    /// The keys of every document with vectors.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.by_key.keys().map(String::as_str)
    }

    /// The content hash whose vectors the document has, if any.
    pub fn hash_of(&self, key: &str) -> Option<&str> {
        self.by_key
            .get(key)
            .map(|s| self.slots[*s as usize].1.as_str())
    }

    /// Replaces a document's vectors.
    pub fn insert(&mut self, key: &str, hash: &str, vecs: &[Vec<f32>]) {
        self.remove(key);
        let slot = self.slots.len() as u32;
        let rows = vecs.iter().filter(|v| v.len() == DIM).count();
        self.slots
            .push((key.to_owned(), hash.to_owned(), true, rows));
        self.by_key.insert(key.to_owned(), slot);
        for v in vecs.iter().filter(|v| v.len() == DIM) {
            let (q, s) = quantize(v);
            self.data.extend_from_slice(&q);
            self.scale.push(s);
            self.row_doc.push(slot);
        }
    }

    pub fn remove(&mut self, key: &str) {
        if let Some(slot) = self.by_key.remove(key) {
            self.slots[slot as usize].2 = false;
            self.dead_rows += self.slots[slot as usize].3;
            if self.dead_rows > 1024 && self.dead_rows * 2 > self.row_doc.len() {
                self.compact();
            }
        }
    }

    fn compact(&mut self) {
        let mut fresh = VectorIndex::default();
        let mut rows_of: HashMap<u32, Vec<usize>> = HashMap::new();
        for (r, d) in self.row_doc.iter().enumerate() {
            rows_of.entry(*d).or_default().push(r);
        }
        for (slot, (key, hash, alive, rows)) in self.slots.iter().enumerate() {
            if !alive {
                continue;
            }
            let new_slot = fresh.slots.len() as u32;
            fresh.slots.push((key.clone(), hash.clone(), true, *rows));
            fresh.by_key.insert(key.clone(), new_slot);
            for r in rows_of.get(&(slot as u32)).into_iter().flatten() {
                fresh
                    .data
                    .extend_from_slice(&self.data[r * DIM..(r + 1) * DIM]);
                fresh.scale.push(self.scale[*r]);
                fresh.row_doc.push(new_slot);
            }
        }
        *self = fresh;
    }

    /// The best `limit` documents by their best chunk's cosine with `query`, among keys that
    /// `admit` accepts.
    pub fn search(
        &self,
        query: &[f32],
        limit: usize,
        admit: impl Fn(&str) -> bool,
    ) -> Vec<(String, f32)> {
        self.search_with_crowd(query, limit, admit).0
    }

    /// [`VectorIndex::search`], and the best [`CROWD_RANK`] cosines among every live document
    /// (admitted or not), best first: the crowd a relevance is measured against.
    pub fn search_with_crowd(
        &self,
        query: &[f32],
        limit: usize,
        admit: impl Fn(&str) -> bool,
    ) -> (Vec<(String, f32)>, Vec<f32>) {
        if query.len() != DIM || limit == 0 {
            return (Vec::new(), Vec::new());
        }
        let (q, qs) = quantize(query);
        if qs == 0.0 {
            return (Vec::new(), Vec::new());
        }
        // Score every live document by its best chunk; the admission rules (scope, secrets,
        // trust: hash-map lookups) run afterwards on the best few only.
        let mut best = vec![f32::NEG_INFINITY; self.slots.len()];
        for (r, row) in self.data.chunks_exact(DIM).enumerate() {
            let slot = self.row_doc[r] as usize;
            if !self.slots[slot].2 {
                continue;
            }
            let score = dot(row, &q) as f32 * qs * self.scale[r];
            if score > best[slot] {
                best[slot] = score;
            }
        }
        let mut hits: Vec<(u32, f32)> = best
            .iter()
            .enumerate()
            .filter(|(_, s)| s.is_finite())
            .map(|(i, s)| (i as u32, *s))
            .collect();
        // Take the best candidates in growing rounds until `limit` of them are admitted (or
        // every candidate was looked at).
        let mut take = (limit * 2).max(64).max(CROWD_RANK);
        loop {
            let k = take.min(hits.len());
            if k == 0 {
                return (Vec::new(), Vec::new());
            }
            hits.select_nth_unstable_by(k - 1, |a, b| b.1.total_cmp(&a.1));
            hits[..k].sort_by(|a, b| b.1.total_cmp(&a.1));
            let admitted: Vec<(String, f32)> = hits[..k]
                .iter()
                .filter(|(slot, _)| admit(&self.slots[*slot as usize].0))
                .take(limit)
                .map(|(slot, s)| (self.slots[*slot as usize].0.clone(), *s))
                .collect();
            if admitted.len() == limit || k == hits.len() {
                let crowd = hits[..k.min(CROWD_RANK)].iter().map(|h| h.1).collect();
                return (admitted, crowd);
            }
            take = take.saturating_mul(4);
        }
    }

    /// The document's first chunk vector, dequantized (for MMR's similarity between results).
    pub fn first_vector(&self, key: &str) -> Option<Vec<f32>> {
        let slot = *self.by_key.get(key)?;
        let r = self.row_doc.iter().position(|d| *d == slot)?;
        Some(
            self.data[r * DIM..(r + 1) * DIM]
                .iter()
                .map(|x| f32::from(*x) * self.scale[r])
                .collect(),
        )
    }
}

/// Dot product of two int8 vectors, written so the compiler vectorizes it (16 lanes of
/// i16 products summed into i32 — `pmaddwd` on x86, `sdot`-like on ARM). Never inlined:
/// inlined into `search`'s loop it compiles to one scalar multiply per byte, which makes
/// hybrid search markedly slower (docs/BENCHMARKS.md).
#[inline(never)]
fn dot(a: &[i8], b: &[i8]) -> i32 {
    let mut acc = [0i32; 16];
    let (ca, cb) = (a.chunks_exact(16), b.chunks_exact(16));
    let tail: i32 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, y)| i32::from(*x) * i32::from(*y))
        .sum();
    for (x, y) in ca.zip(cb) {
        // Fixed-size arrays: no bounds checks left in the loop.
        let (x, y): (&[i8; 16], &[i8; 16]) = (
            x.try_into().expect("chunks of 16"),
            y.try_into().expect("chunks of 16"),
        );
        for i in 0..16 {
            acc[i] += i32::from(i16::from(x[i]) * i16::from(y[i]));
        }
    }
    acc.iter().sum::<i32>() + tail
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(i: usize) -> Vec<f32> {
        let mut v = vec![0.0; DIM];
        v[i] = 1.0;
        v
    }

    #[test]
    fn dot_matches_the_plain_sum_at_every_length() {
        for len in [0, 1, 15, 16, 17, 384, 390] {
            let a: Vec<i8> = (0..len).map(|i| ((i * 37) % 255) as i8).collect();
            let b: Vec<i8> = (0..len).map(|i| (127 - (i * 11) % 255) as i8).collect();
            let plain: i32 = a
                .iter()
                .zip(&b)
                .map(|(x, y)| i32::from(*x) * i32::from(*y))
                .sum();
            assert_eq!(dot(&a, &b), plain, "len {len}");
        }
        assert_eq!(dot(&[-128; 32], &[-128; 32]), 32 * 16384);
    }

    #[test]
    fn admission_looks_past_the_first_candidates_when_they_are_hidden() {
        let mut ix = VectorIndex::default();
        // 300 hidden notes closer to the query than the 3 visible ones.
        for i in 0..300 {
            let mut v = unit(0);
            v[1] = 0.01 * (i % 7) as f32;
            ix.insert(&format!("hidden{i}"), "h", &[v]);
        }
        for i in 0..3 {
            let mut v = unit(1);
            v[0] = 0.5 + 0.1 * i as f32;
            ix.insert(&format!("seen{i}"), "h", &[v]);
        }
        let hits = ix.search(&unit(0), 2, |k| k.starts_with("seen"));
        let keys: Vec<&str> = hits.iter().map(|h| h.0.as_str()).collect();
        assert_eq!(keys, vec!["seen2", "seen1"]);
        assert!(ix.search(&unit(0), 5, |_| false).is_empty());
    }

    #[test]
    fn the_crowd_is_the_best_cosines_of_every_live_note_admitted_or_not() {
        let mut ix = VectorIndex::default();
        for i in 0..30 {
            let angle = 0.05 * i as f32;
            let mut v = unit(0);
            v[0] = angle.cos();
            v[1] = angle.sin();
            ix.insert(&format!("n{i}"), "h", &[v]);
        }
        let (hits, crowd) = ix.search_with_crowd(&unit(0), 3, |k| k == "n29");
        assert_eq!(hits.len(), 1);
        assert_eq!(crowd.len(), CROWD_RANK);
        // Best first, and the hidden nearest notes are in it.
        assert!(crowd.windows(2).all(|w| w[0] >= w[1]), "{crowd:?}");
        assert!(crowd[0] > hits[0].1, "{crowd:?} {hits:?}");
    }

    #[test]
    fn best_chunk_scores_the_document_and_filters_apply() {
        let mut ix = VectorIndex::default();
        ix.insert("a", "h1", &[unit(0), unit(1)]);
        ix.insert("b", "h2", &[unit(2)]);
        let hits = ix.search(&unit(1), 10, |_| true);
        assert_eq!(hits[0].0, "a");
        assert!((hits[0].1 - 1.0).abs() < 0.01);
        let hits = ix.search(&unit(1), 10, |k| k != "a");
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].0, "b");
        ix.insert("a", "h3", &[unit(2)]);
        assert_eq!(ix.hash_of("a"), Some("h3"));
        let hits = ix.search(&unit(1), 10, |_| true);
        assert!(hits.iter().all(|h| h.1 < 0.01), "{hits:?}");
        ix.remove("a");
        assert_eq!(ix.search(&unit(2), 10, |_| true).len(), 1);
        assert!(ix.search(&[1.0; 3], 10, |_| true).is_empty());
    }

    #[test]
    fn compaction_keeps_live_rows() {
        let mut ix = VectorIndex::default();
        for i in 0..3000 {
            ix.insert(&format!("k{i}"), "h", &[unit(i % DIM)]);
        }
        for i in 0..2500 {
            ix.remove(&format!("k{i}"));
        }
        assert_eq!(ix.len_docs(), 500);
        assert!(ix.slots.len() < 3000, "compacted");
        let hits = ix.search(&unit(2999 % DIM), 1, |_| true);
        assert_eq!(hits[0].1.round(), 1.0);
        assert!(ix.first_vector("k2999").is_some());
    }
}
