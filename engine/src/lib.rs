//! memoria-engine

pub mod recall;
