//! Machine-local settings by name (`model.url`, `model.name`, `review.unusedDays`,
//! `conversations.capture`, …): read, set and unset. The environment (`MEMORIA_MODEL__URL`, …)
//! overrides the file.

use super::Location;
use crate::error::{Error, Result};
use crate::vault::Engine;

pub use crate::config::{CAPTURE_KEY, ConfigValue, SETTINGS, Setting, Source};

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

/// Automatic capture of agents' conversations on this machine, as a front end shows it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CaptureSetting {
    /// The hook and MCP's `memory_log` capture.
    pub on: bool,
    /// Where the value comes from; `env` means `MEMORIA_CONVERSATIONS__CAPTURE` decides, and
    /// the file's value does not count while it is set.
    pub source: Source,
}

/// Whether the automatic doors (the hook, MCP's `memory_log`) capture conversations here.
pub fn capture(engine: &Engine) -> Result<CaptureSetting> {
    let v = crate::config::get(engine.home(), CAPTURE_KEY)?;
    Ok(CaptureSetting {
        on: v.value.as_deref() != Some("false"),
        source: v.source,
    })
}

/// Turns automatic capture on or off on this machine. Refused while the environment sets it,
/// since the file's value would then change nothing.
pub fn set_capture(engine: &Engine, on: bool) -> Result<CaptureSetting> {
    let now = capture(engine)?;
    if now.source == Source::Env && now.on != on {
        return Err(Error::Config(
            "MEMORIA_CONVERSATIONS__CAPTURE is set in the environment, and it decides whether \
             conversations are captured: remove it from the environment to change this here"
                .into(),
        ));
    }
    crate::config::set(
        engine.home(),
        CAPTURE_KEY,
        Some(if on { "true" } else { "false" }),
    )?;
    capture(engine)
}

/// `Ok` while automatic capture is on, else `capture_off`: what every automatic door asks
/// before it captures. A capture a person asks for by name (`capture FILE`) does not ask.
pub fn require_capture(engine: &Engine) -> Result<()> {
    crate::config::require_capture(engine.home())
}
