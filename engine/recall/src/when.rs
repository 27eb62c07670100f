//! Time expressions in a query ("last May", "two weeks ago", "hace un mes", "上个月"): the
//! window of time they name, relative to now, so what was said then can be ranked first.
//! A few fixed forms in English, Spanish, German, French and Chinese; anything else names no
//! window. Times are UTC days.

use memoria_store::backup::{day_ms as day_start, ymd as civil};

const DAY: i64 = 86_400_000;

/// `[start, end)` in ms since the epoch.
pub type Window = (i64, i64);

const MONTHS: [[&str; 4]; 12] = [
    ["january", "enero", "januar", "janvier"],
    ["february", "febrero", "februar", "février"],
    ["march", "marzo", "märz", "mars"],
    ["april", "abril", "april", "avril"],
    ["may", "mayo", "mai", "mai"],
    ["june", "junio", "juni", "juin"],
    ["july", "julio", "juli", "juillet"],
    ["august", "agosto", "august", "août"],
    ["september", "septiembre", "september", "septembre"],
    ["october", "octubre", "oktober", "octobre"],
    ["november", "noviembre", "november", "novembre"],
    ["december", "diciembre", "dezember", "décembre"],
];

fn month_window(y: i64, m: i64) -> Window {
    let (ny, nm) = if m == 12 { (y + 1, 1) } else { (y, m + 1) };
    (day_start(y, m, 1), day_start(ny, nm, 1))
}

fn number(word: &str) -> Option<i64> {
    if let Ok(n) = word.parse::<i64>() {
        return (1..=1000).contains(&n).then_some(n);
    }
    Some(match word {
        "a" | "an" | "one" | "un" | "una" | "uno" | "einem" | "einer" | "eine" | "une" => 1,
        "two" | "dos" | "zwei" | "deux" | "couple" => 2,
        "three" | "tres" | "drei" | "trois" => 3,
        "four" | "cuatro" | "vier" | "quatre" => 4,
        "five" | "cinco" | "fünf" | "cinq" => 5,
        "six" | "seis" | "sechs" => 6,
        "ten" | "diez" | "zehn" | "dix" => 10,
        _ => return None,
    })
}

/// Days in a unit word, if it is one.
fn unit_days(word: &str) -> Option<i64> {
    unit_days_of(word).or_else(|| unit_days_of(word.strip_suffix('s')?))
}

fn unit_days_of(word: &str) -> Option<i64> {
    Some(match word {
        "day" | "día" | "dia" | "tag" | "tage" | "tagen" | "jour" => 1,
        "week" | "semana" | "woche" | "wochen" | "semaine" => 7,
        "month" | "mes" | "mese" | "monat" | "monate" | "monaten" | "mois" => 30,
        "year" | "año" | "ano" | "jahr" | "jahre" | "jahren" | "an" | "année" => 365,
        _ => return None,
    })
}

/// The window of time `query` names, relative to `now_ms`, if it names one.
pub fn window(query: &str, now_ms: i64) -> Option<Window> {
    let q = query.to_lowercase();
    let today = now_ms.div_euclid(DAY) * DAY;
    let (y, m, _) = civil(now_ms);
    let last_month = month_window(
        if m == 1 { y - 1 } else { y },
        if m == 1 { 12 } else { m - 1 },
    );
    let last_week = (today - 14 * DAY, today - 6 * DAY);
    let last_year = (day_start(y - 1, 1, 1), day_start(y, 1, 1));
    // Chinese forms first: they are not split into words.
    for (needle, w) in [
        ("昨天", (today - DAY, today)),
        ("今天", (today, today + DAY)),
        ("上周", last_week),
        ("上星期", last_week),
        ("上个月", last_month),
        ("去年", last_year),
    ] {
        if q.contains(needle) {
            return Some(w);
        }
    }
    if let Some(i) = q.find("天前")
        && let Some(n) = q[..i]
            .chars()
            .rev()
            .take_while(char::is_ascii_digit)
            .collect::<String>()
            .chars()
            .rev()
            .collect::<String>()
            .parse::<i64>()
            .ok()
    {
        return Some((today - (n + 1) * DAY, today - n * DAY + DAY));
    }
    let words: Vec<&str> = q
        .split(|c: char| !(c.is_alphanumeric()))
        .filter(|w| !w.is_empty())
        .collect();
    let has = |w: &str| words.contains(&w);
    let pair = |a: &str, b: &str| words.windows(2).any(|p| p[0] == a && p[1] == b);
    if has("yesterday") || has("ayer") || has("gestern") || has("hier") {
        return Some((today - DAY, today));
    }
    if has("today") || has("hoy") || has("heute") || has("aujourd") {
        return Some((today, today + DAY));
    }
    if pair("last", "week")
        || pair("semana", "pasada")
        || pair("letzte", "woche")
        || pair("semaine", "dernière")
    {
        return Some(last_week);
    }
    if pair("last", "month")
        || pair("mes", "pasado")
        || pair("letzten", "monat")
        || pair("mois", "dernier")
    {
        return Some(last_month);
    }
    if pair("last", "year")
        || pair("año", "pasado")
        || pair("letztes", "jahr")
        || pair("année", "dernière")
    {
        return Some(last_year);
    }
    // "N units ago", "hace N unidades", "vor N Einheiten", "il y a N unités": around that day.
    for (i, w) in words.iter().enumerate() {
        let (n, unit) = match *w {
            "ago" if i >= 2 => (words[i - 2], words[i - 1]),
            "hace" | "vor" if i + 2 < words.len() => (words[i + 1], words[i + 2]),
            "a" if i >= 1 && words[i - 1] == "y" && i + 2 < words.len() => {
                (words[i + 1], words[i + 2])
            }
            _ => continue,
        };
        if let (Some(n), Some(days)) = (number(n), unit_days(unit)) {
            let back = n * days;
            let slack = (days / 2).max(1) * n.min(3);
            return Some((
                today - (back + slack) * DAY,
                today - (back - slack - 1) * DAY,
            ));
        }
    }
    // A month by name, with a year ("May 2023", "mayo de 2023") or without (the latest one
    // before now); a year alone ("in 2023").
    let year_in = |from: usize| {
        words
            .iter()
            .skip(from)
            .take(3)
            .filter_map(|w| w.parse::<i64>().ok())
            .find(|n| (1900..=2200).contains(n))
    };
    for (i, w) in words.iter().enumerate() {
        if let Some(mi) = MONTHS.iter().position(|names| names.contains(w)) {
            // "may" is also a verb: only with a year, or after "in", "last", "en", "im".
            let mo = mi as i64 + 1;
            let year = year_in(i + 1);
            let cue = i > 0
                && matches!(
                    words[i - 1],
                    "in" | "last" | "en" | "im" | "de" | "since" | "during"
                );
            if *w == "may" && year.is_none() && !cue {
                continue;
            }
            let year = year.unwrap_or(if mo <= m { y } else { y - 1 });
            return Some(month_window(year, mo));
        }
    }
    for (i, w) in words.iter().enumerate() {
        if let Ok(n) = w.parse::<i64>()
            && (1900..=2200).contains(&n)
            && i > 0
            && matches!(words[i - 1], "in" | "en" | "im" | "during" | "of" | "de")
        {
            return Some((day_start(n, 1, 1), day_start(n + 1, 1, 1)));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(y: i64, m: i64, d: i64) -> i64 {
        day_start(y, m, d)
    }

    #[test]
    fn names_the_window_of_common_expressions() {
        let now = at(2024, 6, 15) + 10 * 3_600_000;
        assert_eq!(civil(now), (2024, 6, 15));
        assert_eq!(
            window("what did we decide yesterday?", now),
            Some((at(2024, 6, 14), at(2024, 6, 15)))
        );
        assert_eq!(
            window("what did Ana say last May", now),
            Some((at(2024, 5, 1), at(2024, 6, 1)))
        );
        assert_eq!(
            window("the plan in July", now),
            Some((at(2023, 7, 1), at(2023, 8, 1)))
        );
        assert_eq!(
            window("budget of May 2023", now),
            Some((at(2023, 5, 1), at(2023, 6, 1)))
        );
        assert_eq!(
            window("qué dijimos el mes pasado", now),
            Some((at(2024, 5, 1), at(2024, 6, 1)))
        );
        assert_eq!(
            window("上个月的会议", now),
            Some((at(2024, 5, 1), at(2024, 6, 1)))
        );
        assert_eq!(
            window("what happened in 2022", now),
            Some((at(2022, 1, 1), at(2023, 1, 1)))
        );
        let (start, end) = window("hace un mes hablamos del viaje", now).unwrap();
        assert!(
            start <= at(2024, 5, 16) && end > at(2024, 5, 16),
            "{start} {end}"
        );
        let (start, end) = window("two weeks ago we met", now).unwrap();
        assert!(start <= at(2024, 6, 1) && end > at(2024, 6, 1));
        assert_eq!(
            window("what did we decide last week", now),
            Some((at(2024, 6, 1), at(2024, 6, 9)))
        );
    }

    #[test]
    fn ordinary_questions_name_no_window() {
        let now = at(2024, 6, 15);
        for q in [
            "may I deploy on Friday?",
            "how do we deploy",
            "the 2000 line limit",
            "what is Ana's phone number",
        ] {
            assert_eq!(window(q, now), None, "{q}");
        }
    }
}
