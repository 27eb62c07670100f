//! Fixtures shared by the integration tests.

pub mod moto;
pub mod sync_server;
