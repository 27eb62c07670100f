//! Working memory: short-lived blocks a person or an agent keeps at hand for the day's work,
//! recalled beside notes until they expire, then gone for good (`memoria_store::log`'s
//! working blocks). Never synced.

use crate::error::{Error, Result};
use crate::log::{Role, WORKING_MAX_TTL_HOURS, WORKING_TTL_HOURS, WorkingBlock};
use crate::vault::Engine;

use super::scope_arg;

/// Longest block kept, in bytes.
pub const MAX_WORKING_BYTES: usize = 8 * 1024;

/// Keeps `text` at hand in `scope` (the project's when `None`, else the user's) for
/// `ttl_hours` (default [`WORKING_TTL_HOURS`]), written by `role`. Text the credential guard
/// matches is refused, as in a note.
pub fn add(
    engine: &Engine,
    text: &str,
    scope: Option<&str>,
    ttl_hours: Option<u32>,
    role: Role,
) -> Result<WorkingBlock> {
    let text = text.trim();
    if text.is_empty() {
        return Err(Error::Invalid(
            "the working memory text is empty: give what to keep at hand".into(),
        ));
    }
    if text.len() > MAX_WORKING_BYTES {
        return Err(Error::Invalid(format!(
            "working memory holds up to {} KiB per block; this one has {} KiB: keep it in a note instead",
            MAX_WORKING_BYTES >> 10,
            text.len() >> 10
        )));
    }
    let hours = ttl_hours.unwrap_or(WORKING_TTL_HOURS);
    if !(1..=WORKING_MAX_TTL_HOURS).contains(&hours) {
        return Err(Error::Invalid(format!(
            "a working block lasts 1 to {WORKING_MAX_TTL_HOURS} hours; for longer, write a note"
        )));
    }
    if let Some(f) = crate::guard::scan(text) {
        return Err(Error::Secret {
            field: "text",
            rule: f.rule,
            line: f.line,
        });
    }
    let scope = scope_arg(engine, scope)?
        .or_else(|| engine.project().map(|p| p.scope()))
        .unwrap_or(crate::project::Scope::User);
    let now = engine.now_ms();
    let block = engine.log()?.add_working(
        &scope.key(),
        text,
        role,
        now,
        now + i64::from(hours) * 3_600_000,
    )?;
    // A session's recall takes it in by its words at once.
    engine.sync_recall_later()?;
    Ok(block)
}

/// The blocks visible here and not expired, the newest first.
pub fn list(engine: &Engine) -> Result<Vec<WorkingBlock>> {
    let visible: Vec<String> = engine.visible_scopes().iter().map(|s| s.key()).collect();
    Ok(engine
        .log()?
        .working(engine.now_ms())?
        .into_iter()
        .filter(|b| visible.contains(&b.scope))
        .collect())
}

/// Removes a block before it expires.
pub fn remove(engine: &Engine, key: &str) -> Result<()> {
    engine.visible_working(key)?;
    engine.log()?.remove_working(key)?;
    engine.sync_recall_later()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use memoria_shared::FixedClock;

    use super::*;
    use crate::api::agent::{AgentQuery, search};
    use crate::vault::OpenOptions;

    const T0: i64 = 1_789_000_000_000;

    fn found(e: &mut Engine, q: &str) -> Vec<String> {
        search(
            e,
            &AgentQuery {
                queries: vec![q.into()],
                limit: 5,
                ..Default::default()
            },
        )
        .unwrap()
        .into_iter()
        .map(|h| h.id)
        .collect()
    }

    #[test]
    fn a_block_is_recalled_until_it_expires_and_then_leaves_no_copy() {
        let tmp = tempfile::tempdir().unwrap();
        let clock = Arc::new(FixedClock::new(T0));
        let mut e = Engine::open(OpenOptions {
            clock: clock.clone(),
            ..OpenOptions::without_model(tmp.path())
        })
        .unwrap();
        let word = "zanzibarquill";
        let b = add(
            &e,
            &format!("Halfway through the {word} migration: tables done"),
            None,
            Some(2),
            Role::Assistant,
        )
        .unwrap();
        assert_eq!(
            (b.scope.as_str(), b.expires_at),
            ("user", T0 + 2 * 3_600_000)
        );
        assert_eq!(list(&e).unwrap(), std::slice::from_ref(&b));
        assert_eq!(
            found(&mut e, &format!("{word} migration")),
            std::slice::from_ref(&b.key)
        );
        let opened = crate::api::agent::expand(&mut e, &b.key).unwrap();
        assert_eq!(opened.trust, "[INFERRED]", "an agent wrote it");

        // Refused: a credential, nothing, too long, too long-lived.
        assert!(matches!(
            add(&e, "password: hunter2-zz-99", None, None, Role::User),
            Err(Error::Secret { .. })
        ));
        assert!(add(&e, "  ", None, None, Role::User).is_err());
        assert!(
            add(
                &e,
                &"x".repeat(MAX_WORKING_BYTES + 1),
                None,
                None,
                Role::User
            )
            .is_err()
        );
        assert!(add(&e, "ok", None, Some(WORKING_MAX_TTL_HOURS + 1), Role::User).is_err());

        clock.advance(2 * 3_600_000);
        assert!(list(&e).unwrap().is_empty());
        assert!(found(&mut e, &format!("{word} migration")).is_empty());
        assert!(crate::api::agent::expand(&mut e, &b.key).is_err());
        drop(e);
        for entry in walk(tmp.path()) {
            let bytes = std::fs::read(&entry).unwrap();
            assert!(
                !bytes.windows(word.len()).any(|w| w == word.as_bytes()),
                "{} still holds the expired block",
                entry.display()
            );
        }
    }

    #[test]
    fn a_block_removed_is_gone_from_recall() {
        let tmp = tempfile::tempdir().unwrap();
        let mut e = Engine::open(OpenOptions::without_model(tmp.path())).unwrap();
        let b = add(&e, "try the quokkamint cache flag", None, None, Role::User).unwrap();
        assert_eq!(
            found(&mut e, "quokkamint cache flag"),
            std::slice::from_ref(&b.key)
        );
        remove(&e, &b.key).unwrap();
        assert!(found(&mut e, "quokkamint cache flag").is_empty());
        assert!(matches!(remove(&e, &b.key), Err(Error::NotFound(_))));
    }

    fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
        let mut out = Vec::new();
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(walk(&p));
            } else {
                out.push(p);
            }
        }
        out
    }
}
