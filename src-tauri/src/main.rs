// No console window beside the app on Windows release builds.
#![cfg_attr(not(debug_assertions), windows_subsystem = "windows")]

/// mimalloc, as the `memoria` binary: glibc's malloc keeps the pages freed after indexing and
/// embedding (one arena per thread, trimmed only from the top), so the app would stay large long
/// after the work. ONNX Runtime keeps glibc's malloc; the web view runs in processes of its own.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    memoria_desktop::run();
}
