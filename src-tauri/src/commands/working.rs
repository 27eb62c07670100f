//! Working memory on the Conversations page: the short-lived blocks a person or an agent keeps
//! at hand (MCP's `memory_working`, `memoria working add`), each with its scope and when it
//! expires, and removing one before it does. The API's `WorkingBlock` is the window's shape
//! (`WorkingBlock` in `types.ts`).

use memoria_engine::Engine;
use memoria_engine::api::working;
use memoria_engine::log::WorkingBlock;
use tauri::State;

use crate::{Shell, UiError};

/// The blocks visible here and not expired, the newest first.
pub fn list(engine: &Engine) -> Result<Vec<WorkingBlock>, UiError> {
    Ok(working::list(engine)?)
}

/// Removes a block before it expires.
pub fn remove(engine: &Engine, key: &str) -> Result<(), UiError> {
    Ok(working::remove(engine, key)?)
}

#[tauri::command]
pub async fn working_list(shell: State<'_, Shell>) -> Result<Vec<WorkingBlock>, UiError> {
    shell.read(list).await
}

#[tauri::command]
pub async fn working_remove(shell: State<'_, Shell>, key: String) -> Result<(), UiError> {
    shell.call(move |e| remove(e, &key)).await
}

#[cfg(test)]
mod tests {
    use memoria_engine::OpenOptions;
    use memoria_engine::log::Role;

    use super::*;

    #[test]
    fn a_block_is_listed_with_its_scope_and_expiry_and_removed() {
        let tmp = tempfile::tempdir().unwrap();
        let engine = Engine::open(OpenOptions::without_model(tmp.path())).unwrap();
        assert_eq!(list(&engine).unwrap(), []);
        let b = working::add(&engine, "trying the cache flag", None, Some(3), Role::User).unwrap();
        let listed = list(&engine).unwrap();
        assert_eq!(listed, std::slice::from_ref(&b));
        let json = serde_json::to_value(&listed[0]).unwrap();
        assert_eq!(json["scope"], "user", "{json}");
        assert_eq!(
            json["expiresAt"].as_i64().unwrap() - json["createdAt"].as_i64().unwrap(),
            3 * 3_600_000,
            "{json}"
        );
        remove(&engine, &b.key).unwrap();
        assert_eq!(list(&engine).unwrap(), []);
        assert_eq!(remove(&engine, &b.key).unwrap_err().code, "not_found");
    }
}
