//! Fixtures shared by the integration tests.

pub mod llama;
pub mod moto;
pub mod proxy;
pub mod sync_server;

use std::path::PathBuf;

/// Makes `dir` a project folder with the project id `id` (its `.memoria/project.json`) and an
/// empty `MEMORY/`, as a clone or a worktree of one repository has: the id comes from the
/// repository, not the folder. Returns the folder's canonical path, as `--project` takes it.
pub fn project_folder(dir: &std::path::Path, id: &str) -> String {
    std::fs::create_dir_all(dir.join(".memoria")).unwrap();
    std::fs::create_dir_all(dir.join("MEMORY")).unwrap();
    std::fs::write(
        dir.join(".memoria/project.json"),
        format!("{{\"id\": \"{id}\"}}\n"),
    )
    .unwrap();
    dir.canonicalize().unwrap().to_string_lossy().into_owned()
}

/// A binary of this workspace, built by the same `cargo test`/`cargo nextest` run (every
/// workspace binary with integration tests of its own is built before tests run).
pub fn workspace_bin(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    // target/<profile>/deps/it-<hash> → target/<profile>/<name>
    let dir = exe
        .parent()
        .and_then(|d| d.parent())
        .expect("target profile folder");
    let bin = dir.join(name);
    assert!(
        bin.exists(),
        "{} is not built: run the tests through scripts/test.sh",
        bin.display()
    );
    bin
}

/// A path under `~/.cache/memoria`, where the install scripts put tools and models.
fn memoria_cache(rel: &str) -> PathBuf {
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default();
    home.join(".cache/memoria").join(rel)
}

/// The Python with the test tools (python-frontmatter, the MCP SDK) that
/// `scripts/install-test-tools.sh` installs.
pub fn test_python() -> PathBuf {
    if let Some(p) = std::env::var_os("MEMORIA_TEST_PYTHON") {
        return PathBuf::from(p);
    }
    let default = memoria_cache("tools/py-venv/bin/python");
    assert!(
        default.exists(),
        "the test Python is not installed: run scripts/install-test-tools.sh (or set MEMORIA_TEST_PYTHON)"
    );
    default
}

/// The Python with the MCP Python SDK 2.x that `scripts/install-test-tools.sh` installs: the
/// same MCP client script runs against both SDK major versions.
pub fn test_python_mcp2() -> PathBuf {
    if let Some(p) = std::env::var_os("MEMORIA_TEST_PYTHON_MCP2") {
        return PathBuf::from(p);
    }
    let default = memoria_cache("tools/py-venv-mcp2/bin/python");
    assert!(
        default.exists(),
        "the MCP SDK 2.x Python is not installed: run scripts/install-test-tools.sh (or set MEMORIA_TEST_PYTHON_MCP2)"
    );
    default
}

pub mod sync_fixture;

/// The embedding model directory that `scripts/install-model.sh` installs (multilingual-e5-small,
/// int8): `MEMORIA_TEST_MODEL_DIR`, else `~/.cache/memoria/models/e5-small-int8`, where
/// `scripts/test.sh` installs it.
pub fn test_model_dir() -> PathBuf {
    installed_model(
        "MEMORIA_TEST_MODEL_DIR",
        "e5-small-int8",
        "MANIFEST.txt",
        "embedding model",
    )
}

/// The f32 model the int8 one is built from (`MEMORIA_TEST_BASE_MODEL_DIR`, else
/// `~/.cache/memoria/models/e5-small`, where `scripts/test.sh` has `scripts/install-model.sh`
/// keep it).
pub fn test_base_model_dir() -> PathBuf {
    installed_model(
        "MEMORIA_TEST_BASE_MODEL_DIR",
        "e5-small",
        "model.onnx",
        "f32 embedding model",
    )
}

/// `env` when set, else `~/.cache/memoria/models/<name>`, which must hold `marker`.
fn installed_model(env: &str, name: &str, marker: &str, what: &str) -> PathBuf {
    if let Some(p) = std::env::var_os(env).filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    let default = memoria_cache(&format!("models/{name}"));
    assert!(
        default.join(marker).exists(),
        "the {what} is not installed: run scripts/test.sh, which installs it there (or set {env})"
    );
    default
}

/// The evaluation sets beside the repository (`../shared/data`).
pub fn shared_data() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/data");
    assert!(
        dir.is_dir(),
        "{} not found: the shared/ folder must sit beside the repository",
        dir.display()
    );
    dir
}
