//! One integration test binary for the workspace: tests that cross crate boundaries.

mod mcp;
mod vault_protocol;
