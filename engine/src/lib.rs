//! memoria-engine
