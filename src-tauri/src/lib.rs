//! memoria-desktop: the desktop shell, and the only crate that knows Tauri. It hosts one
//! engine session on the user's `MEMORIA_HOME` (the same one the CLI and the MCP servers use:
//! every write goes through the engine's per-scope locks, so they are safe side by side), with
//! its file watcher and sync coordinator, and exposes it to the window as commands
//! (`commands/<area>.rs`, each a few lines) and events (`events.rs`). JSON shapes the window
//! sees live here; errors cross as `{code, message}` (`error.rs`).

pub mod commands;
pub mod error;
pub mod events;
pub mod shell;

use std::path::PathBuf;

use memoria_engine::api::{self, Location};
use memoria_engine::{OpenOptions, Session, SessionOptions};
use tauri::Manager;

pub use error::UiError;
pub use shell::Shell;

/// The folder of the app's resources that holds the embedding model and ONNX Runtime in an
/// installed package (`scripts/bundle.sh` puts them there).
pub const BUNDLED_MODEL: &str = "model";

/// How the app opens its engine: the home from `MEMORIA_HOME` (else the platform data folder);
/// the model from `MEMORIA_MODEL_DIR`, else the folder chosen in Settings, else the home's
/// `models/default` when a model is installed there, else the first of `bundled` (the model
/// the package ships) that holds one; and no project — the app sees the user's own scope, not
/// the folder it was started from.
pub fn open_options(bundled: &[PathBuf]) -> OpenOptions {
    let here = Location::default();
    let chosen = here
        .home()
        .ok()
        .and_then(|h| commands::settings::load(h.root()).model_dir)
        .filter(|_| std::env::var_os("MEMORIA_MODEL_DIR").is_none());
    let here = Location {
        model_dir: chosen.map(Into::into),
        ..here
    };
    OpenOptions {
        model_dir: api::model::choose_dir(&here, bundled).ok(),
        ..OpenOptions::default()
    }
}

/// Builds and runs the app until its last window closes.
pub fn run() {
    let logs = Location::default()
        .home()
        .map(|h| h.root().join("logs"))
        .ok();
    let mut log = tauri_plugin_log::Builder::new()
        .level(log::LevelFilter::Info)
        .max_file_size(1_000_000)
        .rotation_strategy(tauri_plugin_log::RotationStrategy::KeepSome(5))
        .clear_targets()
        .target(tauri_plugin_log::Target::new(
            tauri_plugin_log::TargetKind::Stderr,
        ));
    if let Some(dir) = logs {
        log = log.target(tauri_plugin_log::Target::new(
            tauri_plugin_log::TargetKind::Folder {
                path: dir,
                file_name: Some("desktop".into()),
            },
        ));
    }
    let app = tauri::Builder::default()
        // First: a second launch hands over to the running app, which shows its window.
        .plugin(tauri_plugin_single_instance::init(|app, _args, _cwd| {
            if let Some(w) = app.get_webview_window("main") {
                let _ = w.unminimize();
                let _ = w.show();
                let _ = w.set_focus();
            }
        }))
        .plugin(tauri_plugin_window_state::Builder::default().build())
        .plugin(log.build())
        .setup(move |app| {
            let bundled: Vec<PathBuf> = app
                .path()
                .resource_dir()
                .map(|d| d.join(BUNDLED_MODEL))
                .into_iter()
                .collect();
            let mut options = SessionOptions::new(open_options(&bundled));
            options.sync_token = memoria_engine::api::sync::env_token();
            // The daily consolidation pass, unless turned off in Settings: the Notes list
            // shows what it folded (dimmed, linked to what replaced them) and the Review page
            // shows the last pass.
            options.consolidate = Location::default().home().map_or(true, |h| {
                commands::settings::load(h.root()).daily_consolidation()
            });
            let (session, events) = Session::start_subscribed(options)?;
            events::start(app.handle(), events);
            app.manage(Shell::new(session));
            Ok(())
        })
        .invoke_handler(commands::handler())
        .build(tauri::generate_context!());
    match app {
        Ok(app) => app.run(|_, _| {}),
        Err(e) => {
            eprintln!("memoria-desktop: cannot start: {e}");
            std::process::exit(1);
        }
    }
}
