//! One integration test binary for the workspace.

mod sync_server;
mod sync_server_listener;
mod sync_server_load;
mod sync_server_s3;
