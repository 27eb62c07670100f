//! The credential guard: text that looks like a secret never enters memory through
//! `add`/`remember`/`edit`, and a note file that holds such text however it got there (written by
//! hand, imported, downloaded by sync) is marked [`SECRETS_TAG`] in the index, which keeps it
//! away from every agent. Findings name the rule and the line, never the secret itself.

use std::sync::LazyLock;

use regex::Regex;

/// Notes with this tag are kept (nothing is lost) but never recalled, searched, expanded for an
/// agent or exported. The guard adds it to the index row of any file whose text trips a rule.
pub const SECRETS_TAG: &str = "contains-secrets";

/// A rule that matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Finding {
    /// Stable rule name, e.g. `aws-access-key-id`.
    pub rule: &'static str,
    /// 1-based line of the match.
    pub line: usize,
}

static RULES: LazyLock<Vec<(&'static str, Regex)>> = LazyLock::new(|| {
    let rules: &[(&str, &str)] = &[
        (
            "private-key-block",
            r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----",
        ),
        (
            "aws-access-key-id",
            r"\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b",
        ),
        (
            "aws-secret-access-key",
            r#"(?i)aws_?secret_?access_?key["']?\s*[:=]\s*["']?[A-Za-z0-9/+=]{40}\b"#,
        ),
        ("anthropic-api-key", r"\bsk-ant-[A-Za-z0-9_-]{20,}"),
        (
            "openai-api-key",
            r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}",
        ),
        (
            "github-token",
            r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})",
        ),
        ("gitlab-token", r"\bglpat-[A-Za-z0-9_-]{20,}"),
        ("slack-token", r"\bxox[abposr]-[A-Za-z0-9-]{10,}"),
        ("google-api-key", r"\bAIza[0-9A-Za-z_-]{35}"),
        ("stripe-key", r"\b(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{16,}"),
        (
            "jwt",
            r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
        ),
        (
            "password-line",
            r#"(?i)\b(?:password|passwd|passphrase|secret|client_secret|api[_-]?key|access[_-]?token|auth[_-]?token)["']?\s*[:=]\s*["']?[^\s"'<>{}$*]{4,}"#,
        ),
        (
            "url-credentials",
            r"\b[a-z][a-z0-9+.-]*://[^\s:/@]+:[^\s@/]{3,}@[^\s]+",
        ),
    ];
    rules
        .iter()
        .map(|(name, re)| (*name, Regex::new(re).expect("guard rule compiles")))
        .collect()
});

/// Placeholders that look like a `password: …` line but hold no secret.
fn is_placeholder(matched: &str) -> bool {
    let value = matched
        .rsplit([':', '='])
        .next()
        .unwrap_or("")
        .trim()
        .trim_matches(['"', '\'']);
    let lower = value.to_ascii_lowercase();
    [
        "xxxx",
        "****",
        "changeme",
        "example",
        "placeholder",
        "redacted",
        "your-",
        "your_",
        "<",
        "none",
        "null",
    ]
    .iter()
    .any(|p| lower.starts_with(p))
}

/// Rules for a token made of a fixed prefix and random material, which a note's id made from
/// words can also begin with (`sk-learn-pipeline-tips-3fa` from "sk-learn pipeline tips").
const PREFIXED_TOKENS: &[&str] = &[
    "anthropic-api-key",
    "openai-api-key",
    "gitlab-token",
    "slack-token",
];

/// Whether a token one of [`PREFIXED_TOKENS`] matched is words joined by `-` or `_` (lower-case
/// letters, each at most 20), perhaps ending in a short number or hex suffix as a note's id
/// does: what follows a real token's prefix is random, with digits or capitals in a long run.
fn is_word_slug(matched: &str) -> bool {
    let parts: Vec<&str> = matched.split(['-', '_']).skip(1).collect();
    let Some((last, words)) = parts.split_last() else {
        return false;
    };
    let word = |w: &&str| (1..=20).contains(&w.len()) && w.bytes().all(|b| b.is_ascii_lowercase());
    let suffix = |w: &&str| {
        (1..=5).contains(&w.len())
            && w.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    };
    words.len() >= 2 && words.iter().all(word) && (word(last) || suffix(last))
}

/// Whether a note holds a secret: tagged [`SECRETS_TAG`], or its file text trips a rule (a
/// hand-written or downloaded file is not tagged, only its index row is).
pub fn holds_secret(note: &memoria_shared::Note) -> bool {
    note.tags.iter().any(|t| t == SECRETS_TAG) || scan(&note.serialize()).is_some()
}

/// The first rule `text` trips, if any.
pub fn scan(text: &str) -> Option<Finding> {
    let mut best: Option<(usize, Finding)> = None;
    for (rule, re) in RULES.iter() {
        for m in re.find_iter(text) {
            if *rule == "password-line" && is_placeholder(m.as_str()) {
                continue;
            }
            if PREFIXED_TOKENS.contains(rule) && is_word_slug(m.as_str()) {
                continue;
            }
            let line = text[..m.start()].matches('\n').count() + 1;
            if best.is_none_or(|(start, _)| m.start() < start) {
                best = Some((m.start(), Finding { rule, line }));
            }
            break;
        }
    }
    best.map(|(_, f)| f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catches_common_secrets() {
        let cases = [
            (
                "-----BEGIN RSA PRIVATE KEY-----\nMIIE...",
                "private-key-block",
            ),
            ("-----BEGIN OPENSSH PRIVATE KEY-----", "private-key-block"),
            ("key AKIAIOSFODNN7EXAMPLE here", "aws-access-key-id"),
            (
                "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
                "aws-secret-access-key",
            ),
            (
                "sk-ant-api03-abcdefghijklmnopqrstuvwxyz012345",
                "anthropic-api-key",
            ),
            (
                "OPENAI=sk-proj-abcdefghijklmnopqrstuvwxyz0123",
                "openai-api-key",
            ),
            // Random material after the prefix, even where a dash or a word falls in it.
            ("sk-proj-abcdefghijk-lmnopqrstuvwxyz_Q7x9", "openai-api-key"),
            (
                "sk-T3BlbkFJabcdefghijklmnopqrstuvwxyz0123456789",
                "openai-api-key",
            ),
            ("glpat-abcdefghijklmnopqrst", "gitlab-token"),
            ("the key sk-learn-pipeline-Tips-3fa9c1", "openai-api-key"),
            ("ghp_abcdefghijklmnopqrstuvwxyz0123456789", "github-token"),
            ("xoxb-123456789012-abcdefghij", "slack-token"),
            ("AIzaSyA-abcdefghijklmnopqrstuvwxyz01234", "google-api-key"),
            ("sk_live_abcdefghijklmnop1234", "stripe-key"),
            (
                "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
                "jwt",
            ),
            ("db host\npassword: hunter22", "password-line"),
            ("the db password: hunter22", "password-line"),
            ("  - API_KEY=abcd1234efgh", "password-line"),
            (
                "postgres://admin:s3cretpw@db.example.com/app",
                "url-credentials",
            ),
        ];
        for (text, rule) in cases {
            let f = scan(text).unwrap_or_else(|| panic!("missed {rule}"));
            assert_eq!(f.rule, rule, "{text}");
        }
        assert_eq!(scan("a\nb\npassword: hunter22").unwrap().line, 3);
    }

    #[test]
    fn leaves_ordinary_text_alone() {
        for text in [
            "Use the password manager for the staging login.",
            "password: <ask Ana>",
            "password: ****",
            "api_key: your-key-here",
            "The token bucket refills every second.",
            "Ask-based pricing: sk-rates are different",
            "id: sk-learn-pipeline-tips-for-imbalanced-data-3fa",
            "id: sk-and-makes-it-findable-by-1341",
            "glpat-style-tokens-and-how-to-rotate-them",
            "xoxb-tokens-for-the-team-bot-a1f",
            "https://example.com/a@b",
            "eyJ alone is not a JWT",
        ] {
            assert_eq!(scan(text), None, "{text}");
        }
    }
}
