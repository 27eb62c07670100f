//! A relevance a person and an agent can read: how likely a note is to answer the query, from
//! how far its cosine stands above the crowd the same query meets.
//!
//! A raw cosine means little on its own: e5's cosines sit in a narrow band whose place moves
//! with the query's language and the notes' (a Spanish question over English notes scores its
//! right answer lower than a nonsense string scores anything), and min-max scaling makes the
//! best hit of any query look certain. What carries across languages is the gap between a
//! note's cosine and the [`CROWD_RANK`]-th best cosine among the vault's notes and a fixed set
//! of everyday sentences: a right answer stands out of that crowd, a nonsense query's best hit
//! does not. The everyday sentences keep the crowd large in a vault of a few notes.
//!
//! The gap becomes a probability through one logistic curve fitted on pooled judged queries
//! (docs/BENCHMARKS.md says on which, and how it holds on held-out folds and other sets).

/// Which best cosine of the crowd the gap is measured from.
pub const CROWD_RANK: usize = 10;

/// Sentences about nothing a vault is likely to be about, in the languages recall is measured
/// on; embedded once per model as passages. They stand in for the crowd of a small vault.
pub const EVERYDAY: [&str; 20] = [
    "The weather was mild this week, with light rain on Tuesday.",
    "Remember to buy milk, eggs and bread on the way home.",
    "The meeting was moved to Thursday afternoon.",
    "She planted tomatoes and basil in the garden.",
    "The train to the city leaves every twenty minutes.",
    "He fixed the bicycle's flat tyre with a patch kit.",
    "The recipe needs two cups of flour and a pinch of salt.",
    "Our team finished the quarterly report ahead of schedule.",
    "The museum opens at ten and closes at six.",
    "I lost my keys again and found them in my coat pocket.",
    "El tren sale de la estación a las ocho de la mañana.",
    "Mañana lloverá en el norte del país.",
    "Compré pan y fruta en el mercado.",
    "La reunión se ha aplazado hasta el lunes.",
    "Mi hermana estudia medicina en la universidad.",
    "今天天气很好，我们去公园散步。",
    "我明天要去超市买菜。",
    "会议改到下周一上午十点。",
    "他每天早上跑步半小时。",
    "这家餐厅的面条很好吃。",
];

/// The logistic curve from gap to probability, fitted for multilingual-e5-small (the model
/// `memoria model install` builds): `p = 1 / (1 + e^−(SLOPE · gap + INTERCEPT))`.
const SLOPE: f64 = 80.16;
const INTERCEPT: f64 = -4.966;

/// The relevance the recall block asks of a note found by meaning: one chance in ten that it
/// answers the message.
pub const BLOCK_FLOOR: f64 = 0.1;

/// The cosine the gap is measured from: the [`CROWD_RANK`]-th best of `crowd` (the vault's best
/// cosines and the everyday sentences'); the lowest when the crowd is smaller.
pub fn reference(mut crowd: Vec<f32>) -> Option<f32> {
    crowd.retain(|c| c.is_finite());
    if crowd.is_empty() {
        return None;
    }
    let k = CROWD_RANK.min(crowd.len());
    crowd.select_nth_unstable_by(k - 1, |a, b| b.total_cmp(a));
    Some(crowd[k - 1])
}

/// The probability that a note of this cosine answers the query, given the crowd's reference.
pub fn relevance(cosine: f32, reference: f32) -> f64 {
    let gap = f64::from(cosine) - f64::from(reference);
    let p = 1.0 / (1.0 + (-(SLOPE * gap + INTERCEPT)).exp());
    // Four decimals are all a reader can use, and they keep outputs stable.
    (p * 1e4).round() / 1e4
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reference_is_the_tenth_best_or_the_lowest_of_a_small_crowd() {
        let crowd: Vec<f32> = (0..30).map(|i| i as f32 / 100.0).collect();
        assert_eq!(reference(crowd), Some(0.20));
        assert_eq!(reference(vec![0.5, 0.7, f32::NAN]), Some(0.5));
        assert_eq!(reference(Vec::new()), None);
    }

    #[test]
    fn a_note_level_with_the_crowd_is_unlikely_and_one_far_above_it_is_likely() {
        assert!(relevance(0.80, 0.80) < 0.01);
        assert!(relevance(0.86, 0.80) > 0.4 && relevance(0.86, 0.80) < 0.6);
        assert!(relevance(0.92, 0.80) > 0.99);
        // Monotone in the gap.
        assert!(relevance(0.84, 0.80) < relevance(0.85, 0.80));
        assert!(relevance(0.70, 0.80) < 0.001);
    }
}
