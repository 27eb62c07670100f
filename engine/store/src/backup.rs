//! Backups: a copy of a note's file, with time and reason, taken before any replacement or
//! delete the user did not choose version by version. `$MEMORIA_HOME/backups/<id>.md` holds the
//! exact bytes, `<id>.json` the metadata; the index keeps a list, repaired from the folder.
//!
//! Backups are kept by a stated [`BackupPolicy`] (an age and a total size), pruned oldest first
//! whenever one is written and when `memoria doctor` runs; `forget --purge` removes a note's
//! backups at once ([`Backups::purge_note`]).

use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::fsx;
use crate::index::{BackupRow, Index};

/// Why a backup was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BackupReason {
    /// `memoria forget` / the MCP `forget` tool.
    Forget,
    /// An import replaced a note it had imported before.
    ImportReplace,
    /// A restore replaced a newer version.
    RestoreOver,
    /// An agent replaced a note's body through `remember`.
    AgentUpdate,
    /// A sync download changed or deleted the note.
    SyncDownload,
    /// Conflict resolution set this version aside.
    ConflictSetAside,
    /// A merge (review queue or sync) replaced or deleted the note.
    Merge,
}

impl BackupReason {
    pub const ALL: [BackupReason; 7] = [
        BackupReason::Forget,
        BackupReason::ImportReplace,
        BackupReason::RestoreOver,
        BackupReason::AgentUpdate,
        BackupReason::SyncDownload,
        BackupReason::ConflictSetAside,
        BackupReason::Merge,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            BackupReason::Forget => "forget",
            BackupReason::ImportReplace => "import-replace",
            BackupReason::RestoreOver => "restore-over",
            BackupReason::AgentUpdate => "agent-update",
            BackupReason::SyncDownload => "sync-download",
            BackupReason::ConflictSetAside => "conflict-set-aside",
            BackupReason::Merge => "merge",
        }
    }
}

/// Everything needed to put a backup back where it came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BackupMeta {
    pub backup_id: String,
    /// Scope key: `user`, `project:<id>`, `domain:<type>`.
    pub scope: String,
    pub note_id: String,
    pub reason: BackupReason,
    pub created_at: i64,
    /// Path of the file inside its scope folder.
    pub rel_path: String,
    /// For project notes: the project folder at backup time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project_root: Option<String>,
}

impl BackupMeta {
    pub fn row(&self) -> BackupRow {
        BackupRow {
            backup_id: self.backup_id.clone(),
            scope: self.scope.clone(),
            note_id: self.note_id.clone(),
            reason: self.reason.as_str().to_owned(),
            created_at: self.created_at,
        }
    }
}

/// How long backups stay. Defaults, then `$MEMORIA_HOME/config.json`
/// (`{"backups": {"maxAgeDays": 90, "maxTotalMb": 512}}`), then the environment
/// (`MEMORIA_BACKUPS__MAX_AGE_DAYS`, `MEMORIA_BACKUPS__MAX_TOTAL_MB`). Zero turns a limit off.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct BackupPolicy {
    /// Backups older than this many days are removed.
    pub max_age_days: u64,
    /// When all backups together are larger than this many MiB, the oldest are removed.
    pub max_total_mb: u64,
}

impl Default for BackupPolicy {
    fn default() -> Self {
        BackupPolicy {
            max_age_days: 90,
            max_total_mb: 512,
        }
    }
}

impl BackupPolicy {
    /// The policy of the home at `root`.
    pub fn load(root: &Path) -> Result<BackupPolicy> {
        crate::config::limits_section(
            root,
            "backups",
            &[
                ("MEMORIA_BACKUPS__MAX_AGE_DAYS", "maxAgeDays"),
                ("MEMORIA_BACKUPS__MAX_TOTAL_MB", "maxTotalMb"),
            ],
        )
    }

    fn max_age_ms(&self) -> Option<i64> {
        (self.max_age_days > 0).then(|| (self.max_age_days as i64).saturating_mul(86_400_000))
    }

    fn max_total_bytes(&self) -> Option<u64> {
        (self.max_total_mb > 0).then(|| self.max_total_mb.saturating_mul(1024 * 1024))
    }
}

/// What a prune removed, and what is left.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PruneReport {
    pub removed: usize,
    pub kept: usize,
    pub kept_bytes: u64,
}

/// The backups folder.
#[derive(Debug, Clone)]
pub struct Backups {
    dir: PathBuf,
    policy: BackupPolicy,
    /// When this process last pruned on a write: a burst of writes (a sync download, an
    /// import) lists the folder once, not once per backup.
    last_pruned_ms: std::sync::Arc<std::sync::atomic::AtomicI64>,
}

/// How often writes prune: at most once per this many milliseconds in one process.
const PRUNE_EVERY_MS: i64 = 10 * 60 * 1000;

/// What to back up.
#[derive(Debug, Clone)]
pub struct BackupRequest<'a> {
    pub scope: &'a str,
    pub note_id: &'a str,
    pub rel_path: &'a str,
    pub project_root: Option<&'a Path>,
    pub bytes: &'a [u8],
    pub reason: BackupReason,
    pub now_ms: i64,
}

impl Backups {
    pub fn new(dir: PathBuf, policy: BackupPolicy) -> Self {
        Backups {
            dir,
            policy,
            last_pruned_ms: std::sync::Arc::new(std::sync::atomic::AtomicI64::new(i64::MIN)),
        }
    }

    pub fn policy(&self) -> BackupPolicy {
        self.policy
    }

    /// Writes the copy (bytes first, then metadata, both atomic) and lists it in the index.
    pub fn write(&self, index: &Index, req: BackupRequest<'_>) -> Result<BackupMeta> {
        let short: String = req.note_id.chars().take(40).collect();
        let backup_id = format!("{}-{short}-{}", compact_utc(req.now_ms), fsx::random_hex(2));
        let meta = BackupMeta {
            backup_id: backup_id.clone(),
            scope: req.scope.to_owned(),
            note_id: req.note_id.to_owned(),
            reason: req.reason,
            created_at: req.now_ms,
            rel_path: req.rel_path.to_owned(),
            project_root: req.project_root.map(|p| p.to_string_lossy().into_owned()),
        };
        fsx::write_atomic(&self.bytes_path(&backup_id), req.bytes)?;
        let json = serde_json::to_string_pretty(&meta).unwrap_or_default();
        fsx::write_atomic(&self.meta_path(&backup_id), json.as_bytes())?;
        index.put_backup(&meta.row())?;
        use std::sync::atomic::Ordering;
        let last = self.last_pruned_ms.load(Ordering::Relaxed);
        if req.now_ms.saturating_sub(last) >= PRUNE_EVERY_MS || req.now_ms < last {
            self.last_pruned_ms.store(req.now_ms, Ordering::Relaxed);
            self.prune(index, req.now_ms, Some(&backup_id))?;
        }
        Ok(meta)
    }

    /// Every backup's metadata and size (bytes and metadata files together).
    fn all(&self) -> Vec<(BackupMeta, u64)> {
        let mut out = Vec::new();
        let Ok(entries) = fs::read_dir(&self.dir) else {
            return out;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let Some(id) = name
                .strip_suffix(".json")
                .filter(|_| !name.starts_with('.'))
            else {
                continue;
            };
            // Metadata only: the copies themselves are never read to be counted.
            let Ok(meta) = fs::read(e.path())
                .map_err(|_| ())
                .and_then(|b| serde_json::from_slice::<BackupMeta>(&b).map_err(|_| ()))
            else {
                continue;
            };
            let json = e.metadata().map_or(0, |m| m.len());
            let bytes = fs::metadata(self.bytes_path(id)).map_or(0, |m| m.len());
            out.push((meta, bytes + json));
        }
        out
    }

    /// Removes one backup's files and its index row.
    fn remove(&self, index: &Index, id: &str) -> Result<()> {
        for p in [self.meta_path(id), self.bytes_path(id)] {
            match fs::remove_file(&p) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(Error::io("remove", &p)(e));
                }
                _ => {}
            }
        }
        index.remove_backups(&[id.to_owned()])
    }

    /// Applies the policy: removes backups older than the age limit, then the oldest until the
    /// rest fit the size limit. `keep` (the backup just taken) always stays.
    pub fn prune(&self, index: &Index, now_ms: i64, keep: Option<&str>) -> Result<PruneReport> {
        let mut all = self.all();
        all.sort_by(|a, b| (b.0.created_at, &b.0.backup_id).cmp(&(a.0.created_at, &a.0.backup_id)));
        let mut report = PruneReport::default();
        for (meta, size) in all {
            let pinned = keep == Some(meta.backup_id.as_str());
            let too_old = self
                .policy
                .max_age_ms()
                .is_some_and(|age| now_ms.saturating_sub(meta.created_at) > age);
            let too_big = self
                .policy
                .max_total_bytes()
                .is_some_and(|max| report.kept_bytes + size > max);
            if !pinned && (too_old || too_big) {
                self.remove(index, &meta.backup_id)?;
                report.removed += 1;
            } else {
                report.kept += 1;
                report.kept_bytes += size;
            }
        }
        Ok(report)
    }

    /// Removes every backup of one note (`forget --purge`); returns how many.
    pub fn purge_note(&self, index: &Index, scope: &str, note_id: &str) -> Result<usize> {
        let mut n = 0;
        for (meta, _) in self.all() {
            if meta.scope == scope && meta.note_id == note_id {
                self.remove(index, &meta.backup_id)?;
                n += 1;
            }
        }
        Ok(n)
    }

    pub fn read(&self, backup_id: &str) -> Result<(BackupMeta, Vec<u8>)> {
        let valid = !backup_id.is_empty()
            && backup_id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
            && !backup_id.contains("..");
        let meta_path = self.meta_path(backup_id);
        if !valid || !meta_path.is_file() {
            return Err(Error::BackupNotFound(backup_id.to_owned()));
        }
        let meta: BackupMeta =
            serde_json::from_slice(&fs::read(&meta_path).map_err(Error::io("read", &meta_path))?)
                .map_err(|e| Error::Damaged {
                path: meta_path.clone(),
                reason: e.to_string(),
                fix: "that backup cannot be restored; the others are not affected",
            })?;
        let bytes_path = self.bytes_path(backup_id);
        let bytes = fs::read(&bytes_path).map_err(Error::io("read", &bytes_path))?;
        Ok((meta, bytes))
    }

    /// Makes the index's list match the folder (after a crash, or a rebuilt index).
    pub fn repair_index(&self, index: &Index) -> Result<()> {
        let mut on_disk = std::collections::HashSet::new();
        if let Ok(entries) = fs::read_dir(&self.dir) {
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if let Some(id) = name.strip_suffix(".json")
                    && !name.starts_with('.')
                {
                    on_disk.insert(id.to_owned());
                }
            }
        }
        let listed: std::collections::HashSet<String> = index.backup_ids()?.into_iter().collect();
        for id in on_disk.difference(&listed) {
            if let Ok((meta, _)) = self.read(id) {
                index.put_backup(&meta.row())?;
            }
        }
        let gone: Vec<String> = listed.difference(&on_disk).cloned().collect();
        index.remove_backups(&gone)
    }

    fn bytes_path(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}.md"))
    }
    fn meta_path(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}.json"))
    }
}

/// `20261130T130850123Z`: sortable UTC time with milliseconds.
pub fn compact_utc(ms: i64) -> String {
    let (y, mo, d, h, mi, s, milli) = civil(ms);
    format!("{y:04}{mo:02}{d:02}T{h:02}{mi:02}{s:02}{milli:03}Z")
}

/// `2026-11-30 13:08:50 UTC`.
pub fn human_utc(ms: i64) -> String {
    let (y, mo, d, h, mi, s, _) = civil(ms);
    format!("{y:04}-{mo:02}-{d:02} {h:02}:{mi:02}:{s:02} UTC")
}

/// A day as a person reads it, in UTC: `8 May 2023`.
pub fn human_date(ms: i64) -> String {
    const MONTHS: [&str; 12] = [
        "January",
        "February",
        "March",
        "April",
        "May",
        "June",
        "July",
        "August",
        "September",
        "October",
        "November",
        "December",
    ];
    let (y, mo, d, ..) = civil(ms);
    format!("{d} {} {y}", MONTHS[(mo - 1) as usize])
}

/// Milliseconds since the epoch for an RFC 3339 time (`2024-05-08T13:56:00Z`, with an offset
/// or fractional seconds) or a `YYYY-MM-DD` date (midnight UTC).
pub fn time_to_ms(text: &str) -> Option<i64> {
    let text = text.trim();
    if text.len() == 10 {
        return date_to_ms(text);
    }
    let (date, rest) = text.split_at_checked(10)?;
    let day = date_to_ms(date)?;
    let rest = rest.strip_prefix(['T', 't', ' '])?;
    let (clock, zone) = match rest.find(['Z', 'z', '+', '-']) {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    let mut parts = clock.split(':');
    let h: i64 = parts.next()?.parse().ok()?;
    let mi: i64 = parts.next()?.parse().ok()?;
    let (s, frac_ms) = match parts.next() {
        Some(sec) => {
            let (whole, frac) = sec.split_once('.').unwrap_or((sec, ""));
            let frac: String = frac.chars().chain("000".chars()).take(3).collect();
            (whole.parse::<i64>().ok()?, frac.parse::<i64>().ok()?)
        }
        None => (0, 0),
    };
    if parts.next().is_some() || h > 23 || mi > 59 || s > 60 {
        return None;
    }
    let offset_min = match zone {
        "" | "Z" | "z" => 0,
        z => {
            let sign = if z.starts_with('-') { -1 } else { 1 };
            let (oh, om) = z[1..].split_once(':').unwrap_or((&z[1..], "0"));
            sign * (oh.parse::<i64>().ok()? * 60 + om.parse::<i64>().ok()?)
        }
    };
    Some(day + ((h * 60 + mi - offset_min) * 60 + s) * 1000 + frac_ms)
}

/// Milliseconds since the epoch for a `YYYY-MM-DD` date (midnight UTC).
pub fn date_to_ms(date: &str) -> Option<i64> {
    let mut parts = date.split('-');
    let y: i64 = parts.next()?.parse().ok()?;
    let m: i64 = parts.next()?.parse().ok()?;
    let d: i64 = parts.next()?.parse().ok()?;
    if parts.next().is_some()
        || !(1..=12).contains(&m)
        || !(1..=31).contains(&d)
        || !(1970..=9999).contains(&y)
    {
        return None;
    }
    Some(day_ms(y, m, d))
}

/// Milliseconds since the epoch at the start (UTC) of day `d` of month `m` (1–12) of year `y`.
pub fn day_ms(y: i64, m: i64, d: i64) -> i64 {
    // Howard Hinnant's days_from_civil.
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (m + if m > 2 { -3 } else { 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    (era * 146097 + doe - 719468) * 86_400_000
}

/// The (year, month 1–12, day) of a time, in UTC.
pub fn ymd(ms: i64) -> (i64, i64, i64) {
    let (y, m, d, ..) = civil(ms);
    (y, m, d)
}

fn civil(ms: i64) -> (i64, i64, i64, i64, i64, i64, i64) {
    let days = ms.div_euclid(86_400_000);
    let rem = ms.rem_euclid(86_400_000);
    // Howard Hinnant's civil_from_days.
    let z = days + 719468;
    let era = z.div_euclid(146097);
    let doe = z - era * 146097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + if m <= 2 { 1 } else { 0 };
    (
        y,
        m,
        d,
        rem / 3_600_000,
        rem / 60_000 % 60,
        rem / 1000 % 60,
        rem % 1000,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates() {
        assert_eq!(compact_utc(0), "19700101T000000000Z");
        assert_eq!(compact_utc(1_796_000_930_123), "20261130T010850123Z");
        assert_eq!(human_utc(1_789_000_000_000), "2026-09-10 00:26:40 UTC");
        assert_eq!(date_to_ms("1970-01-02"), Some(86_400_000));
        assert_eq!(
            date_to_ms("2026-11-30").map(compact_utc).as_deref(),
            Some("20261130T000000000Z")
        );
        assert_eq!(date_to_ms("2026-13-01"), None);
        assert_eq!(date_to_ms("notes"), None);
    }

    #[test]
    fn times_as_transcripts_write_them() {
        let day = date_to_ms("2023-05-08").unwrap();
        let at = day + ((13 * 60 + 56) * 60) * 1000;
        assert_eq!(time_to_ms("2023-05-08"), Some(day));
        assert_eq!(time_to_ms("2023-05-08T13:56:00Z"), Some(at));
        assert_eq!(time_to_ms("2023-05-08T13:56:00.250Z"), Some(at + 250));
        assert_eq!(time_to_ms("2023-05-08T15:56:00+02:00"), Some(at));
        assert_eq!(time_to_ms("2023-05-08 13:56"), Some(at));
        assert_eq!(time_to_ms("2023-05-08T25:00:00Z"), None);
        assert_eq!(time_to_ms("yesterday"), None);
        assert_eq!(human_date(at), "8 May 2023");
    }
}
