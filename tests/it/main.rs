//! One integration test binary for the workspace: tests that cross crate boundaries.

mod mcp;
mod sync_convergence;
mod sync_e2e;
mod vault_protocol;
