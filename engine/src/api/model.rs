//! The embedding model's installer: where it installs the model, and its files.
//!
//! The installer is the repository's `scripts/install-model.sh` with the converter, quantizer,
//! calibration text and checksums it uses, compiled into the engine, so a `memoria` binary
//! installed anywhere carries the very script a clone runs. A front end writes them to a
//! temporary folder ([`write_installer`]) and runs the script with bash there; the script needs
//! python3 with venv and access to PyPI, and names what is missing.

use std::path::{Path, PathBuf};

use super::Location;
use crate::error::{Error, Result};
use crate::recall::embed;

/// The installer's files, by name; [`INSTALL_SCRIPT`] is the one to run.
pub const INSTALLER_FILES: &[(&str, &str)] = &[
    (
        "install-model.sh",
        include_str!("../../../scripts/install-model.sh"),
    ),
    (
        "convert-e5.py",
        include_str!("../../../scripts/convert-e5.py"),
    ),
    (
        "quantize-model.py",
        include_str!("../../../scripts/quantize-model.py"),
    ),
    (
        "calibration.txt",
        include_str!("../../../scripts/calibration.txt"),
    ),
    (
        "e5-model.sha256",
        include_str!("../../../scripts/e5-model.sha256"),
    ),
];

/// The script of [`INSTALLER_FILES`] to run, with the model folder as its argument.
pub const INSTALL_SCRIPT: &str = "install-model.sh";

/// Where the model is installed so that recall finds it here: `--model-dir`, else
/// `MEMORIA_MODEL_DIR`, else `$MEMORIA_HOME/models/default`.
pub fn install_dir(loc: &Location) -> Result<PathBuf> {
    let home = loc.home()?;
    embed::resolve_model_dir(loc.model_dir.as_deref(), Some(home.root()))
        .ok_or_else(|| Error::Internal("no model folder for this home".into()))
}

/// Whether `dir` holds a model the engine can load: its `model.onnx` and `tokenizer.json`.
pub fn holds_model(dir: &Path) -> bool {
    dir.join("model.onnx").is_file() && dir.join("tokenizer.json").is_file()
}

/// The model folder to open the engine with: the one given (`--model-dir`, a setting), else
/// `MEMORIA_MODEL_DIR`, else the home's `models/default` when a model is installed there, else
/// the first of `bundled` (folders an installed package ships a model in) that holds one, else
/// the home's `models/default` (where the installer puts it). A package's model thus serves
/// until one is installed in the home.
pub fn choose_dir(loc: &Location, bundled: &[PathBuf]) -> Result<PathBuf> {
    let dir = install_dir(loc)?;
    if loc.model_dir.is_some()
        || std::env::var_os("MEMORIA_MODEL_DIR").is_some_and(|v| !v.is_empty())
        || holds_model(&dir)
    {
        return Ok(dir);
    }
    Ok(bundled
        .iter()
        .find(|b| holds_model(b))
        .cloned()
        .unwrap_or(dir))
}

/// Writes the installer's files into `dir`; returns the script to run.
pub fn write_installer(dir: &Path) -> Result<PathBuf> {
    for (name, text) in INSTALLER_FILES {
        let path = dir.join(name);
        std::fs::write(&path, text).map_err(Error::io("write", &path))?;
    }
    Ok(dir.join(INSTALL_SCRIPT))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bundled_model_serves_until_one_is_installed_in_the_home() {
        let tmp = tempfile::tempdir().unwrap();
        let fake_model = |dir: &Path| {
            std::fs::create_dir_all(dir).unwrap();
            std::fs::write(dir.join("model.onnx"), b"m").unwrap();
            std::fs::write(dir.join("tokenizer.json"), b"{}").unwrap();
        };
        let loc = Location {
            home: Some(tmp.path().join("home")),
            ..Default::default()
        };
        let home_model = tmp.path().join("home/models/default");
        let empty = tmp.path().join("empty");
        let bundled = tmp.path().join("usr/lib/Memoria/model");
        let both = [empty.clone(), bundled.clone()];
        assert_eq!(
            choose_dir(&loc, &both).unwrap(),
            home_model,
            "no model anywhere"
        );
        fake_model(&bundled);
        assert!(holds_model(&bundled) && !holds_model(&empty));
        assert_eq!(choose_dir(&loc, &both).unwrap(), bundled);
        fake_model(&home_model);
        assert_eq!(
            choose_dir(&loc, &both).unwrap(),
            home_model,
            "the home's model wins"
        );
        let given = Location {
            model_dir: Some(empty.clone()),
            ..loc
        };
        assert_eq!(
            choose_dir(&given, &both).unwrap(),
            empty,
            "a folder given is used as is"
        );
    }

    /// Every file the script reads from its own folder is in the installer.
    #[test]
    fn the_installer_carries_every_file_its_script_reads_beside_it() {
        let script = INSTALLER_FILES[0].1;
        for needed in ["convert-e5.py", "quantize-model.py", "e5-model.sha256"] {
            assert!(script.contains(needed), "{needed}");
        }
        let quantizer = INSTALLER_FILES
            .iter()
            .find(|(n, _)| *n == "quantize-model.py")
            .unwrap()
            .1;
        assert!(quantizer.contains("calibration.txt"));
        for name in [
            "convert-e5.py",
            "quantize-model.py",
            "e5-model.sha256",
            "calibration.txt",
        ] {
            assert!(INSTALLER_FILES.iter().any(|(n, _)| *n == name), "{name}");
        }
    }
}
