//! What the tests of a real chat model through the `memoria` binary share (`model_capture`,
//! `promotion_model`): a fresh home, the binary run with no model settings from the
//! environment, so the home's `config.json` is where the model is set, and a note's front
//! matter as it was written. The model itself is `memoria_tests::llama::ChatModel`.

use std::path::Path;
use std::process::Command;

use memoria_tests::sync_fixture::Device;
use serde_json::Value;

/// The model name the tests set (`model.name`).
pub const MODEL_NAME: &str = "smollm2-135m";

/// A device over a new home inside `tmp`.
pub fn device(tmp: &Path) -> Device {
    let d = Device::new(tmp.join("home"), "");
    std::fs::create_dir_all(&d.home).unwrap();
    d
}

/// `memoria ARGS` with no model settings from the environment, not started yet.
pub fn command(d: &Device, args: &[&str]) -> Command {
    let mut c = d.command(args);
    for key in [
        "MEMORIA_MODEL__URL",
        "MEMORIA_MODEL__NAME",
        "MEMORIA_MODEL__LOCAL_HOSTS",
        "MEMORIA_MODEL__API_KEY",
    ] {
        c.env_remove(key);
    }
    c
}

/// `memoria --json ARGS` (see [`command`]), required to succeed; its output.
pub fn json(d: &Device, args: &[&str]) -> Value {
    let mut full = vec!["--json"];
    full.extend_from_slice(args);
    let out = command(d, &full).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "memoria {args:?} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("memoria {args:?}: {e}: {stdout}"))
}

/// The front matter of the user-scope note `id` (written as one JSON line).
pub fn front(d: &Device, id: &str) -> Value {
    let path = d.home.join("memory/user").join(format!("{id}.md"));
    let file = std::fs::read_to_string(&path).unwrap();
    serde_json::from_str(file.lines().nth(1).unwrap())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}
