//! memoria-desktop: the desktop shell. Only this crate will know Tauri; today it holds the thin
//! command layer the window will call — each command a few lines over `memoria-engine`, with
//! the JSON shapes the UI sees and errors as `{code, message}`. The Tauri window, menu, tray
//! and keychain arrive with the desktop issue and wrap these functions as `#[tauri::command]`s.

pub mod commands;
pub mod error;

pub use error::UiError;
