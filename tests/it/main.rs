//! One integration test binary for the workspace.
