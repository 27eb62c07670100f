//! `memoria doctor`: where everything is, how many notes each scope has, which files do not
//! parse (and why), which notes hold secrets (and which rule found them), duplicate ids,
//! leftovers of interrupted writes, index health, and where the sync token is kept.

use serde::Serialize;

use crate::error::Result;
use crate::fsx::FileLock;
use crate::guard::{self, SECRETS_TAG};
use crate::scan;
use crate::vault::Engine;

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BrokenFile {
    pub path: String,
    pub id: String,
    pub error: String,
}

/// A note kept away from agents because it holds (or is tagged as holding) secrets.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SecretNote {
    pub path: String,
    pub id: String,
    /// The guard rule its file trips and the line in the file, or `None` when only its tag
    /// marks it.
    pub rule: Option<&'static str>,
    pub line: Option<usize>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ScopeHealth {
    pub scope: String,
    pub dir: String,
    pub notes: usize,
    pub files_on_disk: usize,
    pub broken: Vec<BrokenFile>,
    pub secrets: Vec<SecretNote>,
    pub duplicate_ids: Vec<String>,
    pub leftover_temp_files: usize,
    pub watched: bool,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProjectInfo {
    pub id: String,
    /// The scope key this folder is bound to on this machine.
    pub scope: String,
    pub root: String,
    pub project_type: Option<String>,
}

/// The sync server this home is signed in to, and where its token is kept.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SyncSignIn {
    pub server: String,
    /// Where the token is read from: a keychain, the token file (its path), or
    /// `MEMORIA_SYNC_TOKEN`; `None` when there is none (sync cannot run: sign in again).
    pub token: Option<String>,
    /// Why the token could not be read, when it could not.
    pub token_error: Option<String>,
    /// What the server said of the token: `accepted`, `refused` (revoked, or another
    /// server's: sign in again), or `not checked: …` when the server could not be asked.
    pub token_check: Option<String>,
}

impl SyncSignIn {
    /// The server refused the token: sync cannot run until the person signs in again.
    pub fn token_refused(&self) -> bool {
        self.token_check.as_deref() == Some("refused")
    }
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DoctorReport {
    pub home: String,
    pub index: String,
    pub backups_dir: String,
    pub project: Option<ProjectInfo>,
    pub scopes: Vec<ScopeHealth>,
    pub backups: usize,
    /// How long backups stay; the doctor applies it before counting.
    pub backup_policy: crate::backup::BackupPolicy,
    /// The backups' total size in bytes, after pruning.
    pub backups_bytes: u64,
    /// Backups this run removed under the policy.
    pub backups_pruned: usize,
    pub index_integrity: String,
    /// SQLite's integrity check of recall's own files (its documents and vector cache): `ok`,
    /// or what it found in a file, which recall then recreated (it holds nothing that cannot
    /// be derived again).
    pub recall_integrity: String,
    /// Which embedder recall uses (the model, or the hash fallback and why).
    pub recall: Option<crate::recall::RecallStatus>,
    /// Why the recall index could not be opened, when it could not.
    pub recall_error: Option<String>,
    /// Recall runs on a semantic model; false: on the hash fallback, which matches words
    /// only (the report is then not all good, even when `ok`).
    pub semantic_model: bool,
    /// The conversation log: what it holds and how long it keeps it; the doctor applies the
    /// policy first.
    pub conversations: ConversationsHealth,
    /// The sync sign-in; `None` when not signed in.
    pub sync: Option<SyncSignIn>,
    /// True when nothing is broken.
    pub ok: bool,
}

/// The raw log's figures in a doctor's report.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConversationsHealth {
    pub path: String,
    pub stats: crate::log::LogStats,
    pub policy: crate::log::LogPolicy,
    /// Messages this run removed under the policy.
    pub removed: usize,
}

/// Where the signed-in server's token is read from, as a sync pass would find it.
fn sync_sign_in(home_root: &std::path::Path) -> Result<Option<SyncSignIn>> {
    use crate::sync::{Settings, sync_dir, token};
    let Some(server) = Settings::load(&sync_dir(home_root))?.server else {
        return Ok(None);
    };
    let env = std::env::var(token::TOKEN_ENV).ok();
    let (token, token_error, token_check) = match token::find(home_root, &server, env) {
        Ok((t, source)) => (
            Some(source.to_string()),
            None,
            Some(check_token(&server, t)),
        ),
        Err(e) => (None, Some(e.to_string()), None),
    };
    Ok(Some(SyncSignIn {
        server,
        token,
        token_error,
        token_check,
    }))
}

/// Asks the server who the token belongs to: a token it no longer knows (revoked, or issued
/// by another server) is a problem the doctor reports; a server it cannot reach is not.
fn check_token(server: &str, token: crate::sync::Token) -> String {
    use crate::sync::{HttpTransport, SyncClient, SyncError};
    let transport = match HttpTransport::new(server) {
        Ok(t) => t,
        Err(e) => return format!("not checked: {e}"),
    };
    match SyncClient::new(std::sync::Arc::new(transport), token).identity() {
        Ok(_) => "accepted".to_owned(),
        Err(SyncError::Server { status: 401, .. }) => "refused".to_owned(),
        Err(e) => format!("not checked: {e}"),
    }
}

pub fn run(engine: &mut Engine) -> Result<DoctorReport> {
    let pruned = engine.prune_backups()?;
    let mut scopes = Vec::new();
    for scope in engine.visible_scopes() {
        let dir = engine.scope_dir(&scope)?;
        let rows = engine.list(Some(&scope), None, None)?;
        let broken: Vec<BrokenFile> = rows
            .iter()
            .filter_map(|r| {
                r.error.as_ref().map(|e| BrokenFile {
                    path: r.path.clone(),
                    id: r.id.clone(),
                    error: e.clone(),
                })
            })
            .collect();
        let secrets: Vec<SecretNote> = rows
            .iter()
            .filter(|r| r.tags.iter().any(|t| t == SECRETS_TAG))
            .map(|r| {
                let found = std::fs::read_to_string(&r.path)
                    .ok()
                    .and_then(|text| guard::scan(&text));
                SecretNote {
                    path: r.path.clone(),
                    id: r.id.clone(),
                    rule: found.map(|f| f.rule),
                    line: found.map(|f| f.line),
                }
            })
            .collect();
        let mut ids: Vec<&str> = rows.iter().map(|r| r.id.as_str()).collect();
        ids.sort_unstable();
        let mut duplicate_ids: Vec<String> = ids
            .windows(2)
            .filter(|w| w[0] == w[1])
            .map(|w| w[0].to_owned())
            .collect();
        duplicate_ids.dedup();
        scopes.push(ScopeHealth {
            scope: scope.key(),
            dir: dir.to_string_lossy().into_owned(),
            notes: rows.len(),
            files_on_disk: scan::list_files(&dir)?.len(),
            broken,
            secrets,
            duplicate_ids,
            leftover_temp_files: scan::stale_temp_files(&dir).len(),
            watched: FileLock::is_held(&engine.watch_lock_path(&scope)),
        });
    }
    let integrity = engine.index().integrity()?;
    let ok = integrity == "ok"
        && scopes.iter().all(|s| {
            s.broken.is_empty() && s.duplicate_ids.is_empty() && s.notes == s.files_on_disk
        });
    // Recall's files are checked in full here, whatever their last check; a damaged one is
    // recreated as recall opens just below.
    let recall_integrity = match crate::recall::store::check_files(&crate::recall::default_dir(
        engine.home().root(),
    )) {
        Ok(files) => {
            let found: Vec<String> = files
                .into_iter()
                .filter(|(_, found)| found != "ok")
                .map(|(file, found)| format!("{file}: {found}"))
                .collect();
            if found.is_empty() {
                "ok".to_owned()
            } else {
                format!("{}; rebuilt from the notes and the log", found.join("; "))
            }
        }
        Err(e) => e.to_string(),
    };
    let (recall, recall_error) = match engine.recall() {
        Ok(r) => (Some(r.status()), None),
        Err(e) => (None, Some(e.to_string())),
    };
    let home = engine.home();
    let log_path = crate::log::log_path(home.root());
    let conversations = ConversationsHealth {
        path: log_path.to_string_lossy().into_owned(),
        removed: if log_path.exists() {
            crate::capture::apply_retention(engine)?
        } else {
            0
        },
        stats: if log_path.exists() {
            engine.log()?.stats()?
        } else {
            crate::log::LogStats::default()
        },
        policy: crate::log::LogPolicy::load(home.root())?,
    };
    let sync = sync_sign_in(home.root())?;
    let ok = ok
        && sync
            .as_ref()
            .is_none_or(|s| s.token.is_some() && !s.token_refused());
    Ok(DoctorReport {
        home: home.root().to_string_lossy().into_owned(),
        index: home.index_db().to_string_lossy().into_owned(),
        backups_dir: home.backups_dir().to_string_lossy().into_owned(),
        project: engine.project().map(|p| ProjectInfo {
            id: p.id.clone(),
            scope: p.scope().key(),
            root: p.root.to_string_lossy().into_owned(),
            project_type: p.project_type.clone(),
        }),
        scopes,
        backups: engine.backups(usize::MAX >> 1)?.len(),
        backup_policy: engine.backup_policy(),
        backups_bytes: pruned.kept_bytes,
        backups_pruned: pruned.removed,
        index_integrity: integrity,
        recall_integrity,
        ok: ok && recall_error.is_none(),
        semantic_model: recall.as_ref().is_some_and(|r| r.embedder == "onnx"),
        recall,
        recall_error,
        conversations,
        sync,
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use memoria_shared::FixedClock;

    use crate::vault::{Engine, OpenOptions};

    #[test]
    fn a_broken_file_is_a_problem_the_doctor_reports() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        let open = || {
            Engine::open(OpenOptions {
                clock: Arc::new(FixedClock::new(1_789_000_000_000)),
                ..OpenOptions::without_model(root.join("home"))
            })
            .unwrap()
        };
        drop(open());
        let text = "---\n{\"id\": \"broken\", \"summary\": oops}\n---\nthe zebra body\n";
        std::fs::write(root.join("home/memory/user/broken.md"), text).unwrap();
        let mut e = open();
        let report = super::run(&mut e).unwrap();
        assert!(!report.ok);
        assert_eq!(report.scopes[0].broken.len(), 1);
    }
}
