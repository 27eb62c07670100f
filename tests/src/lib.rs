//! Fixtures shared by the integration tests.
