//! `memoria model install` and `scripts/install-model.sh`: both install where recall looks with
//! no variable set (`$MEMORIA_HOME/models/default`), leave an installed model alone, and name a
//! missing prerequisite. The full build from PyPI runs in `.ci/run` from a clone with nothing
//! beside it; here the installed test model stands in for a finished install.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use memoria_tests::{test_model_dir, workspace_bin};

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/install-model.sh")
}

fn memoria(home: &Path) -> Command {
    let mut c = Command::new(workspace_bin("memoria"));
    c.arg("--home")
        .arg(home)
        .env_remove("MEMORIA_HOME")
        .env_remove("MEMORIA_MODEL_DIR")
        .env_remove("ORT_DYLIB_PATH");
    c
}

fn text(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn an_installed_model_in_the_default_place_is_left_alone_and_used_by_recall() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    std::fs::create_dir_all(home.join("models")).unwrap();
    std::os::unix::fs::symlink(test_model_dir(), home.join("models/default")).unwrap();
    let default = home.join("models/default");

    let out = memoria(&home).args(["model", "install"]).output().unwrap();
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stderr.contains(&format!("already installed in {}", default.display())),
        "{stderr}"
    );
    let out = memoria(&home)
        .args(["--json", "model", "install"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["modelDir"], default.display().to_string(), "{v}");
    // The script on its own finds the same folder from MEMORIA_HOME alone.
    let out = Command::new("bash")
        .arg(script())
        .env("MEMORIA_HOME", &home)
        .env_remove("MEMORIA_MODEL_DIR")
        .output()
        .unwrap();
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(stdout.trim(), default.display().to_string(), "{stderr}");

    let out = memoria(&home).arg("doctor").output().unwrap();
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.contains("recall:   model "), "{stdout}");
    assert!(stdout.contains("all good"), "{stdout}");
}

/// A folder of the tools the script uses, without python3 (or with one that cannot make a
/// virtual environment, as on Debian without python3-venv).
fn tools_without_python(dir: &Path, python3: Option<&str>) -> PathBuf {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    for tool in [
        "bash",
        "uname",
        "mktemp",
        "awk",
        "grep",
        "sha256sum",
        "cut",
        "dirname",
        "rm",
        "mkdir",
        "cat",
    ] {
        let found = std::env::split_paths(&std::env::var_os("PATH").unwrap())
            .map(|d| d.join(tool))
            .find(|p| p.is_file())
            .unwrap_or_else(|| panic!("{tool} not found"));
        std::os::unix::fs::symlink(found, bin.join(tool)).unwrap();
    }
    if let Some(body) = python3 {
        write_tool(&bin, "python3", body);
    }
    bin
}

/// An executable shell script `name` in `bin`, in place of any tool of that name.
fn write_tool(bin: &Path, name: &str, body: &str) {
    let p = bin.join(name);
    let _ = std::fs::remove_file(&p);
    std::fs::write(&p, body).unwrap();
    std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
}

#[test]
fn a_missing_prerequisite_is_named() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    // The interpreter itself, not a launcher that needs more of PATH (pyenv's shims do).
    let real = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .expect("python3 on PATH");
    let real = String::from_utf8(real.stdout).unwrap().trim().to_owned();
    // A machine as `uname -s` and `uname -m` describe it.
    let uname = |system: &str, machine: &str| {
        format!("#!/bin/sh\ncase \"$1\" in -s) echo {system};; -m) echo {machine};; esac\n")
    };
    let cases = [
        (None, None, "python3 is not installed"),
        (
            Some(format!(
                "#!/bin/sh\ncase \"$*\" in *ensurepip*) exit 1;; esac\nexec {} \"$@\"\n",
                real
            )),
            None,
            "python3-venv is not installed",
        ),
        // The pinned onnxruntime has no wheel for Python 3.10: said before pip is tried.
        (
            Some(format!(
                "#!/bin/sh\ncase \"$*\" in *version_info*) exit 1;; *python_version*) echo 3.10.12;; \
                 *) exec {real} \"$@\";; esac\n"
            )),
            None,
            "python3 is 3.10.12; the model's pinned packages need Python 3.11, 3.12 or 3.13",
        ),
        // An Apple silicon Mac gets as far as Linux does; an Intel Mac is told why not.
        (
            None,
            Some(uname("Darwin", "arm64")),
            "python3 is not installed",
        ),
        (
            None,
            Some(uname("Darwin", "x86_64")),
            "ONNX Runtime 1.24.4 publishes no build for Intel Macs",
        ),
    ];
    for (i, (python3, uname, says)) in cases.iter().enumerate() {
        let bin = tools_without_python(&tmp.path().join(i.to_string()), python3.as_deref());
        if let Some(body) = uname {
            write_tool(&bin, "uname", body);
        }
        let out = memoria(&home)
            .args(["model", "install"])
            .env("PATH", &bin)
            .output()
            .unwrap();
        let (stdout, stderr) = text(&out);
        assert!(!out.status.success(), "{stdout}\n{stderr}");
        assert!(stderr.contains(says), "{stderr}");
        assert!(stderr.contains("the model was not installed"), "{stderr}");
        assert!(!home.join("models/default").exists());
    }
}
