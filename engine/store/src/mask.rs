//! The masking classes: values that identify a person or their money — IBANs, payment card
//! numbers, phone numbers, email addresses — replaced by the class's name (`[IBAN]`) in text
//! that leaves this machine for a remote model. Dates are kept: a date is never read as a
//! phone or card number. The credential guard is another matter: text holding a secret is
//! never sent at all, masked or not.
//!
//! [`mask`] checks its own work: once every value is replaced, the text is scanned again, and
//! a value any class still finds fails the masking (the caller then sends nothing).

use std::sync::LazyLock;

use regex::Regex;

/// A class of values that are masked, with the placeholder that replaces them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Class {
    pub name: &'static str,
    pub placeholder: &'static str,
}

pub const IBAN: Class = Class {
    name: "iban",
    placeholder: "[IBAN]",
};
pub const CARD: Class = Class {
    name: "card",
    placeholder: "[CARD]",
};
pub const PHONE: Class = Class {
    name: "phone",
    placeholder: "[PHONE]",
};
pub const EMAIL: Class = Class {
    name: "email",
    placeholder: "[EMAIL]",
};

/// Every class, in the order they are applied (the most specific first, so an IBAN's digits
/// are never read as a phone number).
pub const CLASSES: [Class; 4] = [EMAIL, IBAN, CARD, PHONE];

/// Why masking failed: a value of this class was still found after masking.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MaskFailed {
    pub class: &'static str,
}

impl std::fmt::Display for MaskFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "a value of the masking class `{}` was still found after masking",
            self.class
        )
    }
}

static EMAIL_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\b[a-z0-9._%+-]+@[a-z0-9-]+(?:\.[a-z0-9-]+)*\.[a-z]{2,}\b")
        .expect("email rule compiles")
});

/// A country code, two check digits and 11 to 30 letters or digits, in groups of four or not.
static IBAN_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\b[A-Z]{2}[0-9]{2}(?: ?[A-Z0-9]){11,30}\b").expect("IBAN rule compiles")
});

/// 13 to 19 digits, in groups separated by single spaces or hyphens.
static CARD_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\b[0-9](?:[ -]?[0-9]){12,18}\b").expect("card rule compiles"));

/// A phone number: an optional `+` and country code, then digits in groups separated by
/// spaces, dots, hyphens or parentheses; at least 7 digits with a `+`, else at least 9.
static PHONE_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?:\+|\b00)?\(?[0-9]{1,4}\)?(?:[ .-]?\(?[0-9]{1,4}\)?){2,6}\b")
        .expect("phone rule compiles")
});

/// Dates, which are kept: `2025-06-01`, `01/06/2025`, `1.6.2025`, `2025/06/01`, with a time.
static DATE_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^(?:[0-9]{4}[-/.][0-9]{1,2}[-/.][0-9]{1,2}|[0-9]{1,2}[-/.][0-9]{1,2}[-/.][0-9]{2,4})(?:[ T][0-9]{1,2}:[0-9]{2}(?::[0-9]{2})?)?$",
    )
    .expect("date rule compiles")
});

fn digits(s: &str) -> String {
    s.chars().filter(char::is_ascii_digit).collect()
}

/// The IBAN check: the country and check digits moved to the end, letters as numbers, the
/// whole modulo 97 is 1.
fn iban_valid(candidate: &str) -> bool {
    let compact: String = candidate.chars().filter(|c| !c.is_whitespace()).collect();
    if !(15..=34).contains(&compact.len()) {
        return false;
    }
    let (head, tail) = compact.split_at(4);
    let mut rem: u32 = 0;
    for c in tail.chars().chain(head.chars()) {
        let v = match c {
            '0'..='9' => c as u32 - '0' as u32,
            'A'..='Z' => c as u32 - 'A' as u32 + 10,
            _ => return false,
        };
        rem = if v >= 10 {
            (rem * 100 + v) % 97
        } else {
            (rem * 10 + v) % 97
        };
    }
    rem == 1
}

/// The Luhn check every payment card number passes.
fn luhn_valid(number: &str) -> bool {
    let d = digits(number);
    if !(13..=19).contains(&d.len()) {
        return false;
    }
    let sum: u32 = d
        .bytes()
        .rev()
        .enumerate()
        .map(|(i, b)| {
            let n = u32::from(b - b'0');
            if i % 2 == 1 {
                let twice = n * 2;
                if twice > 9 { twice - 9 } else { twice }
            } else {
                n
            }
        })
        .sum();
    sum.is_multiple_of(10)
}

fn is_phone(candidate: &str) -> bool {
    let t = candidate.trim();
    if DATE_RE.is_match(t) {
        return false;
    }
    let n = digits(t).len();
    let plus = t.starts_with('+') || t.starts_with("00");
    let grouped = t.contains([' ', '-', '.', '(']);
    // A bare run of digits is a number, not a phone, unless it has a country code.
    (plus && (7..=15).contains(&n)) || (grouped && (9..=15).contains(&n))
}

/// Whether a class's rule matches `m` as a value of that class (its check digits, a date).
fn is_value(class: Class, m: &str) -> bool {
    match class.name {
        "email" => true,
        "iban" => iban_valid(m),
        "card" => !DATE_RE.is_match(m.trim()) && luhn_valid(m),
        _ => is_phone(m),
    }
}

fn rule(class: Class) -> &'static Regex {
    match class.name {
        "email" => &EMAIL_RE,
        "iban" => &IBAN_RE,
        "card" => &CARD_RE,
        _ => &PHONE_RE,
    }
}

/// `text` with every value of `class` replaced by its placeholder.
fn replace(text: &str, class: Class) -> String {
    rule(class)
        .replace_all(text, |c: &regex::Captures<'_>| {
            let m = &c[0];
            if is_value(class, m) {
                class.placeholder.to_owned()
            } else {
                m.to_owned()
            }
        })
        .into_owned()
}

/// The first class with a value in `text`, if any.
pub fn find(text: &str) -> Option<Class> {
    CLASSES
        .into_iter()
        .find(|c| rule(*c).find_iter(text).any(|m| is_value(*c, m.as_str())))
}

/// `text` with the values of every masking class replaced (dates kept), checked afterwards:
/// a value still found is a failure, and nothing of the text may be sent.
pub fn mask(text: &str) -> Result<String, MaskFailed> {
    let mut out = text.to_owned();
    for class in CLASSES {
        out = replace(&out, class);
    }
    match find(&out) {
        Some(c) => Err(MaskFailed { class: c.name }),
        None => Ok(out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_class_is_replaced_by_its_name() {
        let text = "Pay to DE89 3704 0044 0532 0130 00 or GB82WEST12345698765432, card \
                    4111 1111 1111 1111, call +34 612 345 678 or (555) 123-4567, write to \
                    ana.lopez@example.com.";
        let m = mask(text).unwrap();
        assert_eq!(
            m,
            "Pay to [IBAN] or [IBAN], card [CARD], call [PHONE] or [PHONE], write to [EMAIL]."
        );
    }

    #[test]
    fn dates_times_versions_and_plain_numbers_are_kept() {
        for text in [
            "We ship on 2025-06-01 at 10:30.",
            "Due 01/06/2025, then 1.6.2025 and 2025/06/01 14:00:05.",
            "Version 1.2.3 of the API, port 8080, 3 notes, 12345 rows.",
            "Order 2024 was the 17th; the invoice total was 1234.56 EUR.",
            "The ticket is JIRA-4521 and the commit b27c888.",
            "Card-like but not Luhn: 4111 1111 1111 1112.",
            "Not an IBAN: DE00 1234 5678 9012 3456 78.",
        ] {
            assert_eq!(mask(text).unwrap(), text, "{text}");
        }
    }

    #[test]
    fn the_checks_are_the_real_ones() {
        assert!(iban_valid("DE89370400440532013000"));
        assert!(!iban_valid("DE89370400440532013001"));
        assert!(luhn_valid("5555 5555 5555 4444"));
        assert!(!luhn_valid("5555 5555 5555 4445"));
        assert_eq!(find("reach me at a@b.io"), Some(EMAIL));
        assert_eq!(find("nothing here on 2025-01-02"), None);
    }
}
