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
