// The contract between the web UI and the desktop shell: every value a Tauri command returns or
// an event carries, as JSON (camelCase keys, `null` for an absent value, times in ms since the
// Unix epoch). The shell serializes its Rust structs to exactly these shapes.

/** A note scope key: `user`, `project:<id>` (or `project:<id>@<tag>`), `domain:<type>`. */
export type ScopeKey = string;

export type NoteType = 'user' | 'feedback' | 'project' | 'reference' | 'domain';
export const NOTE_TYPES: readonly NoteType[] = ['user', 'feedback', 'project', 'reference', 'domain'];

/** Trust can only be lowered: owner > derived > peer > ingested > quarantined. */
export type Trust = 'owner' | 'derived' | 'peer' | 'ingested' | 'quarantined';

/** The error every command rejects with. */
export interface BackendError {
  /** One of the engine's stable `snake_case` codes (docs/errors.md): `not_found`,
   * `invalid_input`, `credential_refused`, `broken_note`, `too_large`, `limit_reached`,
   * `sync_off`, `not_signed_in`, `conflict`, `busy`, `internal`, …. The UI branches only on
   * the code; `message` is for people. */
  code: string;
  message: string;
  /** Structured facts (the limit, the scope, the path, when to retry), when there are any. */
  detail?: unknown;
}

/** One scope as the notes list groups it. */
export interface ScopeInfo {
  key: ScopeKey;
  kind: 'user' | 'project' | 'domain';
  /** A person's name for it: `User`, the project folder's name, the domain type. */
  label: string;
  /** The project folder, for project scopes. */
  root: string | null;
  count: number;
}

/** A row of the notes list (also what create/update return). */
export interface NoteRow {
  scope: ScopeKey;
  id: string;
  summary: string;
  noteType: NoteType | null;
  tags: string[];
  updatedAt: number | null;
  /** Set when the note's file does not parse; the row then shows the error, never hides. */
  error: string | null;
  /** The life-cycle state as written (`consolidated`, `archived`); `null` for a working note. */
  status: string | null;
  /** Set when the note was consolidated into another note or another note supersedes it: it
   * ranks below that note (× 0.5), and the list dims it. `id` is `null` when that note is gone. */
  replacedBy: ReplacedBy | null;
}

export type ReplacedHow = 'consolidated' | 'superseded';

/** What replaced a note (a note of the same scope). */
export interface ReplacedBy {
  how: ReplacedHow;
  id: string | null;
}

/** An open note. */
export interface NoteDetail extends NoteRow {
  body: string;
  /** The file's text as on disk when it has a parse error (what the editor shows then); empty for a note that parses. */
  raw: string;
  /** The note file's absolute path. */
  path: string;
  createdAt: number | null;
  trust: Trust | null;
  /** 0..1 */
  importance: number | null;
  /** Ids this note links to with `[[id]]`, in order of appearance (missing notes included). */
  links: string[];
  /** Notes that link to this one. */
  backlinks: { scope: ScopeKey; id: string; summary: string }[];
}

export interface ListFilter {
  /** Only these scopes; empty or absent = every scope. */
  scopes?: ScopeKey[];
  noteType?: NoteType | null;
  tag?: string | null;
}

export interface CreateNote {
  summary: string;
  body: string;
  noteType: NoteType | null;
  tags: string[];
  /** Absent: the engine's default for the type (only `user` notes go to user scope). */
  scope?: ScopeKey | null;
}

/** Changes to a note; an absent field stays as it is. */
export interface NotePatch {
  summary?: string;
  body?: string;
  noteType?: NoteType | null;
  tags?: string[];
  importance?: number | null;
}

export interface Forgotten {
  scope: ScopeKey;
  id: string;
  /** The backup holding the forgotten version (Backups can restore it). */
  backupId: string;
}

/** The parts of a search result's score. */
export interface Explain {
  bm25Rank: number | null;
  bm25Score: number | null;
  vectorRank: number | null;
  cosine: number | null;
  /** The fused relevance before decay/trust/importance. */
  fused: number;
  /** Share of the query's words found in the notes' vocabulary. */
  coverage: number | null;
  /** The vector side's weight in score fusion for this query. */
  vectorWeight: number | null;
  decay: number;
  trust: number;
  importance: number;
  access: number;
  /** 1 for a current note; × 0.5 for a note consolidated into another or superseded. */
  standing: number;
}

export interface SearchHit {
  scope: ScopeKey;
  id: string;
  summary: string;
  noteType: NoteType | null;
  /** The ranking score: only its order means something. */
  score: number;
  /** How likely the note answers the query, 0–1; null without the semantic model. */
  relevance: number | null;
  /** A short piece of the body around the match, plain text. */
  snippet: string | null;
  explain: Explain | null;
}

export interface SearchQuery {
  query: string;
  /** Default 20. */
  limit?: number;
  scopes?: ScopeKey[];
  /** Ask for `explain` on every hit. */
  explain?: boolean;
}

export type BackupReason =
  | 'forget'
  | 'import-replace'
  | 'restore-over'
  | 'agent-update'
  | 'sync-download'
  | 'conflict-set-aside'
  | 'merge';

export interface BackupRow {
  backupId: string;
  scope: ScopeKey;
  noteId: string;
  reason: BackupReason;
  createdAt: number;
  /** The note's summary in the backup, when it parses. */
  summary: string | null;
}

export interface BackupPreview {
  backup: BackupRow;
  /** The backed-up note file. */
  backupText: string;
  /** The note's current file, `null` when the note no longer exists. */
  currentText: string | null;
}

export interface Restored {
  scope: ScopeKey;
  id: string;
  path: string;
  /** The backup of the version the restore replaced, if it replaced one. */
  replacedBackup: string | null;
  /** The backup equals the current version: nothing was written. */
  unchanged: boolean;
}

export interface Quotas {
  liveNotesPerScope: number;
  changesPerCommit: number;
  bodyBytes: number;
  responseBodyBytes: number;
  tombstoneDays: number;
}

export interface DownloadCounts {
  added: number;
  changed: number;
  deleted: number;
}

export interface ScopeSync {
  scope: ScopeKey;
  label: string;
  enabled: boolean;
  lastSyncedMs: number | null;
  /** The last pass's error, naming the scope; cleared by a successful pass. */
  lastError: string | null;
  lastDownload: DownloadCounts;
  quotas: Quotas | null;
  /** Live notes in this scope (against `quotas.liveNotesPerScope`). */
  liveNotes: number;
  heldBack: string[];
  /** The address the scope was synced at, when it is not the one signed in to: its sync is
   * paused until it is re-pointed (`syncRepoint`). */
  movedFrom: string | null;
}

export interface SyncStatus {
  signedIn: boolean;
  /** The server URL, when one is set. */
  server: string | null;
  /** The account id the server reported. */
  userId: string | null;
  /** False while 关闭云同步 (cloud sync off) is set: no automatic or manual request runs. */
  enabled: boolean;
  /** A pass is running now. */
  running: boolean;
  /** The older of the scopes' last syncs. */
  lastSyncedMs: number | null;
  /** Rate-limited by the server until this time. */
  pausedUntilMs: number | null;
  /** This machine holds the account key: its notes sync end-to-end encrypted. */
  encrypted: boolean;
  /** The key this machine holds was replaced on another machine, which locked the others out
   * (as this machine's last sync found): nothing syncs until it is unlocked with the passphrase
   * or the new recovery key. */
  encryptionLocked: boolean;
  /** A rotation of the account key is under way: scopes synced only from other machines move
   * to the new key when one of them syncs. */
  rotationUnderWay: boolean;
  /** End-to-end encryption is being turned off: each scope goes back to plaintext at its next
   * pass. */
  encryptionTurningOff: boolean;
  /** Another machine turned end-to-end encryption off: this one syncs in plaintext again. */
  encryptionEnded: boolean;
  scopes: ScopeSync[];
}

/** End-to-end encryption as the signed-in account and this machine have it (asks the server
 * unless this machine holds the key). `accountEncrypted && !unlocked` is the `e2ee_locked`
 * state: nothing syncs until the machine is unlocked. */
export interface SyncE2ee {
  /** The server keeps end-to-end encrypted notes. */
  supported: boolean;
  accountEncrypted: boolean;
  unlocked: boolean;
  /** Locked because the key this machine holds was replaced on another machine, which locked
   * the others out (answered from this machine's last sync, without asking the server). */
  keyReplaced: boolean;
}

/** What turning end-to-end encryption on gives back: the recovery key, shown once, and the
 * status after the encrypted passes. */
export interface SyncEncrypted {
  recoveryKey: string;
  status: SyncStatus;
}

/** What setting a new passphrase with this machine's key gives back: the new recovery key,
 * shown once (the one before no longer unlocks). */
export interface SyncPassphraseReset {
  recoveryKey: string;
}

/** What rotating the account key gives back: the new recovery key, shown once (the one before
 * no longer unlocks), and the status after the passes that moved each scope. */
export interface SyncRotated {
  recoveryKey: string;
  /** Machines holding only the previous key must unlock again. */
  lockedOut: boolean;
  /** No scope holds anything under the previous key any more. */
  complete: boolean;
  status: SyncStatus;
}

/** What turning end-to-end encryption off gives back. */
export interface SyncDecrypted {
  /** No scope of the account is encrypted any more. */
  complete: boolean;
  status: SyncStatus;
}

/** What unlocks a machine, or proves the account when the passphrase changes: the passphrase
 * or the recovery key. */
export type SyncSecret = { passphrase: string } | { recoveryKey: string };

export interface SyncLogin {
  server: string;
  token: string;
}

export type ConflictKind = 'no-base' | 'summary' | 'type' | 'body' | 'too-large';

export interface Conflict {
  scope: ScopeKey;
  id: string;
  /** `merge` (with `kinds`) or `vanished-while-edited`. */
  reason: 'merge' | 'vanished-while-edited';
  kinds: ConflictKind[];
  foundAtMs: number;
  /** The last synced note file, when there is one. */
  base: string | null;
  /** This machine's note file (`null`: deleted here). */
  local: string | null;
  /** The cloud's note file (`null`: deleted in the cloud). */
  cloud: string | null;
}

/** How to resolve a conflict. `merged` carries the hand-merged note file (or just its body). */
export type Resolution =
  | { keep: 'keep_local' }
  | { keep: 'keep_cloud' }
  | { keep: 'keep_both' }
  | { keep: 'merged'; text: string };

export interface Resolved {
  scope: ScopeKey;
  id: string;
  /** The new note holding the cloud's version (keep both). */
  newId: string | null;
  /** Backups of what was set aside. */
  backups: string[];
}

export type Tier = 'working' | 'episodic' | 'vault' | 'archive';

export interface EngineCard {
  /** `fastembed` (the model) or `hash` (the deterministic fallback). */
  embedder: string;
  modelId: string;
  /** Why recall runs on the hash fallback; `null` when the model is in use. */
  fallbackReason: string | null;
  /** What a person does to get the model back (a plain sentence). */
  fallbackFix: string | null;
  documents: number;
  documentsWithVectors: number;
  pendingEmbeddings: number;
  lastVectorUpdateMs: number | null;
  modelDir: string | null;
  /** Agents' conversations are captured automatically (the hook, MCP's `memory_log`). */
  capture: boolean;
  /** Conversations and messages the raw log holds on this machine. */
  conversations: number;
  messages: number;
  /** The raw log on this machine: its file's size, and how long it keeps what it holds. */
  rawLog: {
    bytes: number;
    /** Messages older than this many days go (`conversations.maxAgeDays`); 0: no limit. */
    maxAgeDays: number;
    /** The oldest messages go beyond this many MB of text (`conversations.maxTotalMb`); 0: no limit. */
    maxTotalMb: number;
  };
  /** Engine switches, each named by a key the UI translates (`engine.switch.<key>`). */
  switches: { key: EngineSwitch; on: boolean }[];
}

export interface Overview {
  totalNotes: number;
  byScope: { scope: ScopeKey; label: string; count: number }[];
  /** Includes `untyped` for notes without a type. */
  byType: { noteType: NoteType | 'untyped'; count: number }[];
  byTier: { tier: Tier; count: number }[];
  /** Counts of notes per relevance bucket; `buckets[i]` covers `[i/n, (i+1)/n)` of 0..1. */
  relevance: number[];
  brokenNotes: number;
  engine: EngineCard;
}

export interface ImportRequest {
  /** A folder: an Obsidian vault, an OpenClaw export, any folder of Markdown files. */
  path: string;
  scope?: ScopeKey | null;
}

export interface ImportReport {
  scope: ScopeKey;
  files: number;
  added: number;
  updated: number;
  unchanged: number;
  flaggedSecrets: number;
  skipped: { path: string; reason: string }[];
  /** Notes changed here since their import whose source changed too: kept as they are, with
   * the source's new text in the note `beside`. */
  keptEdited: { path: string; id: string; beside: string }[];
  /** Attachments the notes embed or link, copied into the scope's `attachments/` folder. */
  attachments: number;
}

export type Language = 'en' | 'zh' | 'es';
export type ThemeChoice = 'system' | 'light' | 'dark';

export interface Settings {
  /** `null` follows the system locale. */
  language: Language | null;
  theme: ThemeChoice;
  syncServer: string | null;
  modelDir: string | null;
  /** Whether the app runs the daily consolidation pass. */
  dailyConsolidation: boolean;
  /** Whether agents' conversations are captured automatically: the Claude Code hook and MCP's
   *  `memory_log` (the engine's setting `conversations.capture`). `memoria capture FILE` runs
   *  either way. */
  conversationCapture: boolean;
  /** `MEMORIA_CONVERSATIONS__CAPTURE` is set and decides capture; read-only. */
  conversationCaptureEnv: boolean;
  /** MEMORIA_HOME, read-only. */
  home: string;
  /** The system's language as the shell reads it (`LC_ALL`, `LC_MESSAGES`, `LANG`), e.g.
   *  `zh-CN`; read-only. A webview's `navigator.language` does not always follow it. */
  systemLanguage?: string | null;
}

export type SettingsPatch = Partial<Omit<Settings, 'home' | 'systemLanguage' | 'conversationCaptureEnv'>>;

/** Who wrote a message. */
export type MessageRole = 'user' | 'assistant' | 'tool' | 'system' | 'other';

/** A captured conversation, as the Conversations page lists it. */
export interface ConversationRow {
  /** The scope it is kept in: `user`, or the project's where it was captured. */
  scope: ScopeKey;
  id: string;
  /** Where it came from (`claude-code`, `openclaw`, `mcp`), when known. */
  host: string | null;
  messages: number;
  /** When its first and last messages were said, when known. */
  firstAt: number | null;
  lastAt: number | null;
}

/** One message of a conversation, verbatim. */
export interface ConversationMessage {
  /** Stable across captures (`msg:…`). */
  key: string;
  /** Its id in the conversation. */
  messageId: string;
  /** Its place in the conversation. */
  seq: number;
  at: number | null;
  role: MessageRole;
  /** Who said it, by name, when the transcript says. */
  speaker: string | null;
  model: string | null;
  /** What was said; a placeholder when `secret` is set. */
  text: string;
  /** The credential rule the text tripped: it is kept, never shown, recalled or given to an agent. */
  secret: string | null;
  /** The poison gate's detector the text tripped (it reads as instructions to an assistant):
   * kept and shown marked, never recalled, nothing derived from it. */
  quarantined: string | null;
}

export interface ConversationForgotten {
  scope: ScopeKey;
  conversation: string;
  /** Messages removed for good. */
  messages: number;
  /** Facts and summaries drawn out of it, removed with it. */
  derived: number;
}

/** What the raw log holds, and whether capture is on. */
export interface ConversationStats {
  /** Every scope's conversations (the list shows the ones visible here). */
  conversations: number;
  messages: number;
  /** The texts' size before compression. */
  textBytes: number;
  /** The log's file on disk. */
  fileBytes: number;
  /** The hook and MCP's `memory_log` capture (Settings). */
  capture: boolean;
}

/** What was drawn out of a conversation: a summary, facts with the time they held, and the
 * people, places and things it names. `sources` are message keys. */
export interface ConversationExtract {
  summary: { text: string; sources: string[] } | null;
  facts: {
    key: string;
    subject: string;
    attribute: string;
    value: string;
    /** From when the fact held, when known. */
    validFrom: number | null;
    /** Until when it held: set once a later message changed it (no longer current). */
    validTo: number | null;
    sources: string[];
    trust: string | null;
  }[];
  entities: { name: string; kind: string; count: number }[];
}

/** A block of working memory: text kept at hand for the day's work, recalled beside notes until
 * it expires, then gone for good. Never synced. */
export interface WorkingBlock {
  /** `wm:…` */
  key: string;
  scope: ScopeKey;
  text: string;
  /** Who wrote it: the person (`user`) or an agent (`assistant`). */
  role: MessageRole;
  createdAt: number;
  expiresAt: number;
  /** How many times it was opened or recalled. */
  uses: number;
}

/** Why a captured turn wrote nothing (the capture ledger). */
export type CaptureSkipReason =
  | 'too_short'
  | 'cap_reached'
  | 'unparsable'
  | 'rejected_shape'
  | 'poison_gate'
  | 'no_eligible_model'
  | 'error';

/** A row of the capture ledger: one captured turn that reached model capture, and what came of
 * it. It never holds the conversation's text. */
export interface CaptureRun {
  id: number;
  /** When the turn reached the gates, and when its outcome was settled. */
  at: number;
  doneAt: number | null;
  scope: ScopeKey;
  conversation: string;
  /** How it was captured: `hook`, `cli`, `mcp` or `api`. */
  entry: string;
  /** The agent's host (`claude-code`), when known. */
  host: string | null;
  /** The model asked; `null` when none was called. */
  model: string | null;
  state: 'pending' | 'running' | 'written' | 'skipped';
  reason: CaptureSkipReason | null;
  /** The notes written or reinforced (a dated line under `## History`). */
  notes: { id: string; kind: string; reinforced: boolean }[];
  /** What was refused or went wrong, without the conversation's text. */
  detail: string | null;
}

/** Which facts the episodic view lists. */
export interface FactQuery {
  /** Only facts whose subject, attribute or value holds this (any case); blank: all. */
  text?: string | null;
  /** Also the facts a newer value replaced. */
  replaced?: boolean;
  /** At most this many (the engine caps it at 500). */
  limit?: number | null;
}

/** A message a fact came from. */
export interface FactSource {
  /** `msg:…`, as `ConversationMessage.key`. */
  key: string;
  messageId: string;
  seq: number;
  role: MessageRole;
  speaker: string | null;
  /** When it was said, else when it was captured. */
  at: number;
}

/** A fact of the episodic tier, with the conversation and messages it came from. */
export type EpisodicFact = ConversationExtract['facts'][number] & {
  scope: ScopeKey;
  conversation: string;
  /** Its source messages still in the log, in conversation order. */
  messages: FactSource[];
};

export interface EpisodicFacts {
  /** The latest said first. */
  facts: EpisodicFact[];
  /** How many matched, before the limit. */
  total: number;
}

export type FindingKind = 'same_topic' | 'broken_link' | 'missing_file' | 'unused' | 'too_long';
/** The order the Review page groups findings in. */
export const FINDING_KINDS: readonly FindingKind[] = ['same_topic', 'broken_link', 'missing_file', 'unused', 'too_long'];

/** A note a finding is about, as it is now. */
export interface FindingNote {
  scope: ScopeKey;
  id: string;
  summary: string;
  /** The note's content hash: a dismissal holds for this version only. */
  hash: string;
  path: string;
  updatedAt: number | null;
}

interface FindingBase {
  /** Stable: the same kind over the same notes has the same id. */
  id: string;
  scope: ScopeKey;
  notes: FindingNote[];
  /** The engine's sentence for it (English). */
  message: string;
}

/** One entry of the review queue (待整理), with the facts of its kind. */
export type Finding = FindingBase &
  (
    | { kind: 'same_topic'; /** Word overlap, 0..1. */ lexical: number; /** Vector cosine, when both notes have one. */ cosine: number | null }
    | { kind: 'broken_link'; targets: string[] }
    | { kind: 'missing_file'; paths: string[] }
    | { kind: 'unused'; lastUsedAt: number; idleDays: number; unusedDays: number }
    | { kind: 'too_long'; chars: number; limit: number }
  );

export interface ReviewQueue {
  /** Same topic first. */
  findings: Finding[];
  /** Findings hidden by a dismissal that still holds. */
  dismissed: number;
  /** Notes reviewed. */
  notes: number;
  unusedDays: number;
  /** The same-topic rule had embedding vectors (else words only). */
  vectors: boolean;
  /** A chat model is configured: 生成合并建议 can ask it for a draft. */
  modelConfigured: boolean;
}

export interface Dismissed {
  findingId: string;
  /** `scope/id` → the content hash the dismissal holds for. */
  notes: Record<string, string>;
  dismissedAt: number;
}

/** Who writes a merge draft: 手动合并 (every note under its summary) or 生成合并建议 (the model). */
export type DraftKind = 'manual' | 'model';

/** A note of a merge plan, as it was when planned. */
export interface MergeSource {
  id: string;
  summary: string;
  tags: string[];
  hash: string;
  createdAt: number | null;
  updatedAt: number | null;
  path: string;
  body: string;
  /** Its trust (`null`: none written, the person's own). */
  trust: Trust | null;
  /** Whether it holds a secret (tagged `contains-secrets`, or matched by the credential guard). */
  secret: boolean;
}

/** The labels a note written from other notes gets from them: the lowest trust (`null`: full
 * trust), `contains-secrets` when any holds a secret, and whether an agent inferred any. */
export interface Labels {
  trust: Trust | null;
  secret: boolean;
  inferred: boolean;
}

export interface MergePlan {
  /** Names the plan: the scope, the notes and their hashes. */
  planId: string;
  scope: ScopeKey;
  /** The oldest note's id, which the merged note keeps. */
  keptId: string;
  deletedIds: string[];
  /** Oldest first. */
  sources: MergeSource[];
  /** The merged note's tags: every source's, once (`contains-secrets` when a source holds a secret). */
  tags: string[];
  /** The labels the merged note gets from its notes (and, for a model's draft, at most `derived`). */
  labels: Labels;
  draft: { kind: DraftKind; summary: string; body: string };
  /** Notes of the scope whose `[[links]]` to a deleted id will name the kept id. */
  relinked: { id: string; summary: string }[];
}

/** Applies a plan with the text the person settled on. */
export interface MergeRequest {
  ids: string[];
  scope: ScopeKey | null;
  planId: string;
  summary: string;
  body: string;
  /** Who drafted the text it started from: a model's draft makes the merged note at most `derived`. */
  draftedBy: DraftKind;
  /** A trust the person chose for the merged note instead of its notes' lowest; absent unless chosen. */
  trust?: Trust | null;
}

export interface Merged {
  kept: { scope: ScopeKey; id: string; path: string };
  deleted: string[];
  /** Notes whose links now name the kept id. */
  relinked: string[];
  /** Notes linking to a deleted id that do not parse, left as they are. */
  notRelinked: string[];
  /** A backup of every note changed or deleted. */
  backups: string[];
}

/** A note of a consolidation cluster, as it was when planned. */
export type ConsolidationSource = MergeSource;

/** A cluster a consolidation would fold: recent working notes that say the same thing
 * (`similar`), or a goal's `achieves` notes taken in by the note that closed it (`goal`). */
export type ConsolidationCluster = {
  /** Names the cluster: its scope, notes and their hashes. */
  clusterId: string;
  scope: ScopeKey;
  /** The notes that become `consolidated`, oldest first. */
  sources: ConsolidationSource[];
  /** The note the cluster folds into: a new note's id, or the closing note's. */
  intoId: string;
  newNote: boolean;
  draft: { kind: DraftKind; summary: string; body: string };
  tags: string[];
  /** The labels the consolidated note gets from its notes. */
  labels: Labels;
} & ({ basis: 'similar'; cosine: number | null; lexical: number } | { basis: 'goal'; goalId: string; closingId: string });

/** What a pass would do (`consolidation_preview`); sent back unchanged to apply it. */
export interface ConsolidationPlan {
  clusters: ConsolidationCluster[];
  threshold: number;
  minSize: number;
  maxAgeDays: number;
  candidates: number;
  vectors: boolean;
}

/** A cluster left as it was, and why (a note of it changed since the preview, say). */
export interface SkippedCluster {
  clusterId: string;
  reason: string;
}

/** What an applied pass did. */
export interface Consolidation {
  plan: ConsolidationPlan;
  dryRun: boolean;
  applied: { clusterId: string; into: { scope: ScopeKey; id: string; path: string }; sources: string[] }[];
  skipped: SkippedCluster[];
  /** A backup of every note changed. */
  backups: string[];
}

/** A cluster the last pass folded. */
export interface FoldedCluster {
  clusterId: string;
  scope: ScopeKey;
  intoId: string;
  summary: string;
  newNote: boolean;
  goalId: string | null;
  /** The notes now `consolidated` (kept, ranked below the new note), oldest first. */
  sources: string[];
}

/** What the last consolidation pass on this machine did. */
export interface LastConsolidation {
  at: number;
  /** The daily pass (else one asked for with "Consolidate now" or the CLI). */
  daily: boolean;
  folded: FoldedCluster[];
  goalsClosed: string[];
  skipped: SkippedCluster[];
  /** Backups written, one per note changed. */
  backups: number;
  error: string | null;
}

export interface ConsolidationStatus {
  /** `null` until a pass ran on this machine. */
  last: LastConsolidation | null;
  /** Whether the app runs the daily pass (Settings). */
  daily: boolean;
  /** When the next daily pass falls due. */
  nextDueAt: number;
}

/** An engine switch the Overview lists: cloud sync, and notes holding secrets synced too. */
export type EngineSwitch = 'sync' | 'uploadSecrets';

/** A fact said in three or more captured conversations and still current: ready to become a
 * durable note. */
export interface Promotion {
  /** Stable while the fact is; what `promote` takes. */
  key: string;
  /** The scope the note will be written in. */
  scope: ScopeKey;
  subject: string;
  attribute: string;
  value: string;
  /** How it reads (`Ana's team name is Heron`); the note's summary. */
  text: string;
  /** The conversations that stated it, the earliest first. */
  conversations: string[];
  /** Every message that stated it (message keys), the earliest first. */
  sources: string[];
  /** When it was first and last stated. */
  firstAt: number | null;
  lastAt: number | null;
  /** The trust the note will get: the lowest of the messages that stated it (`null`: the
   * person's own words, full trust). */
  trust: Trust | null;
  /** Why an automatic promotion last left it proposed (`null`: none did since it was last
   * stated). */
  autoLeft: PromotionLeft | null;
}

/** Why an automatic promotion left a fact for the person. */
export interface PromotionLeft {
  /** The model asked. */
  model: string;
  code: 'held_back' | 'model_error' | 'not_json' | 'no_summary' | 'summary_too_long' | 'bad_body' | 'value_dropped' | 'poison_gate' | 'credential';
  /** The reason in the engine's words (English): the rule the answer broke, never its text. */
  reason: string;
  at: number;
}

/** A note promoted from a fact. */
export interface Promoted {
  scope: ScopeKey;
  id: string;
  summary: string;
  /** The messages it names as its sources. */
  sources: number;
}

/** Which provider's memory a quarantine takes: any of `hosts`, any of `models` (both named:
 * a message must match both), said within `since`…`until` (ms, inclusive; `null`: no limit). */
export interface QuarantineSelection {
  hosts: string[];
  models: string[];
  since: number | null;
  until: number | null;
}

/** How much a quarantine takes (or took). */
export interface QuarantineCounts {
  messages: number;
  facts: number;
  summaries: number;
  /** Notes a model captured, moved out of the vault while quarantined. */
  notes: number;
  conversations: number;
}

/** A host or model that wrote messages, with how many of them may still be recalled. */
export interface QuarantineProvider {
  kind: 'host' | 'model';
  name: string;
  recallable: number;
}

/** What a release brought back. */
export interface QuarantineRelease {
  id: string;
  /** Messages whose mark was taken off. */
  messages: number;
  /** Facts and summaries given back the trust they had. */
  derived: number;
  rederived: number;
  /** Notes back at their own path. */
  notes: number;
  /** Notes back beside their path (a new file took it): `[path, restoredAs]`. */
  renamed: [string, string][];
  /** Notes gone from the quarantine folder (removed by hand). */
  missing: string[];
  /** Notes that could not be put back (a disk error): `[path, why]`; their file stays in the
   * quarantine folder. */
  failed: [string, string][];
}

/** One quarantine of the history. */
export interface Quarantine {
  id: string;
  createdAt: number;
  selection: QuarantineSelection;
  counts: QuarantineCounts;
  notes: { scope: ScopeKey; id: string; relPath: string; keptAt: string }[];
  releasedAt: number | null;
  release: QuarantineRelease | null;
}

/** The Overview's quarantine card: the history, the latest first, and the providers. */
export interface QuarantineOverview {
  quarantines: Quarantine[];
  providers: QuarantineProvider[];
}

/** What applying did: `id` is `null` when nothing was left to quarantine. */
export interface QuarantineApplied {
  id: string | null;
  counts: QuarantineCounts;
}

/** The payload of the single Tauri event channel `memoria://event`. */
export type BackendEvent =
  | { kind: 'noteAdded'; scope: ScopeKey; id: string }
  | { kind: 'noteChanged'; scope: ScopeKey; id: string }
  | { kind: 'noteRemoved'; scope: ScopeKey; id: string }
  | {
      kind: 'indexProgress';
      /** `import`, `scan` or `embed`. */
      task: string;
      done: number;
      total: number;
      /** The file or note being worked on. */
      current: string | null;
      finished: boolean;
    }
  | { kind: 'modelLoaded'; embedder: string; modelId: string }
  | { kind: 'syncStarted'; scope: ScopeKey }
  | {
      kind: 'syncFinished';
      scope: ScopeKey;
      ok: boolean;
      error: string | null;
      download: DownloadCounts;
      uploaded: number;
      newConflicts: string[];
    }
  | { kind: 'conflictAppeared'; scope: ScopeKey; id: string }
  /** A consolidation pass folded `folded` clusters, `notes` originals marked consolidated. */
  | { kind: 'consolidated'; at: number; folded: number; notes: number }
  | { kind: 'error'; code: string; message: string };

export type EventKind = BackendEvent['kind'];

/** What the UI calls. `index.ts` implements it over Tauri, `fake.ts` in memory. */
export interface Backend {
  listScopes(): Promise<ScopeInfo[]>;
  listNotes(filter?: ListFilter): Promise<NoteRow[]>;
  getNote(scope: ScopeKey, id: string): Promise<NoteDetail>;
  createNote(note: CreateNote): Promise<NoteRow>;
  updateNote(scope: ScopeKey, id: string, patch: NotePatch): Promise<NoteRow>;
  forgetNote(scope: ScopeKey, id: string): Promise<Forgotten>;
  searchNotes(q: SearchQuery): Promise<SearchHit[]>;
  listBackups(limit?: number): Promise<BackupRow[]>;
  previewBackup(backupId: string): Promise<BackupPreview>;
  restoreBackup(backupId: string): Promise<Restored>;
  syncStatus(): Promise<SyncStatus>;
  syncLogin(login: SyncLogin): Promise<SyncStatus>;
  syncLogout(): Promise<SyncStatus>;
  syncSetEnabled(enabled: boolean, scope?: ScopeKey | null): Promise<SyncStatus>;
  syncNow(): Promise<SyncStatus>;
  /** Moves the scopes synced at another address to `server` once the server there proves to
   * hold their notes, then syncs; rejects with `not_same_store` or `account_mismatch` (nothing
   * changed) otherwise. */
  syncRepoint(server: string): Promise<SyncStatus>;
  /** Whether the account is end-to-end encrypted and this machine holds its key. */
  syncE2ee(): Promise<SyncE2ee>;
  /** Turns end-to-end encryption on with `passphrase` (at least 8 characters); rejects with
   * `exists` when the account is encrypted already. */
  syncEncrypt(passphrase: string): Promise<SyncEncrypted>;
  /** Unlocks this machine with the passphrase or recovery key, then syncs; rejects with
   * `wrong_passphrase` (nothing changed) when it does not open the account key. */
  syncUnlock(secret: SyncSecret): Promise<SyncStatus>;
  /** Changes the account's passphrase, proven with the current one (or the recovery key when
   * it is forgotten): the account key is wrapped under `newPassphrase` (at least 8
   * characters), nothing is uploaded again and the recovery key still unlocks. Rejects with
   * `wrong_passphrase` (nothing changed) when `current` does not open the account key. */
  syncChangePassphrase(current: SyncSecret, newPassphrase: string): Promise<void>;
  /** Sets a new passphrase (at least 8 characters) and a new recovery key, proven by the account
   * key this machine holds rather than the current passphrase or recovery key (both lost);
   * rejects with `e2ee_locked` (nothing changed) when this machine does not hold it. */
  syncResetPassphrase(newPassphrase: string): Promise<SyncPassphraseReset>;
  /** Replaces the account key and re-encrypts every scope under it, proven with the
   * passphrase; rejects with `wrong_passphrase` (nothing changed) when it does not open the
   * account key. With `lockOut`, machines holding only the previous key must unlock again. */
  syncRotateKey(passphrase: string, lockOut: boolean): Promise<SyncRotated>;
  /** Turns end-to-end encryption off: every note uploaded again in plaintext, then the
   * ciphertext removed; rejects with `keys_exist` while a rotation is under way and
   * `e2ee_locked` on a machine that does not hold the key. */
  syncDecrypt(): Promise<SyncDecrypted>;
  listConflicts(): Promise<Conflict[]>;
  resolveConflict(scope: ScopeKey, id: string, resolution: Resolution): Promise<Resolved>;
  overview(): Promise<Overview>;
  reviewQueue(): Promise<ReviewQueue>;
  dismissFinding(findingId: string): Promise<Dismissed>;
  mergePlan(ids: string[], scope: ScopeKey | null, draft: DraftKind): Promise<MergePlan>;
  /** Rejects with `changed_since` when a note of the plan changed since it was planned. */
  mergeApply(req: MergeRequest): Promise<Merged>;
  /** The last consolidation pass and when the next daily one falls due. */
  consolidationLast(): Promise<ConsolidationStatus>;
  /** What a consolidation now would fold; writes nothing. */
  consolidationPreview(): Promise<ConsolidationPlan>;
  /** Applies a preview; a cluster whose notes changed since is reported in `skipped`. */
  consolidationApply(plan: ConsolidationPlan): Promise<Consolidation>;
  /** The facts ready to become notes, the most stated first. */
  listPromotions(): Promise<Promotion[]>;
  /** Writes a note from the fact `key` names; rejects with `not_found` once it is no longer
   * ready (replaced, promoted already, forgotten). */
  promote(key: string): Promise<Promoted>;
  importFolder(req: ImportRequest): Promise<ImportReport>;
  getSettings(): Promise<Settings>;
  setSettings(patch: SettingsPatch): Promise<Settings>;
  /** The captured conversations visible here, the latest first. */
  listConversations(): Promise<ConversationRow[]>;
  /** One conversation's messages, in order; `scope` when one id is in several scopes. */
  conversationMessages(conversation: string, scope?: ScopeKey | null): Promise<ConversationMessage[]>;
  /** Removes a conversation and every copy of it for good (no backup). */
  forgetConversation(conversation: string, scope?: ScopeKey | null): Promise<ConversationForgotten>;
  conversationStats(): Promise<ConversationStats>;
  /** The summary, facts and entities drawn out of a conversation. */
  conversationExtract(conversation: string, scope?: ScopeKey | null): Promise<ConversationExtract>;
  /** The facts said in the conversations visible here, the latest said first. */
  conversationFacts(query: FactQuery): Promise<EpisodicFacts>;
  /** The working-memory blocks visible here and not expired, the newest first. */
  listWorking(): Promise<WorkingBlock[]>;
  /** Removes a block before it expires; rejects with `not_found` once it is gone. */
  removeWorking(key: string): Promise<void>;
  /** The capture ledger's latest rows, the newest first. */
  captureLedger(limit?: number): Promise<CaptureRun[]>;
  /** The quarantines of providers' memory, the latest first, and the providers to choose from. */
  quarantineOverview(): Promise<QuarantineOverview>;
  /** What a quarantine of `selection` would hide; changes nothing. */
  quarantinePreview(selection: QuarantineSelection): Promise<QuarantineCounts>;
  /** Hides what `selection` takes from every search, recall and agent. */
  quarantineApply(selection: QuarantineSelection): Promise<QuarantineApplied>;
  /** Brings a quarantine back exactly as it was; rejects with `not_found` for an unknown id and
   * `invalid_input` once it is released. */
  quarantineRelease(id: string): Promise<QuarantineRelease>;
  /** Subscribes to `memoria://event`; resolves to the unsubscribe function. */
  onEvent(handler: (e: BackendEvent) => void): Promise<() => void>;
}
