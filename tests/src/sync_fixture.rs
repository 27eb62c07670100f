//! Fixtures for the sync tests: the real `memoria-sync` binary on loopback over either store
//! (an RAII guard that kills it, and the moto server behind it), tokens from its CLI, and
//! devices — `memoria` CLI calls with their own home.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

use crate::moto::{self, MotoServer};

/// The object store behind the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// The filesystem store in a folder of the test.
    Fs,
    /// The S3 store on a moto server of the test's own.
    S3,
}

/// `memoria-sync serve` on 127.0.0.1; killed on drop (then its moto server, if any).
pub struct SyncServer {
    child: Child,
    pub url: String,
    /// The `--store` value.
    pub store: String,
    env: Vec<(String, String)>,
    _moto: Option<MotoServer>,
}

impl SyncServer {
    /// Starts a server over `backend` (a filesystem store lives in `dir`), with extra
    /// environment (e.g. quotas).
    pub fn start(backend: Backend, dir: &Path, env: &[(&str, &str)]) -> SyncServer {
        let mut env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let (store, moto) = match backend {
            Backend::Fs => (format!("fs:{}", dir.join("store").display()), None),
            Backend::S3 => {
                let m = MotoServer::start();
                env.extend(
                    moto::CREDENTIALS
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string())),
                );
                (m.store_url(), Some(m))
            }
        };
        let (child, url) = crate::sync_server::spawn_serve(
            &store,
            env.iter().map(|(k, v)| (k.as_str(), v.as_str())),
            Stdio::null(),
        );
        SyncServer {
            child,
            url,
            store,
            env,
            _moto: moto,
        }
    }

    /// A new token for `user`.
    pub fn token(&self, user: &str) -> String {
        let out = Command::new(crate::sync_server::sync_binary())
            .arg("token")
            .arg("create")
            .arg("--store")
            .arg(&self.store)
            .arg("--user")
            .arg(user)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .output()
            .expect("memoria-sync token create");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .last()
            .expect("a token line")
            .trim()
            .to_owned()
    }
}

impl SyncServer {
    /// Revokes `token` in the server's store.
    pub fn revoke(&self, token: &str) {
        let out = Command::new(crate::sync_server::sync_binary())
            .args(["token", "revoke", "--store", &self.store, token])
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .output()
            .expect("memoria-sync token revoke");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Kills the server now (its store stays).
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for SyncServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// One machine: a `MEMORIA_HOME` driven through the `memoria` CLI.
pub struct Device {
    pub home: PathBuf,
    pub token: String,
}

impl Device {
    pub fn new(home: PathBuf, token: &str) -> Device {
        Device {
            home,
            token: token.to_owned(),
        }
    }

    /// `memoria --home H ARGS` with the device's token in the environment, not started yet.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(crate::workspace_bin("memoria"));
        c.arg("--home")
            .arg(&self.home)
            .args(args)
            .env("MEMORIA_SYNC_TOKEN", &self.token)
            .env_remove("MEMORIA_HOME")
            // Keep test tokens out of a developer's desktop keychain: no session bus.
            .env_remove("DBUS_SESSION_BUS_ADDRESS")
            .env("XDG_RUNTIME_DIR", &self.home)
            .current_dir(&self.home);
        c
    }

    /// Starts `memoria --home H ARGS` in the background (standard error piped).
    pub fn spawn(&self, args: &[&str]) -> Child {
        self.command(args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starting memoria")
    }

    /// Runs `memoria --home H ARGS` to completion.
    pub fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().expect("running memoria")
    }

    /// Runs and requires success; returns stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "memoria {args:?} failed:\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Runs and requires failure; returns stderr.
    pub fn fails(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            !out.status.success(),
            "memoria {args:?} should have failed:\n{}",
            String::from_utf8_lossy(&out.stdout)
        );
        String::from_utf8_lossy(&out.stderr).into_owned()
    }

    /// Adds a note to the user scope (`memoria add --id ID --summary SUMMARY --body BODY`);
    /// requires success and returns stdout.
    pub fn add(&self, id: &str, summary: &str, body: &str) -> String {
        self.ok(&["add", "--id", id, "--summary", summary, "--body", body])
    }

    /// Adds a note to the scope of the project at `project` (`memoria --project PROJECT add
    /// --scope project …`); requires success and returns stdout.
    pub fn add_to_project(&self, project: &str, id: &str, summary: &str, body: &str) -> String {
        self.ok(&[
            "--project",
            project,
            "add",
            "--scope",
            "project",
            "--id",
            id,
            "--summary",
            summary,
            "--body",
            body,
        ])
    }

    /// Signs in to `url` with the device's token; requires success and returns what it said on
    /// standard error (a sign-in to another account or address warns there).
    pub fn login(&self, url: &str) -> String {
        let out = self.run(&["sync", "login", "--server", url, "--token", &self.token]);
        assert!(
            out.status.success(),
            "memoria sync login {url} failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stderr).into_owned()
    }

    /// The note file of `id` in the user scope, if any.
    pub fn note(&self, id: &str) -> Option<String> {
        std::fs::read_to_string(self.home.join("memory/user").join(format!("{id}.md"))).ok()
    }
}
