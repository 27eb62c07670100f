//! One integration test binary for the workspace: tests that cross crate boundaries.

mod derived;
mod errors;
mod fuzz_corpus;
mod mcp;
mod model_install;
mod privacy;
mod privacy_derived;
mod privacy_scope;
mod recall_model;
mod reimport;
mod review;
mod session;
mod sync_convergence;
mod sync_corrupt;
mod sync_cost;
mod sync_e2e;
mod sync_integrity;
mod sync_keychain;
mod sync_live;
mod sync_server;
mod sync_server_limits;
mod sync_server_listener;
mod sync_server_load;
mod sync_server_s3;
mod sync_token_file;
mod vault_protocol;
