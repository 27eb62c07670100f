//! One integration test binary for the workspace: tests that cross crate boundaries.

/// The allocator of the `memoria` binary and the app, so what runs here in-process (the
/// sync benchmarks' client above all) allocates as the product does.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod derived;
mod errors;
mod fuzz_corpus;
mod log_in_step;
mod mcp;
mod model_capture;
mod model_cli;
mod model_install;
mod obsidian;
mod privacy;
mod privacy_derived;
mod privacy_gate;
mod privacy_scope;
mod promotion_model;
mod quarantine;
mod recall_model;
mod reimport;
mod review;
mod session;
mod sync_convergence;
mod sync_corrupt;
mod sync_cost;
mod sync_e2e;
mod sync_e2ee;
mod sync_integrity;
mod sync_keychain;
mod sync_live;
mod sync_repoint;
mod sync_server;
mod sync_server_limits;
mod sync_server_listener;
mod sync_server_load;
mod sync_server_s3;
mod sync_token_file;
mod vault_protocol;
