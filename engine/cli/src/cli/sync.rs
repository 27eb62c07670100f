//! `sync …`, `conflicts` and `resolve`.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use memoria_engine::api::conflicts::{self, ConflictReason, KeepChoice, ResolveRequest};
use memoria_engine::api::sync::{self, LoginRequest, SyncStatus};
use memoria_engine::backup::human_utc;
use memoria_engine::sync::PendingReason;
use memoria_shared::merge::ConflictKind;

use super::{Globals, outln, print_json};

#[derive(Subcommand, Debug)]
pub enum SyncCommand {
    /// Sign in to a sync server; the token goes to the OS keychain, else (a headless machine)
    /// to a file readable only by you in the home's sync folder. Turns sync on unless it was
    /// turned off.
    Login {
        /// The server's URL, e.g. https://sync.example.com
        #[arg(long)]
        server: String,
        /// The token (default: $MEMORIA_SYNC_TOKEN, else asked for).
        #[arg(long)]
        token: Option<String>,
    },
    /// Move scopes synced at another address to URL: the same server reached anew (localhost
    /// for 127.0.0.1, TLS, a domain, a reverse proxy). Checks first that URL knows the token as
    /// the same user and holds the notes last synced (or later versions of them); otherwise
    /// nothing moves. URL becomes the address this home syncs with.
    Repoint {
        /// The server's new address, e.g. https://sync.example.com
        #[arg(value_name = "URL")]
        url: String,
    },
    /// Forget the token (from the keychain and the token file) and the server (scope pins stay).
    Logout,
    /// On/off, last synced, errors, what the last download brought, limits.
    Status,
    /// Sync every scope now.
    Now,
    /// Turn cloud sync on; with --scope, only that scope's sync (turned off before).
    On {
        /// Also upload notes tagged contains-secrets (off by default: they stay on this machine).
        #[arg(long, conflicts_with = "exclude_secrets")]
        include_secrets: bool,
        /// Stop uploading notes tagged contains-secrets (the default).
        #[arg(long)]
        exclude_secrets: bool,
        /// user or project: turn on this scope's sync only.
        #[arg(long, conflicts_with_all = ["include_secrets", "exclude_secrets"])]
        scope: Option<String>,
    },
    /// Turn cloud sync off (survives restarts and sign-ins; local notes keep working); with
    /// --scope, only that scope's sync, the others go on.
    Off {
        /// user or project: turn off this scope's sync only.
        #[arg(long)]
        scope: Option<String>,
    },
    /// Agree to what a paused sync waits for (deletions, a new folder); the next sync does it.
    Confirm {
        /// user or project (default: every scope that waits).
        #[arg(long)]
        scope: Option<String>,
    },
    /// Decline what a paused sync waits for: notes missing here are restored from the last
    /// sync, notes deleted on another machine are kept (and uploaded again).
    Cancel {
        /// user or project (default: every scope that waits).
        #[arg(long)]
        scope: Option<String>,
    },
    /// Turn end-to-end encryption on for this account: the server then keeps only ciphertext
    /// and opaque ids, and machines still merge. Asks for a passphrase (twice), prints the
    /// recovery key once, re-uploads every scope encrypted and then removes its plaintext from
    /// the server. Other machines unlock with `memoria sync unlock`.
    Encrypt {
        /// Read the passphrase from the first line of FILE (default: $MEMORIA_SYNC_PASSPHRASE,
        /// else asked for).
        #[arg(long, value_name = "FILE")]
        passphrase_file: Option<PathBuf>,
        /// Also write the recovery key to FILE (readable only by you; keep it off this machine).
        #[arg(long, value_name = "FILE")]
        recovery_file: Option<PathBuf>,
    },
    /// Change the passphrase of end-to-end encrypted sync: the account key is wrapped under the
    /// new one, nothing is uploaded again, and the recovery key still unlocks. Proves the
    /// account with the current passphrase (asked, --passphrase-file or
    /// $MEMORIA_SYNC_PASSPHRASE) or, when it is forgotten, the recovery key; with both lost,
    /// --from-this-machine proves it with the account key this (unlocked) machine holds.
    Passphrase {
        /// Read the current passphrase from the first line of FILE.
        #[arg(long, value_name = "FILE", conflicts_with_all = ["recovery_key", "from_this_machine"])]
        passphrase_file: Option<PathBuf>,
        /// The recovery key, in place of a forgotten passphrase.
        #[arg(long, value_name = "KEY", conflicts_with = "from_this_machine")]
        recovery_key: Option<String>,
        /// Both the passphrase and the recovery key are lost: prove the account with the
        /// account key this machine holds (it must sync end-to-end encrypted now). A new
        /// recovery key replaces the old one and is printed once. Asks for confirmation.
        #[arg(long)]
        from_this_machine: bool,
        /// With --from-this-machine: also write the new recovery key to FILE (readable only by
        /// you; keep it off this machine).
        #[arg(long, value_name = "FILE", requires = "from_this_machine")]
        recovery_file: Option<PathBuf>,
        /// With --from-this-machine: do not ask for confirmation.
        #[arg(long, requires = "from_this_machine")]
        yes: bool,
        /// Read the new passphrase from the first line of FILE (default: asked for, twice).
        #[arg(long, value_name = "FILE")]
        new_passphrase_file: Option<PathBuf>,
    },
    /// Unlock end-to-end encrypted sync on this machine with the account's passphrase (asked,
    /// --passphrase-file or $MEMORIA_SYNC_PASSPHRASE) or its recovery key, then sync. A wrong
    /// one changes nothing.
    Unlock {
        /// Read the passphrase from the first line of FILE.
        #[arg(long, value_name = "FILE", conflicts_with = "recovery_key")]
        passphrase_file: Option<PathBuf>,
        /// The recovery key printed when encryption was turned on.
        #[arg(long, value_name = "KEY")]
        recovery_key: Option<String>,
    },
    /// Replace the account key with a new one and re-encrypt every scope under it. Proves the
    /// account with the passphrase (asked, --passphrase-file or $MEMORIA_SYNC_PASSPHRASE),
    /// which then wraps the new key, and prints a new recovery key once (the old one no longer
    /// unlocks). Other unlocked machines follow at their next sync, unless --lock-out. If it
    /// is interrupted, run it again: it finishes the rotation under way.
    RotateKey {
        /// Read the passphrase from the first line of FILE.
        #[arg(long, value_name = "FILE")]
        passphrase_file: Option<PathBuf>,
        /// Also write the new recovery key to FILE (readable only by you; keep it off this
        /// machine).
        #[arg(long, value_name = "FILE")]
        recovery_file: Option<PathBuf>,
        /// Machines holding only the old key (a lost or stolen one) no longer follow: every
        /// other machine unlocks again with the passphrase or the new recovery key.
        #[arg(long)]
        lock_out: bool,
    },
    /// Turn end-to-end encryption off for this account: every scope goes back to the server in
    /// plaintext, then its encrypted copies and the account's wrapped keys are removed. Asks
    /// for confirmation. Other machines go back to plaintext at their next sync. If it is
    /// interrupted, run it again.
    Decrypt {
        /// Do not ask for confirmation.
        #[arg(long)]
        yes: bool,
    },
}

/// Where a passphrase comes from when no file is named and no terminal can ask.
pub const PASSPHRASE_ENV: &str = "MEMORIA_SYNC_PASSPHRASE";

pub fn run(g: &Globals, command: &SyncCommand) -> Result<()> {
    let mut engine = g.location.open()?;
    let new_file = |f: &Option<PathBuf>| -> Result<()> {
        if let Some(f) = f
            && f.exists()
        {
            bail!(
                "{} exists already: name a new file for the recovery key",
                f.display()
            );
        }
        Ok(())
    };
    match command {
        SyncCommand::Login { server, token } => {
            let token = match token {
                Some(t) => Some(t.clone()),
                None if sync::token_in_environment() => None,
                None => Some(ask_token(server)?),
            };
            let req = LoginRequest {
                server: server.clone(),
                token,
            };
            let done = sync::login(&engine, &req)?;
            if let Some(e) = &done.keychain_error {
                eprintln!("memoria: {e}; using MEMORIA_SYNC_TOKEN from the environment");
            }
            if g.json {
                return print_json(&done);
            }
            outln!("signed in to {} as {}", done.server, done.user_id);
            if let Some(kc) = &done.keychain {
                outln!("the token is in {kc}");
            }
            if !done.on {
                outln!("cloud sync is off: turn it on with `memoria sync on`");
            }
            for p in &done.pinned_elsewhere {
                if p.user_id == done.user_id {
                    eprintln!(
                        "warning: {} was synced at {}, so its sync stays paused: if that is this server at a new address, run `memoria sync repoint {}` (it checks the server holds the same notes first)",
                        p.scope, p.server, done.server
                    );
                } else {
                    eprintln!(
                        "warning: {} was synced as `{}` at {}, so its sync stays paused: sign in as that account to sync it",
                        p.scope, p.user_id, p.server
                    );
                }
            }
        }
        SyncCommand::Repoint { url } => {
            let done = sync::repoint(&engine, url)?;
            if g.json {
                return print_json(&done);
            }
            if done.scopes.is_empty() {
                outln!(
                    "every scope is pinned to {} already; this home syncs with it",
                    done.server
                );
                return Ok(());
            }
            for m in &done.scopes {
                outln!(
                    "{}: moved from {} to {} ({} note(s) as last synced, {} changed there since, merged by the next sync)",
                    m.scope,
                    m.from,
                    done.server,
                    m.same,
                    m.changed_since
                );
            }
            outln!("run `memoria sync now` (or let the watcher sync) to go on");
        }
        SyncCommand::Logout => {
            let done = sync::logout(&engine)?;
            if g.json {
                return print_json(&done);
            }
            outln!("signed out");
        }
        SyncCommand::On {
            scope: Some(scope), ..
        }
        | SyncCommand::Off { scope: Some(scope) } => {
            let on = matches!(command, SyncCommand::On { .. });
            let s = sync::set_scope(&engine, scope, on)?;
            if g.json {
                return print_json(&s);
            }
            match on {
                true => outln!("cloud sync of {} is on", s.scope),
                false => outln!(
                    "cloud sync of {} is off on this machine: its notes stay here",
                    s.scope
                ),
            }
        }
        SyncCommand::On {
            include_secrets,
            exclude_secrets,
            scope: None,
        } => {
            let secrets = (*include_secrets || *exclude_secrets).then_some(*include_secrets);
            let s = sync::turn_on(&engine, secrets)?;
            if g.json {
                return print_json(&s);
            }
            outln!("cloud sync is on");
            outln!(
                "notes tagged contains-secrets are {}",
                if s.include_secrets {
                    "uploaded too"
                } else {
                    "kept on this machine (`memoria sync on --include-secrets` uploads them)"
                }
            );
        }
        SyncCommand::Off { scope: None } => {
            let s = sync::turn_off(&engine)?;
            if g.json {
                return print_json(&s);
            }
            outln!("cloud sync is off");
        }
        SyncCommand::Confirm { scope } | SyncCommand::Cancel { scope } => {
            let confirm = matches!(command, SyncCommand::Confirm { .. });
            let done = match confirm {
                true => sync::confirm(&mut engine, scope.as_deref())?,
                false => sync::cancel(&mut engine, scope.as_deref())?,
            };
            if g.json {
                return print_json(&done);
            }
            for p in &done {
                match (&p.reason, confirm) {
                    (PendingReason::NewFolder { .. }, true) => {
                        outln!("{} syncs from {} too", p.scope, p.folder)
                    }
                    (PendingReason::NewFolder { .. }, false) => {
                        outln!("{} stays unsynced", p.folder)
                    }
                    (_, true) => outln!(
                        "{}: {} deletion(s) confirmed",
                        p.scope,
                        p.local_deletes.len() + p.cloud_deletes.len()
                    ),
                    (_, false) => outln!(
                        "{}: {} note(s) restored here, {} kept and uploaded again",
                        p.scope,
                        p.local_deletes.len(),
                        p.cloud_deletes.len()
                    ),
                }
            }
            outln!("run `memoria sync now` (or let the watcher sync) to go on");
        }
        SyncCommand::Now => {
            let passes = sync::now(&mut engine)?;
            if g.json {
                print_json(&passes)?;
            }
            let mut failed = Vec::new();
            for p in &passes {
                match (&p.report, &p.error) {
                    (_, Some(e)) => failed.push((p.scope.clone(), e.clone())),
                    (None, None) if p.off && !g.json => {
                        outln!("{}: turned off on this machine, left alone", p.scope);
                    }
                    (Some(rep), None) if !g.json => {
                        outln!(
                            "{}: uploaded {}, downloaded +{} ~{} -{}, merged {}, held back {}",
                            p.scope,
                            rep.uploaded,
                            rep.download.added,
                            rep.download.changed,
                            rep.download.deleted,
                            rep.merged,
                            rep.held_back.len()
                        );
                        for (id, why) in &rep.held_back {
                            outln!("  {id}: {why}");
                        }
                    }
                    _ => {}
                }
            }
            if !failed.is_empty() {
                return Err(crate::hints::failures(failed));
            }
        }
        SyncCommand::Status => {
            let s = sync::status(&engine)?;
            if g.json {
                return print_json(&s);
            }
            print_status(&s)?;
        }
        SyncCommand::Encrypt {
            passphrase_file,
            recovery_file,
        } => {
            let passphrase = passphrase(passphrase_file.as_deref(), true)?;
            new_file(recovery_file)?;
            let done = sync::encrypt(&mut engine, &passphrase)?;
            save_recovery_key(recovery_file.as_deref(), &done.recovery_key)?;
            if g.json {
                print_json(&done)?;
            } else {
                outln!(
                    "end-to-end encryption is on; the account key is kept in {}",
                    done.keychain
                );
                outln!(
                    "recovery key (shown this once; with it or the passphrase a machine unlocks the notes, with neither nobody can read the cloud copy):"
                );
                outln!("  {}", done.recovery_key);
                if let Some(f) = recovery_file {
                    outln!("  also written to {}", f.display());
                }
            }
            report_passes(g, &done.scopes)?;
        }
        SyncCommand::Passphrase {
            from_this_machine: true,
            recovery_file,
            yes,
            new_passphrase_file,
            ..
        } => {
            new_file(recovery_file)?;
            if !yes {
                confirm(
                    "set a new passphrase and a new recovery key, proven by the account key this machine holds? the old passphrase and recovery key will no longer unlock",
                )?;
            }
            let new = match new_passphrase_file {
                Some(f) => passphrase(Some(f), false)?,
                None => new_passphrase()?,
            };
            let done = sync::reset_passphrase(&mut engine, &new)?;
            save_recovery_key(recovery_file.as_deref(), &done.recovery_key)?;
            if g.json {
                print_json(&done)?;
            } else {
                outln!(
                    "the passphrase is set: unlock new machines with it; the old passphrase and recovery key no longer unlock"
                );
                outln!("new recovery key (shown this once; the one before no longer unlocks):");
                outln!("  {}", done.recovery_key);
                if let Some(f) = recovery_file {
                    outln!("  also written to {}", f.display());
                }
            }
        }
        SyncCommand::Passphrase {
            passphrase_file,
            recovery_key,
            new_passphrase_file,
            ..
        } => {
            let current = match recovery_key {
                Some(k) => sync::Secret::RecoveryKey(k.clone()),
                None => sync::Secret::Passphrase(passphrase(passphrase_file.as_deref(), false)?),
            };
            let new = match new_passphrase_file {
                Some(f) => passphrase(Some(f), false)?,
                None => new_passphrase()?,
            };
            let done = sync::change_passphrase(&mut engine, &current, &new)?;
            if g.json {
                print_json(&done)?;
            } else {
                outln!(
                    "the passphrase is changed: unlock new machines with the new one; the recovery key still unlocks"
                );
            }
        }
        SyncCommand::Unlock {
            passphrase_file,
            recovery_key,
        } => {
            let secret = match recovery_key {
                Some(k) => sync::Secret::RecoveryKey(k.clone()),
                None => sync::Secret::Passphrase(passphrase(passphrase_file.as_deref(), false)?),
            };
            let done = sync::unlock(&mut engine, &secret)?;
            if g.json {
                print_json(&done)?;
            } else {
                outln!(
                    "unlocked: end-to-end encrypted sync; the account key is kept in {}",
                    done.keychain
                );
            }
            report_passes(g, &done.scopes)?;
        }
        SyncCommand::Decrypt { yes } => {
            if !yes {
                confirm(
                    "turn end-to-end encryption off? every note goes back to the sync server in plaintext",
                )?;
            }
            let done = sync::decrypt(&mut engine)?;
            if g.json {
                print_json(&done)?;
            } else if done.complete {
                outln!(
                    "end-to-end encryption is off: the server keeps the notes in plaintext again, and this machine no longer keeps the account key"
                );
            } else {
                outln!(
                    "end-to-end encryption is being turned off: some scopes are still encrypted (synced from other machines); they go back to plaintext when one of those machines syncs; run this again to check"
                );
            }
            report_passes(g, &done.scopes)?;
        }
        SyncCommand::RotateKey {
            passphrase_file,
            recovery_file,
            lock_out,
        } => {
            let passphrase = passphrase(passphrase_file.as_deref(), false)?;
            new_file(recovery_file)?;
            let done = sync::rotate_key(&mut engine, &passphrase, *lock_out)?;
            save_recovery_key(recovery_file.as_deref(), &done.recovery_key)?;
            if g.json {
                print_json(&done)?;
            } else {
                outln!(
                    "the account key is replaced (key {}); it is kept in {}",
                    done.kid,
                    done.keychain
                );
                outln!("new recovery key (shown this once; the one before no longer unlocks):");
                outln!("  {}", done.recovery_key);
                if let Some(f) = recovery_file {
                    outln!("  also written to {}", f.display());
                }
                match done.locked_out {
                    true => outln!(
                        "machines holding only the old key are locked out: unlock each of yours again with the passphrase or the new recovery key"
                    ),
                    false => outln!("your other machines follow at their next sync"),
                }
                if !done.complete {
                    outln!(
                        "some scopes still hold notes under the old key (synced from other machines): they move when one of those machines syncs; run this again to check"
                    );
                }
            }
            report_passes(g, &done.scopes)?;
        }
    }
    Ok(())
}

/// Prints each scope's pass (unless `--json` printed them), and fails when one failed.
fn report_passes(g: &Globals, passes: &[sync::ScopePass]) -> Result<()> {
    let mut failed = Vec::new();
    for p in passes {
        match (&p.report, &p.error) {
            (_, Some(e)) => failed.push((p.scope.clone(), e.clone())),
            (Some(rep), None) if !g.json => outln!(
                "{}: uploaded {}, downloaded +{} ~{} -{}, merged {}, held back {}",
                p.scope,
                rep.uploaded,
                rep.download.added,
                rep.download.changed,
                rep.download.deleted,
                rep.merged,
                rep.held_back.len()
            ),
            _ => {}
        }
    }
    if !failed.is_empty() {
        return Err(crate::hints::failures(failed));
    }
    Ok(())
}

/// The passphrase: from `file`, else `$MEMORIA_SYNC_PASSPHRASE`, else asked on the terminal
/// without echo (twice when `confirm`).
fn passphrase(file: Option<&std::path::Path>, confirm: bool) -> Result<String> {
    if let Some(f) = file {
        let text = std::fs::read_to_string(f)
            .with_context(|| format!("reading the passphrase from {}", f.display()))?;
        return Ok(text.lines().next().unwrap_or_default().to_owned());
    }
    if let Ok(p) = std::env::var(PASSPHRASE_ENV) {
        return Ok(p);
    }
    let first = ask_hidden("passphrase: ")?;
    if confirm && ask_hidden("passphrase again: ")? != first {
        bail!("the two passphrases differ: nothing was changed; try again");
    }
    Ok(first)
}

/// Asks `question` on the terminal; anything but yes stops with nothing changed. Without a
/// terminal the answer must come as `--yes`.
fn confirm(question: &str) -> Result<()> {
    use std::io::IsTerminal;
    if !std::io::stdin().is_terminal() {
        bail!("{question}: confirm with --yes (no terminal to ask on); nothing was changed");
    }
    eprint!("{question} [y/N] ");
    let mut line = String::new();
    std::io::stdin()
        .read_line(&mut line)
        .context("reading the answer")?;
    if !matches!(line.trim().to_lowercase().as_str(), "y" | "yes") {
        bail!("nothing was changed");
    }
    Ok(())
}

/// The new passphrase, asked on the terminal twice without echo.
fn new_passphrase() -> Result<String> {
    let first = ask_hidden("new passphrase: ")?;
    if ask_hidden("new passphrase again: ")? != first {
        bail!("the two passphrases differ: nothing was changed; try again");
    }
    Ok(first)
}

fn ask_hidden(prompt: &str) -> Result<String> {
    use std::io::IsTerminal;
    eprint!("{prompt}");
    let tty = std::io::stdin().is_terminal();
    let stty = |arg: &str| {
        let _ = std::process::Command::new("stty")
            .arg(arg)
            .stdin(std::process::Stdio::inherit())
            .status();
    };
    if tty {
        stty("-echo");
    }
    let mut line = String::new();
    let read = std::io::stdin().read_line(&mut line);
    if tty {
        stty("echo");
        eprintln!();
    }
    read.context("reading the passphrase")?;
    let line = line.trim_end_matches(['\r', '\n']).to_owned();
    if line.is_empty() {
        bail!("no passphrase given: type it, or pass --passphrase-file");
    }
    Ok(line)
}

/// Writes the recovery key, when a file was asked for, to that new file readable only by the
/// user.
fn save_recovery_key(file: Option<&std::path::Path>, key: &str) -> Result<()> {
    use std::io::Write;
    let Some(path) = file else { return Ok(()) };
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut opts, 0o600);
    opts.open(path)
        .and_then(|mut f| f.write_all(format!("{key}\n").as_bytes()))
        .with_context(|| format!("writing the recovery key to {}", path.display()))
}

fn ask_token(server: &str) -> Result<String> {
    eprint!("token for {server}: ");
    let mut line = String::new();
    std::io::stdin()
        .read_line(&mut line)
        .context("reading the token")?;
    let line = line.trim().to_owned();
    if line.is_empty() {
        bail!("no token given: pass --token, set MEMORIA_SYNC_TOKEN, or type it");
    }
    Ok(line)
}

fn print_status(s: &SyncStatus) -> Result<()> {
    outln!(
        "cloud sync: {}{}{}",
        if s.on { "on" } else { "off" },
        s.server
            .as_deref()
            .map_or_else(|| " (not signed in)".to_owned(), |u| format!(", {u}")),
        match (s.encrypted, s.encryption_turning_off, s.encryption_ended) {
            _ if s.encryption_locked => {
                ", end-to-end encrypted, locked: the account key was changed on another machine, which locked this one out, and nothing syncs until you unlock it with the passphrase or the new recovery key (`memoria sync unlock`)"
            }
            (true, false, _) => ", end-to-end encrypted",
            (true, true, _) => ", end-to-end encryption being turned off",
            (false, _, true) => {
                ", end-to-end encryption was turned off (from another machine; the account key is no longer kept here)"
            }
            _ => "",
        }
    );
    outln!(
        "last synced: {}",
        s.last_synced_ms
            .map_or_else(|| "never".to_owned(), human_utc)
    );
    for sc in &s.scopes {
        let d = &sc.last_download;
        outln!(
            "{}: last download +{} ~{} -{}, {} conflict(s)",
            sc.scope,
            d.added,
            d.changed,
            d.deleted,
            sc.conflicts
        );
        if !sc.enabled {
            outln!(
                "  turned off on this machine (`memoria sync on --scope {}` turns it on)",
                sc.scope
            );
        }
        if let Some(w) = &sc.pending {
            if w.pending.confirmed {
                outln!("  confirmed, done by the next sync: {}", w.message);
            } else {
                outln!(
                    "  waiting for you: {} (`memoria sync confirm` or `memoria sync cancel`)",
                    w.message
                );
            }
        } else if let Some(e) = &sc.last_error {
            outln!("  error: {e}");
        }
        if let (true, Some(pin), Some(server)) = (sc.address_changed, &sc.pin, &s.server) {
            outln!(
                "  paused: synced at {}; if that is this server at a new address, `memoria sync repoint {server}` moves it after checking the server holds the same notes",
                pin.server
            );
        }
        if s.on && s.server.is_some() && sc.enabled {
            outln!("  {}", next_sync(sc.background.as_ref()));
        }
        if let Some(q) = &sc.quotas {
            outln!(
                "  limits: {} notes, {} bytes per note",
                q.live_notes_per_scope,
                q.body_bytes
            );
        }
    }
    Ok(())
}

/// Whether and when the scope is synced next: by a background syncer, or only when asked.
fn next_sync(bg: Option<&sync::Background>) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    match bg {
        None => "next sync: none planned, as no `memoria watch`, `memoria mcp` or app runs on this home: run `memoria sync now` (or keep `memoria watch` running)".to_owned(),
        Some(b) => match b.next_attempt_ms {
            Some(t) if t <= now => "next sync: due now, by a running background sync".to_owned(),
            Some(t) => format!(
                "next sync: in {} s ({}), by a running background sync",
                (t - now + 999) / 1000,
                human_utc(t)
            ),
            None => "next sync: not until a note changes here or you run `memoria sync now` (the background sync waits for you)".to_owned(),
        },
    }
}

#[derive(Args, Debug)]
pub struct ConflictsArgs {
    /// Show this note's conflict: what changed here and in the cloud since the last sync.
    id: Option<String>,
    /// The conflict's scope, when the id has one in several.
    #[arg(long)]
    scope: Option<String>,
}

pub fn list_conflicts(g: &Globals, a: &ConflictsArgs) -> Result<()> {
    let mut list = conflicts::list(&g.location.open()?)?;
    if let Some(id) = &a.id {
        list.retain(|c| c.id == *id && a.scope.as_ref().is_none_or(|s| c.scope == *s));
        if list.is_empty() {
            anyhow::bail!("no sync conflict for {id}: `memoria conflicts` lists them");
        }
        if g.json {
            return print_json(&list);
        }
        for c in &list {
            show_conflict(c)?;
        }
        return Ok(());
    }
    if g.json {
        return print_json(&list);
    }
    if list.is_empty() {
        outln!("no sync conflicts");
    }
    for c in &list {
        let what = match &c.reason {
            ConflictReason::Merge(kinds) => kinds
                .iter()
                .map(|k| match k {
                    ConflictKind::NoBase => "changed on both sides with no common version",
                    ConflictKind::Summary => "both changed the summary",
                    ConflictKind::Type => "both changed the type",
                    ConflictKind::Body => "both changed the same lines",
                    ConflictKind::TooLarge => "the merged note is over the size limit",
                })
                .collect::<Vec<_>>()
                .join("; "),
            ConflictReason::VanishedWhileEdited => {
                "edited here, deleted in the cloud long ago".to_owned()
            }
        };
        outln!("{}  {}  {what}", c.scope, c.id);
    }
    Ok(())
}

/// One conflict as diffs: the last synced version against this machine's and the cloud's (or
/// the two against each other without a common version), colored on a terminal.
fn show_conflict(c: &memoria_engine::sync::Conflict) -> Result<()> {
    use std::io::IsTerminal;
    let color = std::io::stdout().is_terminal();
    outln!("{}  {}", c.scope, c.id);
    let empty = String::new();
    let local = c.local.as_ref().unwrap_or(&empty);
    let cloud = c.cloud.as_ref().unwrap_or(&empty);
    let pairs: Vec<(&str, &str, &str, &str)> = match &c.base {
        Some(base) => vec![
            ("last synced", "this machine", base, local),
            ("last synced", "the cloud", base, cloud),
        ],
        None => vec![("this machine", "the cloud", local, cloud)],
    };
    for (from, to, a, b) in pairs {
        if c.local.is_none() && to == "this machine" {
            outln!("\n{to}: deleted");
            continue;
        }
        if c.cloud.is_none() && to == "the cloud" {
            outln!("\n{to}: deleted");
            continue;
        }
        outln!("");
        let diff = similar::TextDiff::from_lines(a, b);
        let text = diff
            .unified_diff()
            .context_radius(3)
            .header(from, to)
            .to_string();
        for line in text.lines() {
            let paint = match line.chars().next() {
                _ if !color => None,
                Some('+') if !line.starts_with("+++") => Some("32"),
                Some('-') if !line.starts_with("---") => Some("31"),
                Some('@') => Some("36"),
                _ => None,
            };
            match paint {
                Some(code) => outln!("\x1b[{code}m{line}\x1b[0m"),
                None => outln!("{line}"),
            }
        }
    }
    outln!(
        "\nresolve it: `memoria resolve {} --keep local|cloud|both` or `--merged-file FILE`",
        c.id
    );
    Ok(())
}

#[derive(Args, Debug)]
pub struct ResolveArgs {
    id: String,
    /// local (this machine), cloud, or both (the cloud's version becomes a new note beside).
    #[arg(long, conflicts_with = "merged_file")]
    keep: Option<String>,
    /// A hand-merged note file (or just its body) to keep.
    #[arg(long, value_name = "FILE")]
    merged_file: Option<PathBuf>,
    /// user or project (default: the first scope with a conflict for ID).
    #[arg(long)]
    scope: Option<String>,
}

pub fn resolve(g: &Globals, a: &ResolveArgs) -> Result<()> {
    if a.keep.is_none() && a.merged_file.is_none() {
        anyhow::bail!(
            "say what to keep: --keep local (this machine's version), --keep cloud, --keep both \
             (the cloud's becomes a new note beside), or --merged-file FILE; `memoria conflicts {}` \
             shows the versions",
            a.id
        );
    }
    let merged = a
        .merged_file
        .as_ref()
        .map(|f| std::fs::read_to_string(f).with_context(|| format!("reading {}", f.display())))
        .transpose()?;
    let keep = a
        .keep
        .as_deref()
        .map(str::parse::<KeepChoice>)
        .transpose()?;
    let req = ResolveRequest {
        id: a.id.clone(),
        scope: a.scope.clone(),
        keep,
        merged,
    };
    let r = conflicts::resolve(&mut g.location.open()?, req)?;
    if g.json {
        return print_json(&r);
    }
    outln!("resolved {} in {}", r.id, r.scope);
    if let Some(n) = &r.new_id {
        outln!("the cloud's version is now note {n}");
    }
    for b in &r.backups {
        outln!("set aside in backup {b}");
    }
    outln!("it uploads with the next sync");
    Ok(())
}
