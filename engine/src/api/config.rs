//! Machine-local settings by name (`model.url`, `model.name`, `review.unusedDays`): read,
//! set and unset. The environment (`MEMORIA_MODEL__URL`, …) overrides the file.

use super::Location;
use crate::error::Result;

pub use crate::config::{ConfigValue, SETTINGS, Setting, Source};

/// Every setting with its value in force.
pub fn list(loc: &Location) -> Result<Vec<ConfigValue>> {
    crate::config::list(&loc.home()?)
}

/// One setting's value in force.
pub fn get(loc: &Location, key: &str) -> Result<ConfigValue> {
    crate::config::get(&loc.home()?, key)
}

/// Stores a setting on this machine; `None` goes back to the default.
pub fn set(loc: &Location, key: &str, value: Option<&str>) -> Result<ConfigValue> {
    crate::config::set(&loc.home()?, key, value)
}
