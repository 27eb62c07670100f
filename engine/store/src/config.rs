//! Machine-local settings a person sets by name (`model.url`), kept in
//! `$MEMORIA_HOME/config.json` beside the backup policy and never synced. Each setting has a
//! default, the file's value over it, and an environment variable (`MEMORIA_MODEL__URL`) over
//! both. The set of names is closed: an unknown name is refused rather than stored.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::fsx;
use crate::home::Home;

/// A section of `config.json` holding limits (`{"backups": {"maxAgeDays": 30}}`), read as `T`,
/// with whole-number overrides from the environment: `overrides` pairs each variable
/// (`MEMORIA_BACKUPS__MAX_AGE_DAYS`) with the field it sets (`maxAgeDays`). No file, no section:
/// `T::default()` with the overrides.
pub fn limits_section<T: serde::de::DeserializeOwned + Default>(
    root: &Path,
    key: &str,
    overrides: &[(&str, &str)],
) -> Result<T> {
    let path = root.join("config.json");
    let damaged = |e: serde_json::Error| Error::Damaged {
        path: path.clone(),
        reason: e.to_string(),
        fix: "fix it",
    };
    let mut section = match std::fs::read(&path) {
        Ok(bytes) => serde_json::from_slice::<Value>(&bytes)
            .map_err(damaged)?
            .get(key)
            .cloned()
            .unwrap_or(Value::Null),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Value::Null,
        Err(e) => return Err(Error::io("read", &path)(e)),
    };
    for (var, field) in overrides {
        if let Ok(v) = std::env::var(var)
            && !v.is_empty()
        {
            let n: u32 = v.trim().parse().map_err(|_| {
                Error::Config(format!(
                    "{var}={v:?} is not a whole number: give days or MiB, or 0 for no limit"
                ))
            })?;
            if !section.is_object() {
                section = Value::Object(Map::new());
            }
            section[*field] = Value::from(n);
        }
    }
    if section.is_null() {
        return Ok(T::default());
    }
    serde_json::from_value(section).map_err(damaged)
}

/// What a setting's value must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// An `http://` or `https://` address.
    Url,
    /// A non-empty line of text.
    Text,
    /// A whole number of days, 1 to 36,500.
    Days,
    /// A number above 0 and below 1.
    Fraction,
    /// On or off: `true`/`false` (also `on`/`off`, `yes`/`no`, `1`/`0`).
    Switch,
    /// A whole number up to 10,000,000; 0 turns the limit off.
    Limit,
}

/// A setting Memoria knows.
#[derive(Debug, Clone, Copy)]
pub struct Setting {
    /// The dotted name, which is also its path in `config.json`.
    pub key: &'static str,
    pub about: &'static str,
    pub default: Option<&'static str>,
    kind: Kind,
}

/// Every setting, in the order they are listed.
pub const SETTINGS: [Setting; 16] = [
    Setting {
        key: "model.url",
        about: "OpenAI-compatible endpoint (…/v1/chat/completions) that drafts merges and captures notes from conversations; unset: no model",
        default: None,
        kind: Kind::Url,
    },
    Setting {
        key: "model.name",
        about: "the model name sent to that endpoint",
        default: Some("default"),
        kind: Kind::Text,
    },
    Setting {
        key: LOCAL_HOSTS_KEY,
        about: "hosts of model.url that count as this machine's own, comma-separated: they get text unmasked, as loopback does (every other host gets IBANs, cards, phones and emails masked)",
        default: None,
        kind: Kind::Text,
    },
    Setting {
        key: "review.unusedDays",
        about: "days without a recall, opening or edit after which a note is reported unused",
        default: Some("90"),
        kind: Kind::Days,
    },
    Setting {
        key: "decay.halfLifeDays",
        about: "days after which the importance of a note nobody recalls, opens or edits is halved in ranking",
        default: Some("90"),
        kind: Kind::Days,
    },
    Setting {
        key: "decay.archiveBelow",
        about: "importance (0 to 1) below which a note is archived: left out of recall and search unless asked for",
        default: Some("0.1"),
        kind: Kind::Fraction,
    },
    Setting {
        key: CAPTURE_KEY,
        about: "capture agents' conversations automatically (the Claude Code hook, MCP's memory_log); a capture asked for by name still runs when off",
        default: Some("true"),
        kind: Kind::Switch,
    },
    Setting {
        key: MODEL_CAPTURE_KEY,
        about: "after a captured turn, ask the model at model.url for up to two durable notes (needs conversations.capture on)",
        default: Some("true"),
        kind: Kind::Switch,
    },
    Setting {
        key: "conversations.minUserChars",
        about: "a turn whose user message is shorter than this many characters is not sent to the model (0: no minimum)",
        default: Some("40"),
        kind: Kind::Limit,
    },
    Setting {
        key: "conversations.maxModelCaptures",
        about: "model captures one conversation may spend, counting every call made (0: no limit)",
        default: Some("20"),
        kind: Kind::Limit,
    },
    Setting {
        key: "conversations.maxInputChars",
        about: "the user message and the reply are each cut to this many characters before the model sees them (0: no cut)",
        default: Some("4000"),
        kind: Kind::Limit,
    },
    Setting {
        key: PROMOTE_WITHIN_KEY,
        about: "a fact not stated again within this many days of its scope's latest conversation stops being proposed for promotion (0: proposed however long ago)",
        default: Some("180"),
        kind: Kind::Limit,
    },
    Setting {
        key: "backups.maxAgeDays",
        about: "backups older than this many days are removed (0: kept however old)",
        default: Some("90"),
        kind: Kind::Limit,
    },
    Setting {
        key: "backups.maxTotalMb",
        about: "when all backups together are larger than this many MiB, the oldest go (0: no limit)",
        default: Some("512"),
        kind: Kind::Limit,
    },
    Setting {
        key: "conversations.maxAgeDays",
        about: "captured messages older than this many days are removed with what was derived from them (0: kept however old)",
        default: Some("0"),
        kind: Kind::Limit,
    },
    Setting {
        key: "conversations.maxTotalMb",
        about: "when the captured texts are larger than this many MiB, the oldest messages go (0: no limit)",
        default: Some("0"),
        kind: Kind::Limit,
    },
];

/// The setting that turns automatic capture of conversations on or off.
pub const CAPTURE_KEY: &str = "conversations.capture";

/// The setting that turns model capture (notes a model drafts from a turn) on or off.
pub const MODEL_CAPTURE_KEY: &str = "conversations.modelCapture";

/// The setting after how many days without being stated again a fact stops being proposed
/// for promotion, counted back from its scope's latest conversation.
pub const PROMOTE_WITHIN_KEY: &str = "conversations.promoteWithinDays";

/// The setting that lists hosts of `model.url` treated as this machine's own.
pub const LOCAL_HOSTS_KEY: &str = "model.localHosts";

/// Where a setting's value came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    Default,
    File,
    Env,
}

/// A setting's value in force.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfigValue {
    pub key: String,
    pub value: Option<String>,
    pub source: Source,
    pub about: String,
}

fn setting(key: &str) -> Result<&'static Setting> {
    SETTINGS.iter().find(|s| s.key == key).ok_or_else(|| {
        let names: Vec<&str> = SETTINGS.iter().map(|s| s.key).collect();
        Error::Invalid(format!(
            "unknown setting {key:?}: the settings are {}",
            names.join(", ")
        ))
    })
}

/// `model.url` → `MEMORIA_MODEL__URL`, `review.unusedDays` → `MEMORIA_REVIEW__UNUSED_DAYS`.
fn env_name(key: &str) -> String {
    let mut out = String::from("MEMORIA_");
    for (i, part) in key.split('.').enumerate() {
        if i > 0 {
            out.push_str("__");
        }
        for (j, c) in part.chars().enumerate() {
            if c.is_ascii_uppercase() && j > 0 {
                out.push('_');
            }
            out.push(c.to_ascii_uppercase());
        }
    }
    out
}

fn check(s: &Setting, value: &str, from: &str) -> Result<String> {
    let v = value.trim();
    let ok = match s.kind {
        Kind::Url => {
            (v.starts_with("http://") || v.starts_with("https://"))
                && !v.contains(char::is_whitespace)
        }
        Kind::Text => !v.is_empty() && !v.contains('\n'),
        Kind::Days => v.parse::<u32>().is_ok_and(|d| (1..=36_500).contains(&d)),
        Kind::Fraction => v.parse::<f64>().is_ok_and(|f| f > 0.0 && f < 1.0),
        Kind::Switch => switch(v).is_some(),
        Kind::Limit => v.parse::<u32>().is_ok_and(|n| n <= 10_000_000),
    };
    if ok {
        return Ok(match s.kind {
            Kind::Switch => switch(v).expect("checked").to_string(),
            _ => v.to_owned(),
        });
    }
    let want = match s.kind {
        Kind::Url => "an http:// or https:// address",
        Kind::Text => "one line of text",
        Kind::Days => "a whole number of days from 1 to 36500",
        Kind::Fraction => "a number between 0 and 1, such as 0.1",
        Kind::Switch => "true or false",
        Kind::Limit => "a whole number from 0 (no limit) to 10000000",
    };
    Err(Error::Config(format!(
        "{from} {value:?} is not usable for {}: give {want}",
        s.key
    )))
}

/// A switch's value as people write it, in any case.
fn switch(v: &str) -> Option<bool> {
    match v.to_ascii_lowercase().as_str() {
        "true" | "on" | "yes" | "1" => Some(true),
        "false" | "off" | "no" | "0" => Some(false),
        _ => None,
    }
}

fn file_path(home: &Home) -> PathBuf {
    home.root().join("config.json")
}

fn read_file(path: &Path) -> Result<Map<String, Value>> {
    match std::fs::read(path) {
        Ok(bytes) => match serde_json::from_slice::<Value>(&bytes) {
            Ok(Value::Object(m)) => Ok(m),
            Ok(_) => Err(damaged(path, "not a JSON object".into())),
            Err(e) => Err(damaged(path, e.to_string())),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Map::new()),
        Err(e) => Err(Error::io("read", path)(e)),
    }
}

fn damaged(path: &Path, reason: String) -> Error {
    Error::Damaged {
        path: path.to_path_buf(),
        reason,
        fix: "fix it, or delete it to go back to the default settings",
    }
}

fn lookup<'a>(m: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    let mut parts = key.split('.');
    let mut v = m.get(parts.next()?)?;
    for p in parts {
        v = v.as_object()?.get(p)?;
    }
    Some(v)
}

/// The value in force of a setting: the environment's, else the file's, else the default.
pub fn get(home: &Home, key: &str) -> Result<ConfigValue> {
    let s = setting(key)?;
    let about = s.about.to_owned();
    let var = env_name(key);
    if let Ok(v) = std::env::var(&var)
        && !v.is_empty()
    {
        return Ok(ConfigValue {
            key: key.to_owned(),
            value: Some(check(s, &v, &var)?),
            source: Source::Env,
            about,
        });
    }
    let path = file_path(home);
    let file = read_file(&path)?;
    if let Some(v) = lookup(&file, key) {
        let text = match v {
            Value::String(t) => t.clone(),
            other => other.to_string(),
        };
        return Ok(ConfigValue {
            key: key.to_owned(),
            value: Some(check(s, &text, &format!("{} has", path.display()))?),
            source: Source::File,
            about,
        });
    }
    Ok(ConfigValue {
        key: key.to_owned(),
        value: s.default.map(String::from),
        source: Source::Default,
        about,
    })
}

/// Every setting's value in force.
pub fn list(home: &Home) -> Result<Vec<ConfigValue>> {
    SETTINGS.iter().map(|s| get(home, s.key)).collect()
}

/// Stores a setting in the file (`None` removes it, back to the default); other keys of the
/// file are kept as they are.
pub fn set(home: &Home, key: &str, value: Option<&str>) -> Result<ConfigValue> {
    let s = setting(key)?;
    let path = file_path(home);
    let mut file = read_file(&path)?;
    let parts: Vec<&str> = key.split('.').collect();
    let (last, parents) = parts.split_last().expect("a key has a name");
    let mut at = &mut file;
    for p in parents {
        let slot = at
            .entry(p.to_string())
            .or_insert_with(|| Value::Object(Map::new()));
        if !slot.is_object() {
            *slot = Value::Object(Map::new());
        }
        at = slot.as_object_mut().expect("made an object above");
    }
    match value {
        Some(v) => {
            let v = check(s, v, "the value")?;
            let json = match s.kind {
                Kind::Days => Value::from(v.parse::<u32>().expect("checked")),
                Kind::Fraction => Value::from(v.parse::<f64>().expect("checked")),
                Kind::Switch => Value::from(v == "true"),
                Kind::Limit => Value::from(v.parse::<u32>().expect("checked")),
                _ => Value::String(v),
            };
            at.insert(last.to_string(), json);
        }
        None => {
            at.remove(*last);
        }
    }
    home.ensure()?;
    let bytes = serde_json::to_vec_pretty(&Value::Object(file))
        .map_err(|e| Error::Internal(format!("settings do not serialize: {e}")))?;
    fsx::write_atomic(&path, &bytes)?;
    get(home, key)
}

/// Days without a recall, an opening or an edit after which a note is "unused", unless the
/// setting `review.unusedDays` says otherwise.
pub const UNUSED_DAYS: u32 = 90;

/// The "unused" threshold in force.
pub fn unused_days(home: &Home) -> Result<u32> {
    Ok(get(home, "review.unusedDays")?
        .value
        .and_then(|v| v.parse().ok())
        .unwrap_or(UNUSED_DAYS))
}

/// Whether agents' conversations are captured automatically (`conversations.capture`, on
/// unless turned off; `MEMORIA_CONVERSATIONS__CAPTURE` over the file). The automatic doors ask
/// it before they capture; a capture a person asks for by name does not.
pub fn capture_on(home: &Home) -> Result<bool> {
    Ok(get(home, CAPTURE_KEY)?.value.as_deref() != Some("false"))
}

/// Refuses with `capture_off` while automatic capture is turned off.
pub fn require_capture(home: &Home) -> Result<()> {
    if capture_on(home)? {
        Ok(())
    } else {
        Err(Error::CaptureOff)
    }
}

/// A whole-number setting in force (a `Limit`), or `fallback` when it has no value.
pub fn number(home: &Home, key: &str, fallback: u32) -> Result<u32> {
    Ok(get(home, key)?
        .value
        .and_then(|v| v.parse().ok())
        .unwrap_or(fallback))
}

/// How importance decays and when a note is archived, by the settings in force.
pub fn decay_rule(home: &Home) -> Result<crate::decay::DecayRule> {
    let mut rule = crate::decay::DecayRule::default();
    if let Some(d) = get(home, "decay.halfLifeDays")?
        .value
        .and_then(|v| v.parse::<u32>().ok())
    {
        rule.half_life_days = f64::from(d);
    }
    if let Some(f) = get(home, "decay.archiveBelow")?
        .value
        .and_then(|v| v.parse::<f64>().ok())
    {
        rule.archive_below = f;
    }
    Ok(rule)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_round_trip_through_the_file_and_keep_other_keys() {
        let tmp = tempfile::tempdir().unwrap();
        let home = Home::resolve(Some(tmp.path())).unwrap();
        std::fs::write(
            tmp.path().join("config.json"),
            r#"{"backups": {"maxAgeDays": 3}}"#,
        )
        .unwrap();
        assert_eq!(get(&home, "model.url").unwrap().value, None);
        assert_eq!(unused_days(&home).unwrap(), 90);
        set(&home, "model.url", Some("http://127.0.0.1:9/")).unwrap();
        set(&home, "review.unusedDays", Some("30")).unwrap();
        let v = get(&home, "model.url").unwrap();
        assert_eq!(
            (v.value.as_deref(), v.source),
            (Some("http://127.0.0.1:9/"), Source::File)
        );
        assert_eq!(unused_days(&home).unwrap(), 30);
        let text = std::fs::read_to_string(tmp.path().join("config.json")).unwrap();
        assert!(text.contains("maxAgeDays"), "{text}");
        set(&home, "model.url", None).unwrap();
        assert_eq!(get(&home, "model.url").unwrap().source, Source::Default);
    }

    #[test]
    fn unknown_names_and_unusable_values_are_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let home = Home::resolve(Some(tmp.path())).unwrap();
        let e = set(&home, "model.uri", Some("http://x")).unwrap_err();
        assert_eq!(e.code(), crate::ErrorCode::InvalidInput);
        assert!(e.to_string().contains("model.url"), "{e}");
        let e = set(&home, "model.url", Some("localhost:8080")).unwrap_err();
        assert_eq!(e.code(), crate::ErrorCode::Config);
        let e = set(&home, "review.unusedDays", Some("0")).unwrap_err();
        assert_eq!(e.code(), crate::ErrorCode::Config);
        assert!(!tmp.path().join("config.json").exists());
    }

    #[test]
    fn environment_names_follow_the_double_underscore_rule() {
        assert_eq!(env_name("model.url"), "MEMORIA_MODEL__URL");
        assert_eq!(env_name("review.unusedDays"), "MEMORIA_REVIEW__UNUSED_DAYS");
        assert_eq!(env_name(CAPTURE_KEY), "MEMORIA_CONVERSATIONS__CAPTURE");
    }

    #[test]
    fn capture_is_on_until_turned_off_and_sits_beside_the_log_limits() {
        let tmp = tempfile::tempdir().unwrap();
        let home = Home::resolve(Some(tmp.path())).unwrap();
        std::fs::write(
            tmp.path().join("config.json"),
            r#"{"conversations": {"maxAgeDays": 30}}"#,
        )
        .unwrap();
        assert!(capture_on(&home).unwrap());
        require_capture(&home).unwrap();
        let v = set(&home, CAPTURE_KEY, Some("Off")).unwrap();
        assert_eq!(
            (v.value.as_deref(), v.source),
            (Some("false"), Source::File)
        );
        assert!(!capture_on(&home).unwrap());
        let e = require_capture(&home).unwrap_err();
        assert_eq!(e.code(), crate::ErrorCode::CaptureOff);
        assert_eq!(e.detail().unwrap()["setting"], CAPTURE_KEY);
        // Stored as a JSON boolean in the `conversations` section, whose limits stay.
        let file: Value =
            serde_json::from_slice(&std::fs::read(tmp.path().join("config.json")).unwrap())
                .unwrap();
        assert_eq!(
            file["conversations"],
            serde_json::json!({"maxAgeDays": 30, "capture": false})
        );
        let limits: crate::log::LogPolicy = limits_section(tmp.path(), "conversations", &[])
            .expect("the limits still read with the switch beside them");
        assert_eq!(limits.max_age_days, 30);
        set(&home, CAPTURE_KEY, Some("true")).unwrap();
        assert!(capture_on(&home).unwrap());
        let e = set(&home, CAPTURE_KEY, Some("maybe")).unwrap_err();
        assert_eq!(e.code(), crate::ErrorCode::Config);
        assert!(e.to_string().contains("true or false"), "{e}");
    }

    #[test]
    fn the_limits_backups_and_conversations_name_are_settings_their_policies_read() {
        let tmp = tempfile::tempdir().unwrap();
        let home = Home::resolve(Some(tmp.path())).unwrap();
        set(&home, "backups.maxAgeDays", Some("30")).unwrap();
        set(&home, "conversations.maxTotalMb", Some("0")).unwrap();
        set(&home, "conversations.maxAgeDays", Some("365")).unwrap();
        let backups = crate::backup::BackupPolicy::load(tmp.path()).unwrap();
        assert_eq!((backups.max_age_days, backups.max_total_mb), (30, 512));
        let log = crate::log::LogPolicy::load(tmp.path()).unwrap();
        assert_eq!((log.max_age_days, log.max_total_mb), (365, 0));
        assert!(set(&home, "backups.maxTotalMb", Some("lots")).is_err());
    }
}
