//! Commands the desktop window calls, grouped by page.

pub mod notes;
