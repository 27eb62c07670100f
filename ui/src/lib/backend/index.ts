// The only module that knows Tauri. One typed async function per Tauri command; the shell's
// `#[tauri::command]` functions take the arguments named in each doc comment (Tauri maps the
// camelCase argument names below to the Rust functions' snake_case parameters) and return the
// JSON shapes in `types.ts`. Errors arrive as `{code, message}` and are rethrown as
// `BackendFailure` (which is a `BackendError`).

import { invoke } from '@tauri-apps/api/core';
import { listen } from '@tauri-apps/api/event';
import type {
  Backend,
  BackendError,
  BackendEvent,
  BackupPreview,
  BackupRow,
  Conflict,
  Consolidation,
  ConsolidationPlan,
  ConversationExtract,
  ConversationForgotten,
  ConversationMessage,
  ConversationRow,
  ConversationStats,
  ConsolidationStatus,
  CreateNote,
  Dismissed,
  DraftKind,
  EpisodicFacts,
  FactQuery,
  Forgotten,
  ImportReport,
  ImportRequest,
  ListFilter,
  Merged,
  MergePlan,
  MergeRequest,
  NoteDetail,
  NotePatch,
  NoteRow,
  Overview,
  Promoted,
  Promotion,
  QuarantineApplied,
  QuarantineCounts,
  QuarantineOverview,
  QuarantineRelease,
  QuarantineSelection,
  Resolution,
  Resolved,
  Restored,
  ReviewQueue,
  ScopeInfo,
  ScopeKey,
  SearchHit,
  SearchQuery,
  Settings,
  SettingsPatch,
  SyncDecrypted,
  SyncE2ee,
  SyncEncrypted,
  SyncLogin,
  SyncPassphraseReset,
  SyncRotated,
  SyncSecret,
  SyncStatus,
  WorkingBlock,
  CaptureRun,
} from './types';

export type * from './types';

/** The Tauri event channel every backend event arrives on. */
export const EVENT_CHANNEL = 'memoria://event';

/** A failed command: `code` is one of `BackendError`'s codes. */
export class BackendFailure extends Error implements BackendError {
  code: string;
  detail?: unknown;
  constructor(code: string, message: string, detail?: unknown) {
    super(message);
    this.name = 'BackendFailure';
    this.code = code;
    this.detail = detail;
  }
}

/** Turns whatever a rejected `invoke` carried into a `BackendFailure`. */
export function toBackendError(e: unknown): BackendFailure {
  if (e instanceof BackendFailure) return e;
  if (e && typeof e === 'object' && 'code' in e && 'message' in e) {
    const o = e as { code: unknown; message: unknown; detail?: unknown };
    return new BackendFailure(String(o.code), String(o.message), o.detail);
  }
  if (typeof e === 'string') return new BackendFailure('internal', e);
  if (e instanceof Error) return new BackendFailure('internal', e.message);
  return new BackendFailure('internal', String(e));
}

async function call<T>(command: string, args?: Record<string, unknown>): Promise<T> {
  try {
    return await invoke<T>(command, args);
  } catch (e) {
    throw toBackendError(e);
  }
}

/** `list_scopes()` → `ScopeInfo[]`: user first, then projects, then domains. */
export const listScopes = (): Promise<ScopeInfo[]> => call('list_scopes');

/** `list_notes({filter: ListFilter})` → `NoteRow[]`, most recently updated first. Broken
 * notes are included with `error` set. */
export const listNotes = (filter: ListFilter = {}): Promise<NoteRow[]> =>
  call('list_notes', { filter });

/** `get_note({scope: string, id: string})` → `NoteDetail`. A broken note resolves (with
 * `error` and `raw`) rather than failing. */
export const getNote = (scope: ScopeKey, id: string): Promise<NoteDetail> =>
  call('get_note', { scope, id });

/** `create_note({note: CreateNote})` → `NoteRow` of the written note. */
export const createNote = (note: CreateNote): Promise<NoteRow> => call('create_note', { note });

/** `update_note({scope: string, id: string, patch: NotePatch})` → `NoteRow`. */
export const updateNote = (scope: ScopeKey, id: string, patch: NotePatch): Promise<NoteRow> =>
  call('update_note', { scope, id, patch });

/** `forget_note({scope: string, id: string})` → `Forgotten`: the note is removed and its
 * last version backed up. */
export const forgetNote = (scope: ScopeKey, id: string): Promise<Forgotten> =>
  call('forget_note', { scope, id });

/** `search_notes({query: SearchQuery})` → `SearchHit[]` (hybrid recall, best first; `explain`
 * set on each hit when `query.explain` is true). Never records an access. */
export const searchNotes = (query: SearchQuery): Promise<SearchHit[]> =>
  call('search_notes', { query });

/** `list_backups({limit: number})` → `BackupRow[]`, newest first (the app asks for 50). */
export const listBackups = (limit = 50): Promise<BackupRow[]> => call('list_backups', { limit });

/** `preview_backup({backupId: string})` → `BackupPreview`. */
export const previewBackup = (backupId: string): Promise<BackupPreview> =>
  call('preview_backup', { backupId });

/** `restore_backup({backupId: string})` → `Restored` (a newer current version is backed up
 * first). */
export const restoreBackup = (backupId: string): Promise<Restored> =>
  call('restore_backup', { backupId });

/** `sync_status()` → `SyncStatus`. */
export const syncStatus = (): Promise<SyncStatus> => call('sync_status');

/** `sync_login({login: SyncLogin})` → `SyncStatus`. Stores the token in the OS keychain;
 * signing in turns sync on unless 关闭云同步 is set. */
export const syncLogin = (login: SyncLogin): Promise<SyncStatus> => call('sync_login', { login });

/** `sync_logout()` → `SyncStatus`. Forgets the token; notes stay. */
export const syncLogout = (): Promise<SyncStatus> => call('sync_logout');

/** `sync_set_enabled({enabled: boolean, scope: string | null})` → `SyncStatus`. `scope: null`
 * is the whole 关闭云同步 switch (off cancels requests in flight and blocks automatic and
 * manual syncs); a scope key turns only that scope on or off. */
export const syncSetEnabled = (enabled: boolean, scope: ScopeKey | null = null): Promise<SyncStatus> =>
  call('sync_set_enabled', { enabled, scope });

/** `sync_now()` → `SyncStatus` after the pass (立即同步). Rejects with `sync_off` while cloud
 * sync is off and `not_signed_in` when not signed in. */
export const syncNow = (): Promise<SyncStatus> => call('sync_now');

/** `sync_repoint({server: string})` → `SyncStatus` after the pass that follows. Moves the
 * scopes synced at another address to `server` once it proves to be the same store; rejects
 * with `not_same_store` or `account_mismatch` (nothing changed) otherwise. */
export const syncRepoint = (server: string): Promise<SyncStatus> => call('sync_repoint', { server });

/** `sync_e2ee()` → `SyncE2ee`. Asks the server unless this machine holds the account key. */
export const syncE2ee = (): Promise<SyncE2ee> => call('sync_e2ee');

/** `sync_encrypt({passphrase: string})` → `SyncEncrypted`. The recovery key in it is shown
 * once and never kept by the shell. */
export const syncEncrypt = (passphrase: string): Promise<SyncEncrypted> => call('sync_encrypt', { passphrase });

/** `sync_unlock({passphrase: string | null, recoveryKey: string | null})` → `SyncStatus`;
 * rejects with `wrong_passphrase` when the secret does not open the account key. */
export const syncUnlock = (secret: SyncSecret): Promise<SyncStatus> => call('sync_unlock', secretArgs(secret));

/** `sync_change_passphrase({passphrase: string | null, recoveryKey: string | null,
 * newPassphrase: string})`; rejects with `wrong_passphrase` when the current secret does not
 * open the account key, and `invalid_input` for a new passphrase under 8 characters. */
export const syncChangePassphrase = (current: SyncSecret, newPassphrase: string): Promise<void> =>
  call('sync_change_passphrase', { ...secretArgs(current), newPassphrase });

/** `sync_reset_passphrase({newPassphrase: string})` → `{recoveryKey}`: a new passphrase and a
 * new recovery key (shown once) proven by the account key this machine holds; rejects with
 * `e2ee_locked` when it does not hold the account's current key. */
export const syncResetPassphrase = (newPassphrase: string): Promise<SyncPassphraseReset> => call('sync_reset_passphrase', { newPassphrase });

/** `sync_rotate_key({passphrase: string, lockOut: boolean})` → `SyncRotated`; rejects with
 * `wrong_passphrase` when the passphrase does not open the account key. */
export const syncRotateKey = (passphrase: string, lockOut: boolean): Promise<SyncRotated> => call('sync_rotate_key', { passphrase, lockOut });

/** `sync_decrypt()` → `SyncDecrypted`; rejects with `keys_exist` while a rotation is under way. */
export const syncDecrypt = (): Promise<SyncDecrypted> => call('sync_decrypt');

/** A secret as the shell's commands take it: exactly one of the two set. */
function secretArgs(secret: SyncSecret): { passphrase: string | null; recoveryKey: string | null } {
  return 'passphrase' in secret ? { passphrase: secret.passphrase, recoveryKey: null } : { passphrase: null, recoveryKey: secret.recoveryKey };
}

/** `list_conflicts()` → `Conflict[]`. */
export const listConflicts = (): Promise<Conflict[]> => call('list_conflicts');

/** `resolve_conflict({scope: string, id: string, resolution: Resolution})` → `Resolved`.
 * `resolution` is `{keep: "keep_local" | "keep_cloud" | "keep_both"}` or
 * `{keep: "merged", text: string}`. */
export const resolveConflict = (scope: ScopeKey, id: string, resolution: Resolution): Promise<Resolved> =>
  call('resolve_conflict', { scope, id, resolution });

/** `overview()` → `Overview`. */
export const overview = (): Promise<Overview> => call('overview');

/** `review_queue()` → `ReviewQueue`: every finding of the visible notes no dismissal holds
 * for, computed on this machine without a model. */
export const reviewQueue = (): Promise<ReviewQueue> => call('review_queue');

/** `review_dismiss({findingId: string})` → `Dismissed`: hidden until one of its notes changes. */
export const dismissFinding = (findingId: string): Promise<Dismissed> => call('review_dismiss', { findingId });

/** `merge_plan({ids: string[], scope: string | null, draft: "manual" | "model"})` →
 * `MergePlan`. The model draft rejects with `config` when no chat model is configured. */
export const mergePlan = (ids: string[], scope: ScopeKey | null, draft: DraftKind): Promise<MergePlan> =>
  call('merge_plan', { ids, scope, draft });

/** `merge_apply({request: MergeRequest})` → `Merged`. Rejects with `changed_since` unless the
 * notes are as they were in the plan `request.planId` names. */
export const mergeApply = (request: MergeRequest): Promise<Merged> => call('merge_apply', { request });

/** `consolidation_last()` → `ConsolidationStatus`: the last pass on this machine (the daily
 * one's or one applied on request) and when the next daily pass falls due. */
export const consolidationLast = (): Promise<ConsolidationStatus> => call('consolidation_last');

/** `consolidation_preview()` → `ConsolidationPlan`: what a pass now would fold; writes nothing. */
export const consolidationPreview = (): Promise<ConsolidationPlan> => call('consolidation_preview');

/** `consolidation_apply({plan: ConsolidationPlan})` → `Consolidation`. Originals are marked
 * `consolidated` and backed up, never deleted; a cluster changed since the preview is skipped. */
export const consolidationApply = (plan: ConsolidationPlan): Promise<Consolidation> =>
  call('consolidation_apply', { plan });

/** `review_promotions()` → `Promotion[]`: the facts said in three or more captured
 * conversations of a visible scope, still current and never promoted; the most stated first. */
export const listPromotions = (): Promise<Promotion[]> => call('review_promotions');

/** `review_promote({key: string})` → `Promoted`: a note written through the derive path from
 * every message that stated the fact, as trusted as the least trusted of them. Rejects with
 * `not_found` once the fact is no longer ready. */
export const promote = (key: string): Promise<Promoted> => call('review_promote', { key });

/** `import_folder({request: ImportRequest})` → `ImportReport`; emits `indexProgress` events
 * with `task: "import"` while it runs. */
export const importFolder = (request: ImportRequest): Promise<ImportReport> =>
  call('import_folder', { request });

/** `get_settings()` → `Settings`. */
export const getSettings = (): Promise<Settings> => call('get_settings');

/** `set_settings({patch: SettingsPatch})` → `Settings` (absent fields unchanged). */
export const setSettings = (patch: SettingsPatch): Promise<Settings> => call('set_settings', { patch });

/** `conversations_list()` → `ConversationRow[]`: the conversations captured on this machine that
 * are visible here, the latest first. */
export const listConversations = (): Promise<ConversationRow[]> => call('conversations_list');

/** `conversation_messages({conversation: string, scope: string | null})` →
 * `ConversationMessage[]` in order. A message the credential guard marked has `secret` set and a
 * placeholder for its text. Rejects with `not_found` for an unknown conversation. */
export const conversationMessages = (conversation: string, scope: ScopeKey | null = null): Promise<ConversationMessage[]> =>
  call('conversation_messages', { conversation, scope });

/** `conversation_forget({conversation: string, scope: string | null})` → `ConversationForgotten`:
 * its messages, texts and recall documents are removed for good (there is no backup). */
export const forgetConversation = (conversation: string, scope: ScopeKey | null = null): Promise<ConversationForgotten> =>
  call('conversation_forget', { conversation, scope });

/** `conversations_stats()` → `ConversationStats`. */
export const conversationStats = (): Promise<ConversationStats> => call('conversations_stats');

/** `conversation_extract({conversation: string, scope: string | null})` → `ConversationExtract`. */
export const conversationExtract = (conversation: string, scope: ScopeKey | null = null): Promise<ConversationExtract> =>
  call('conversation_extract', { conversation, scope });

/** `conversation_facts({query: FactQuery})` → `EpisodicFacts`: the current facts, and with
 * `replaced` those a newer value closed, each with the messages it came from. */
export const conversationFacts = (query: FactQuery): Promise<EpisodicFacts> => call('conversation_facts', { query });

/** `quarantine_overview()` → `QuarantineOverview`: the history and the providers. */
export const quarantineOverview = (): Promise<QuarantineOverview> => call('quarantine_overview');

/** `quarantine_preview({selection: QuarantineSelection})` → `QuarantineCounts`; changes nothing. */
export const quarantinePreview = (selection: QuarantineSelection): Promise<QuarantineCounts> =>
  call('quarantine_preview', { selection });

/** `quarantine_apply({selection: QuarantineSelection})` → `QuarantineApplied`. */
export const quarantineApply = (selection: QuarantineSelection): Promise<QuarantineApplied> =>
  call('quarantine_apply', { selection });

/** `quarantine_release({id: string})` → `QuarantineRelease`. */
export const quarantineRelease = (id: string): Promise<QuarantineRelease> => call('quarantine_release', { id });

/** `working_list()` → `WorkingBlock[]`: the blocks visible here and not expired, newest first. */
export const listWorking = (): Promise<WorkingBlock[]> => call('working_list');

/** `working_remove({key: string})`: removes a block; rejects with `not_found` once it is gone. */
export const removeWorking = (key: string): Promise<void> => call('working_remove', { key });

/** `capture_ledger({limit?: number})` → `CaptureRun[]`: the capture ledger, newest first. */
export const captureLedger = (limit?: number): Promise<CaptureRun[]> => call('capture_ledger', { limit });

/** Listens on `memoria://event`; resolves to the function that stops listening. */
export async function onEvent(handler: (e: BackendEvent) => void): Promise<() => void> {
  return listen<BackendEvent>(EVENT_CHANNEL, (ev) => handler(ev.payload));
}

/** The real backend over Tauri. */
export const tauriBackend: Backend = {
  listScopes,
  listNotes,
  getNote,
  createNote,
  updateNote,
  forgetNote,
  searchNotes,
  listBackups,
  previewBackup,
  restoreBackup,
  syncStatus,
  syncLogin,
  syncLogout,
  syncSetEnabled,
  syncNow,
  syncRepoint,
  syncE2ee,
  syncEncrypt,
  syncUnlock,
  syncChangePassphrase,
  syncResetPassphrase,
  syncRotateKey,
  syncDecrypt,
  listConflicts,
  resolveConflict,
  overview,
  reviewQueue,
  dismissFinding,
  mergePlan,
  mergeApply,
  consolidationLast,
  consolidationPreview,
  consolidationApply,
  listPromotions,
  promote,
  importFolder,
  getSettings,
  setSettings,
  listConversations,
  conversationMessages,
  forgetConversation,
  conversationStats,
  conversationExtract,
  conversationFacts,
  listWorking,
  removeWorking,
  captureLedger,
  quarantineOverview,
  quarantinePreview,
  quarantineApply,
  quarantineRelease,
  onEvent,
};
