//! `MEMORIA_HOME`: the one folder that holds everything per-user on this machine.
//!
//! ```text
//! $MEMORIA_HOME/memory/user/            user-scope notes
//! $MEMORIA_HOME/memory/domain/<type>/   domain notes, shared by projects of one type
//! $MEMORIA_HOME/index/memoria.sqlite    the derived index (delete it and it rebuilds)
//! $MEMORIA_HOME/index/locks/            scope write locks and watcher locks
//! $MEMORIA_HOME/backups/                copies taken before any unchosen replacement or delete
//! $MEMORIA_HOME/models/                 embedding models
//! ```

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::fsx;

/// The resolved home folder.
#[derive(Debug, Clone)]
pub struct Home {
    root: PathBuf,
}

impl Home {
    /// `explicit` (from `--home`), else `$MEMORIA_HOME`, else the platform data folder.
    pub fn resolve(explicit: Option<&Path>) -> Result<Home> {
        let root = match explicit {
            Some(p) => p.to_path_buf(),
            None => match std::env::var_os("MEMORIA_HOME").filter(|v| !v.is_empty()) {
                Some(v) => PathBuf::from(v),
                None => dirs::data_dir()
                    .ok_or_else(|| {
                        Error::Config(
                            "cannot find a data folder for this user: set MEMORIA_HOME".into(),
                        )
                    })?
                    .join("memoria"),
            },
        };
        let root = if root.is_relative() {
            std::env::current_dir()
                .map_err(Error::io("read current folder", "."))?
                .join(root)
        } else {
            root
        };
        Ok(Home { root })
    }

    /// Creates the folders that must exist, each private to the user (0700, also when an
    /// older home made them readable by others). Files inside are 0600 (see `fsx`).
    pub fn ensure(&self) -> Result<()> {
        for dir in [
            self.root.clone(),
            self.root.join("memory"),
            self.user_dir(),
            self.root.join("memory").join("domain"),
            self.index_dir(),
            self.index_dir().join("recall"),
            self.index_dir().join("recall").join("lexical"),
            self.locks_dir(),
            self.backups_dir(),
        ] {
            fsx::private_dir(&dir)?;
        }
        Ok(())
    }

    pub fn root(&self) -> &Path {
        &self.root
    }
    pub fn user_dir(&self) -> PathBuf {
        self.root.join("memory").join("user")
    }
    pub fn domain_dir(&self, project_type: &str) -> PathBuf {
        self.root.join("memory").join("domain").join(project_type)
    }
    pub fn index_dir(&self) -> PathBuf {
        self.root.join("index")
    }
    pub fn index_db(&self) -> PathBuf {
        self.index_dir().join("memoria.sqlite")
    }
    pub fn locks_dir(&self) -> PathBuf {
        self.index_dir().join("locks")
    }
    pub fn backups_dir(&self) -> PathBuf {
        self.root.join("backups")
    }
    pub fn models_dir(&self) -> PathBuf {
        self.root.join("models")
    }
}
