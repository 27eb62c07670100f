//! Commands the window calls, one module per page. Each module holds the JSON shapes of its
//! page (the contract is `ui/src/lib/backend/types.ts`), plain functions over the engine (the
//! unit tests call these), and `#[tauri::command]` wrappers of a line or two that run them off
//! the window's thread.

pub mod backups;
pub mod conflicts;
pub mod conversations;
pub mod import;
pub mod notes;
pub mod overview;
pub mod quarantine;
pub mod review;
pub mod search;
pub mod settings;
pub mod sync;
pub mod working;

/// Every command, for `tauri::Builder::invoke_handler`.
pub fn handler() -> impl Fn(tauri::ipc::Invoke) -> bool + Send + Sync + 'static {
    tauri::generate_handler![
        notes::list_scopes,
        notes::list_notes,
        notes::get_note,
        notes::create_note,
        notes::update_note,
        notes::forget_note,
        search::search_notes,
        backups::list_backups,
        backups::preview_backup,
        backups::restore_backup,
        sync::sync_status,
        sync::sync_login,
        sync::sync_logout,
        sync::sync_set_enabled,
        sync::sync_now,
        sync::sync_repoint,
        sync::sync_e2ee,
        sync::sync_encrypt,
        sync::sync_unlock,
        sync::sync_change_passphrase,
        sync::sync_reset_passphrase,
        sync::sync_rotate_key,
        sync::sync_decrypt,
        conflicts::list_conflicts,
        conflicts::resolve_conflict,
        conversations::conversations_list,
        conversations::conversation_messages,
        conversations::conversation_forget,
        conversations::conversation_extract,
        conversations::conversations_stats,
        conversations::conversation_facts,
        conversations::capture_ledger,
        working::working_list,
        working::working_remove,
        overview::overview,
        quarantine::quarantine_overview,
        quarantine::quarantine_preview,
        quarantine::quarantine_apply,
        quarantine::quarantine_release,
        review::review_queue,
        review::review_dismiss,
        review::merge_plan,
        review::merge_apply,
        review::consolidation_last,
        review::consolidation_preview,
        review::consolidation_apply,
        review::review_promotions,
        review::review_promote,
        import::import_folder,
        settings::get_settings,
        settings::set_settings,
    ]
}
