//! How the CLI reports a failure: the engine's message, then a hint naming the command that
//! helps (engine messages never name one), or with `--json` the error body on standard error.

use memoria_engine::error::{ErrorBody, ErrorCode};
use memoria_engine::sync::SyncError;
use serde_json::{Value, json};

/// Prints `e` on standard error: `memoria: message` and `hint: …`, or `{"error": body}`.
pub fn print_error(e: &anyhow::Error, as_json: bool) {
    let body = body(e);
    if as_json {
        eprintln!("{}", json!({ "error": body }));
    } else {
        eprintln!("memoria: {}", body.message);
        if let Some(h) = hint(&body) {
            eprintln!("hint: {h}");
        }
    }
}

/// A failure already in its body form (one scope's sync error).
#[derive(Debug)]
pub struct Reported(pub ErrorBody);

impl std::fmt::Display for Reported {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0.message)
    }
}

impl std::error::Error for Reported {}

/// Failures of several scopes as one error: every `scope: message`, the first one's code and
/// detail.
pub fn failures(mut failed: Vec<(String, ErrorBody)>) -> anyhow::Error {
    let message = failed
        .iter()
        .map(|(scope, b)| format!("{scope}: {}", b.message))
        .collect::<Vec<_>>()
        .join("; ");
    let (_, first) = failed.remove(0);
    Reported(ErrorBody { message, ..first }).into()
}

/// The body of a CLI failure: the engine error it carries (its code and detail) with the whole
/// message, context included. A failure of the CLI's own is bad input unless an I/O error
/// caused it.
pub fn body(e: &anyhow::Error) -> ErrorBody {
    let message = format!("{e:#}");
    for cause in e.chain() {
        let found = if let Some(Reported(b)) = cause.downcast_ref::<Reported>() {
            Some(b.clone())
        } else if let Some(err) = cause.downcast_ref::<memoria_engine::Error>() {
            Some(err.body())
        } else if let Some(err) = cause.downcast_ref::<SyncError>() {
            Some(err.body())
        } else if cause.downcast_ref::<std::io::Error>().is_some() {
            Some(ErrorBody {
                code: ErrorCode::Io,
                message: String::new(),
                detail: None,
            })
        } else {
            None
        };
        if let Some(b) = found {
            return ErrorBody { message, ..b };
        }
    }
    ErrorBody {
        code: ErrorCode::InvalidInput,
        message,
        detail: None,
    }
}

/// The CLI command that helps with this error, if one does.
pub fn hint(e: &ErrorBody) -> Option<String> {
    let detail = |key: &str| {
        e.detail
            .as_ref()
            .and_then(|d| d.get(key))
            .and_then(Value::as_str)
    };
    Some(match e.code {
        ErrorCode::NotFound if detail("backup").is_some() => {
            "list backups with `memoria backups`".into()
        }
        ErrorCode::NotFound if detail("conflict").is_some() => {
            "list conflicts with `memoria conflicts`".into()
        }
        ErrorCode::NotFound if detail("quarantine").is_some() => {
            "`memoria quarantine list` lists the quarantines".into()
        }
        ErrorCode::NotFound if detail("finding").is_some() => {
            "`memoria review` lists the current findings".into()
        }
        ErrorCode::ChangedSince if detail("plan").is_some() || detail("id").is_some() => {
            "run the same `memoria merge` without --apply to see the notes as they are now".into()
        }
        ErrorCode::Config if detail("setting") == Some("model.url") => {
            "`memoria config set model.url http://HOST:PORT` names an OpenAI-compatible endpoint; `--draft manual` needs none".into()
        }
        ErrorCode::Model if detail("url").is_some() => {
            "check the endpoint `memoria config get model.url` names, or use `--draft manual`".into()
        }
        ErrorCode::NotFound if detail("scope").is_some() => {
            "`memoria sync status` shows what each scope waits for".into()
        }
        ErrorCode::NotFound => "list notes with `memoria list`".into(),
        ErrorCode::Exists => match detail("id") {
            Some(id) => format!("pick another `--id`, or change the note with `memoria edit {id}`"),
            None => "pick another `--id`".into(),
        },
        ErrorCode::NoProject => {
            "run `memoria init DIR` to make a folder a project, or pass `--project DIR`".into()
        }
        ErrorCode::NoProjectType => "`memoria init DIR --type T` sets the project type".into(),
        ErrorCode::ProjectClaimed => format!(
            "to pair it: `memoria projects pair {}`",
            detail("path").unwrap_or("DIR")
        ),
        ErrorCode::ScopeNotVisible => {
            "run the command inside that project, or pass `--project DIR`".into()
        }
        ErrorCode::ConfirmationRequired if detail("scope").is_some() => {
            "`memoria sync confirm` lets the sync go ahead; `memoria sync cancel` keeps the notes"
                .into()
        }
        ErrorCode::ConfirmationRequired => "add --confirm to go ahead".into(),
        // A merge or consolidation refused by commitFirst: a note it touches has changes this
        // machine has not synced, or another device changed one meanwhile.
        ErrorCode::Conflict => {
            "run `memoria sync now` first, then run the command again; `memoria conflicts` lists any note sync holds back".into()
        }
        // An edit is checked whole: a summary made from a secret's line (an import's first
        // line) refuses an edit that only fixes the body.
        ErrorCode::CredentialRefused if detail("field") == Some("summary") => {
            "the summary is checked too, even when the edit leaves it as it was: give the note a new one, `memoria edit ID --summary \"…\"`".into()
        }
        ErrorCode::CredentialRefused => format!(
            "take the secret out of the {} and name where it lives instead (a vault path, an environment variable)",
            detail("field").unwrap_or("note")
        ),
        ErrorCode::BrokenNote => "`memoria doctor` lists the notes that do not parse".into(),
        ErrorCode::Index => "`memoria doctor --rebuild` recreates the index from the notes".into(),
        ErrorCode::Model => "`memoria doctor` shows which embedding model recall uses".into(),
        ErrorCode::SyncOff => "turn it on with `memoria sync on`".into(),
        ErrorCode::CaptureOff => {
            "turn it on with `memoria config set conversations.capture true`".into()
        }
        ErrorCode::NotSignedIn if e.detail.as_ref().is_some_and(|d| d["tokenRefused"] == true) => {
            format!(
                "an admin creates a token on the server with `memoria-sync token create --user NAME`; then `memoria sync login --server {} --token TOKEN`",
                detail("server").unwrap_or("URL")
            )
        }
        ErrorCode::NotSignedIn => "sign in with `memoria sync login --server URL`".into(),
        ErrorCode::E2eeLocked => {
            "unlock this machine with `memoria sync unlock` (the passphrase, or --recovery-key)"
                .into()
        }
        ErrorCode::AccountMismatch
            if detail("pinnedUser").is_some() && detail("pinnedUser") == detail("user") =>
        {
            format!(
                "if {} is the same server at a new address: `memoria sync repoint {}` checks it holds the same notes, then moves the scope",
                detail("server").unwrap_or("URL"),
                detail("server").unwrap_or("URL")
            )
        }
        ErrorCode::AccountMismatch => {
            "sign in with the original account: `memoria sync login --server URL`".into()
        }
        ErrorCode::NotSameStore => {
            "`memoria sync status` shows the address each scope was synced with; `memoria sync login --server URL` signs in there again".into()
        }
        ErrorCode::KeychainUnavailable => {
            "set MEMORIA_SYNC_TOKEN in the environment of every `memoria` that syncs".into()
        }
        ErrorCode::ServerUnreachable if e.detail.as_ref().is_some_and(|d| d["repoint"] == true) => {
            "`memoria sync status` shows the address each scope syncs with now; run `memoria sync repoint URL` again once the new one answers".into()
        }
        ErrorCode::ServerUnreachable
        | ErrorCode::RateLimited
        | ErrorCode::ServerError
        | ErrorCode::CorruptReply => {
            "`memoria sync status` shows each scope's last error and when it syncs again".into()
        }
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_typed_error_keeps_its_code_and_detail_under_context() {
        let e =
            anyhow::Error::from(memoria_engine::Error::NotFound("a".into())).context("showing a");
        let b = body(&e);
        assert_eq!(b.code, ErrorCode::NotFound);
        assert_eq!(
            b.message,
            "showing a: note `a` not found in the visible scopes"
        );
        assert_eq!(b.detail, Some(json!({ "id": "a" })));
        assert_eq!(hint(&b).as_deref(), Some("list notes with `memoria list`"));
    }

    #[test]
    fn sync_errors_and_io_and_plain_cli_failures_have_codes() {
        let off = body(&anyhow::Error::from(SyncError::Off));
        assert_eq!(off.code, ErrorCode::SyncOff);
        assert!(hint(&off).unwrap().contains("memoria sync on"));
        let io = anyhow::Error::from(std::io::Error::other("disk")).context("reading stdin");
        assert_eq!(body(&io).code, ErrorCode::Io);
        assert_eq!(
            body(&anyhow::anyhow!("nothing to change")).code,
            ErrorCode::InvalidInput
        );
    }

    #[test]
    fn engine_messages_name_no_command_and_the_hint_adds_it() {
        let claimed = memoria_engine::Error::ProjectClaimed {
            id: "p".into(),
            dir: "/w/b".into(),
            registered: "/w/a".into(),
        };
        let b = body(&anyhow::Error::from(claimed));
        assert!(!b.message.contains("memoria "), "{}", b.message);
        assert_eq!(
            hint(&b).as_deref(),
            Some("to pair it: `memoria projects pair /w/b`")
        );
    }

    #[test]
    fn a_merge_refused_for_unsynced_changes_says_to_sync_first() {
        // What `memoria merge --apply` (and a consolidation) returns when commitFirst refuses
        // its batch because a note has changes not synced yet.
        let refused = memoria_engine::Error::from(SyncError::BatchRefused(
            "note `pricing-2` has changes not synced yet".into(),
        ));
        let b = body(&anyhow::Error::from(refused).context("merging pricing, pricing-2"));
        assert_eq!(b.code, ErrorCode::Conflict);
        assert!(b.message.contains("not synced yet"), "{}", b.message);
        let h = hint(&b).unwrap();
        assert!(h.starts_with("run `memoria sync now` first"), "{h}");
        let stale = body(&anyhow::Error::from(SyncError::BatchRefused(
            "another device changed pricing-2 meanwhile".into(),
        )));
        assert_eq!(hint(&stale), Some(h));
    }
}
