//! Fixtures for the sync tests: the real `memoria-sync` binary on loopback (an RAII guard that
//! kills it), tokens from its CLI, and devices — `memoria` CLI calls with their own home.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

/// `memoria-sync serve` on 127.0.0.1 over a filesystem store; killed on drop.
pub struct SyncServer {
    child: Child,
    pub url: String,
    pub store: PathBuf,
}

impl SyncServer {
    /// Starts a server over `store_dir`, with extra environment (e.g. quotas).
    pub fn start(store_dir: &Path, env: &[(&str, &str)]) -> SyncServer {
        let bin = crate::sync_server::sync_binary();
        let mut cmd = Command::new(bin);
        cmd.arg("serve")
            .arg("--store")
            .arg(format!("fs:{}", store_dir.display()))
            .arg("--listen")
            .arg("127.0.0.1:0")
            .env("MEMORIA_SYNC_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("starting memoria-sync");
        let stdout = child.stdout.take().expect("server stdout");
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("reading the server's address");
        let url = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("unexpected first line from memoria-sync: {line:?}"))
            .to_owned();
        SyncServer {
            child,
            url,
            store: store_dir.to_path_buf(),
        }
    }

    /// A new token for `user`.
    pub fn token(&self, user: &str) -> String {
        let out = Command::new(crate::sync_server::sync_binary())
            .arg("token")
            .arg("create")
            .arg("--store")
            .arg(format!("fs:{}", self.store.display()))
            .arg("--user")
            .arg(user)
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

impl Drop for SyncServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
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

    /// Runs `memoria --home H ARGS` with the device's token in the environment.
    pub fn run(&self, args: &[&str]) -> Output {
        Command::new(crate::workspace_bin("memoria"))
            .arg("--home")
            .arg(&self.home)
            .args(args)
            .env("MEMORIA_SYNC_TOKEN", &self.token)
            .env_remove("MEMORIA_HOME")
            .current_dir(&self.home)
            .output()
            .expect("running memoria")
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

    /// The note file of `id` in the user scope, if any.
    pub fn note(&self, id: &str) -> Option<String> {
        std::fs::read_to_string(self.home.join("memory/user").join(format!("{id}.md"))).ok()
    }
}
