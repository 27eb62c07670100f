// The Tauri backend module: each function invokes its snake_case command with camelCase
// arguments, errors become BackendFailure, events arrive from `memoria://event`.
import { beforeEach, describe, expect, it, vi } from 'vitest';

const invoke = vi.fn();
const listen = vi.fn();
vi.mock('@tauri-apps/api/core', () => ({ invoke: (...a: unknown[]) => invoke(...a) }));
vi.mock('@tauri-apps/api/event', () => ({ listen: (...a: unknown[]) => listen(...a) }));

const be = await import('../src/lib/backend/index');

describe('backend module', () => {
  beforeEach(() => {
    invoke.mockReset();
    invoke.mockResolvedValue('ok');
    listen.mockReset();
  });

  const cases: [string, () => Promise<unknown>, string, Record<string, unknown> | undefined][] = [
    ['listScopes', () => be.listScopes(), 'list_scopes', undefined],
    ['listNotes', () => be.listNotes({ scopes: ['user'], noteType: 'user', tag: 'x' }), 'list_notes', { filter: { scopes: ['user'], noteType: 'user', tag: 'x' } }],
    ['listNotes default', () => be.listNotes(), 'list_notes', { filter: {} }],
    ['getNote', () => be.getNote('user', 'a-1'), 'get_note', { scope: 'user', id: 'a-1' }],
    ['createNote', () => be.createNote({ summary: 's', body: 'b', noteType: null, tags: ['t'] }), 'create_note', { note: { summary: 's', body: 'b', noteType: null, tags: ['t'] } }],
    ['updateNote', () => be.updateNote('user', 'a-1', { summary: 's2' }), 'update_note', { scope: 'user', id: 'a-1', patch: { summary: 's2' } }],
    ['forgetNote', () => be.forgetNote('project:p', 'a-1'), 'forget_note', { scope: 'project:p', id: 'a-1' }],
    ['searchNotes', () => be.searchNotes({ query: 'q', explain: true }), 'search_notes', { query: { query: 'q', explain: true } }],
    ['listBackups', () => be.listBackups(), 'list_backups', { limit: 50 }],
    ['previewBackup', () => be.previewBackup('b1'), 'preview_backup', { backupId: 'b1' }],
    ['restoreBackup', () => be.restoreBackup('b1'), 'restore_backup', { backupId: 'b1' }],
    ['syncStatus', () => be.syncStatus(), 'sync_status', undefined],
    ['syncLogin', () => be.syncLogin({ server: 'https://s', token: 't' }), 'sync_login', { login: { server: 'https://s', token: 't' } }],
    ['syncLogout', () => be.syncLogout(), 'sync_logout', undefined],
    ['syncSetEnabled all', () => be.syncSetEnabled(false), 'sync_set_enabled', { enabled: false, scope: null }],
    ['syncSetEnabled scope', () => be.syncSetEnabled(true, 'user'), 'sync_set_enabled', { enabled: true, scope: 'user' }],
    ['syncNow', () => be.syncNow(), 'sync_now', undefined],
    ['syncRepoint', () => be.syncRepoint('https://sync.example.org'), 'sync_repoint', { server: 'https://sync.example.org' }],
    ['syncE2ee', () => be.syncE2ee(), 'sync_e2ee', undefined],
    ['syncEncrypt', () => be.syncEncrypt('pass phrase'), 'sync_encrypt', { passphrase: 'pass phrase' }],
    ['syncUnlock passphrase', () => be.syncUnlock({ passphrase: 'pass phrase' }), 'sync_unlock', { passphrase: 'pass phrase', recoveryKey: null }],
    ['syncUnlock recovery key', () => be.syncUnlock({ recoveryKey: 'K7QD-…' }), 'sync_unlock', { passphrase: null, recoveryKey: 'K7QD-…' }],
    ['syncChangePassphrase passphrase', () => be.syncChangePassphrase({ passphrase: 'old one' }, 'new pass phrase'), 'sync_change_passphrase', { passphrase: 'old one', recoveryKey: null, newPassphrase: 'new pass phrase' }],
    ['syncChangePassphrase recovery key', () => be.syncChangePassphrase({ recoveryKey: 'K7QD-…' }, 'new pass phrase'), 'sync_change_passphrase', { passphrase: null, recoveryKey: 'K7QD-…', newPassphrase: 'new pass phrase' }],
    ['syncResetPassphrase', () => be.syncResetPassphrase('new pass phrase'), 'sync_reset_passphrase', { newPassphrase: 'new pass phrase' }],
    ['syncRotateKey', () => be.syncRotateKey('pass phrase', true), 'sync_rotate_key', { passphrase: 'pass phrase', lockOut: true }],
    ['syncDecrypt', () => be.syncDecrypt(), 'sync_decrypt', undefined],
    ['listConflicts', () => be.listConflicts(), 'list_conflicts', undefined],
    ['resolveConflict keep', () => be.resolveConflict('user', 'a-1', { keep: 'keep_both' }), 'resolve_conflict', { scope: 'user', id: 'a-1', resolution: { keep: 'keep_both' } }],
    ['resolveConflict merged', () => be.resolveConflict('user', 'a-1', { keep: 'merged', text: 'x' }), 'resolve_conflict', { scope: 'user', id: 'a-1', resolution: { keep: 'merged', text: 'x' } }],
    ['overview', () => be.overview(), 'overview', undefined],
    ['importFolder', () => be.importFolder({ path: '/v', scope: null }), 'import_folder', { request: { path: '/v', scope: null } }],
    ['getSettings', () => be.getSettings(), 'get_settings', undefined],
    ['setSettings', () => be.setSettings({ theme: 'dark' }), 'set_settings', { patch: { theme: 'dark' } }],
    ['reviewQueue', () => be.reviewQueue(), 'review_queue', undefined],
    ['dismissFinding', () => be.dismissFinding('f1'), 'review_dismiss', { findingId: 'f1' }],
    ['mergePlan', () => be.mergePlan(['a', 'b'], 'user', 'manual'), 'merge_plan', { ids: ['a', 'b'], scope: 'user', draft: 'manual' }],
    ['mergeApply', () => be.mergeApply({ planId: 'p', ids: ['a', 'b'], scope: 'user', body: 'x', summary: 's' } as never), 'merge_apply', { request: { planId: 'p', ids: ['a', 'b'], scope: 'user', body: 'x', summary: 's' } }],
    ['consolidationLast', () => be.consolidationLast(), 'consolidation_last', undefined],
    ['consolidationPreview', () => be.consolidationPreview(), 'consolidation_preview', undefined],
    ['consolidationApply', () => be.consolidationApply({ clusters: [] } as never), 'consolidation_apply', { plan: { clusters: [] } }],
    ['listPromotions', () => be.listPromotions(), 'review_promotions', undefined],
    ['promote', () => be.promote('fact:1'), 'review_promote', { key: 'fact:1' }],
    ['listConversations', () => be.listConversations(), 'conversations_list', undefined],
    ['conversationMessages', () => be.conversationMessages('trip', 'user'), 'conversation_messages', { conversation: 'trip', scope: 'user' }],
    ['conversationMessages any scope', () => be.conversationMessages('trip'), 'conversation_messages', { conversation: 'trip', scope: null }],
    ['forgetConversation', () => be.forgetConversation('trip', 'user'), 'conversation_forget', { conversation: 'trip', scope: 'user' }],
    ['conversationStats', () => be.conversationStats(), 'conversations_stats', undefined],
    ['conversationExtract', () => be.conversationExtract('trip', 'project:p'), 'conversation_extract', { conversation: 'trip', scope: 'project:p' }],
    ['conversationFacts', () => be.conversationFacts({ text: 'porto', replaced: true }), 'conversation_facts', { query: { text: 'porto', replaced: true } }],
    ['listWorking', () => be.listWorking(), 'working_list', undefined],
    ['removeWorking', () => be.removeWorking('wm:1'), 'working_remove', { key: 'wm:1' }],
    ['captureLedger', () => be.captureLedger(50), 'capture_ledger', { limit: 50 }],
    ['quarantineOverview', () => be.quarantineOverview(), 'quarantine_overview', undefined],
    ['quarantinePreview', () => be.quarantinePreview({ hosts: ['grok'], models: [], since: null, until: 5 }), 'quarantine_preview', { selection: { hosts: ['grok'], models: [], since: null, until: 5 } }],
    ['quarantineApply', () => be.quarantineApply({ hosts: [], models: ['grok-3'], since: 1, until: null }), 'quarantine_apply', { selection: { hosts: [], models: ['grok-3'], since: 1, until: null } }],
    ['quarantineRelease', () => be.quarantineRelease('q1'), 'quarantine_release', { id: 'q1' }],
  ];

  for (const [name, run, command, args] of cases) {
    it(`${name} invokes ${command}`, async () => {
      await expect(run()).resolves.toBe('ok');
      expect(invoke).toHaveBeenCalledTimes(1);
      expect(invoke).toHaveBeenCalledWith(command, args);
    });
  }

  it('the Tauri backend object covers every command function', () => {
    expect(Object.keys(be.tauriBackend).sort()).toEqual(
      [...new Set(cases.map(([n]) => n.split(' ')[0])), 'onEvent'].sort(),
    );
  });

  it('turns {code, message, detail} rejections into BackendFailure', async () => {
    invoke.mockRejectedValueOnce({ code: 'credential_refused', message: 'looks like a key', detail: { rule: 'aws' } });
    const err = await be.createNote({ summary: 's', body: 'AKIA', noteType: null, tags: [] }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(be.BackendFailure);
    expect(err).toMatchObject({ code: 'credential_refused', message: 'looks like a key', detail: { rule: 'aws' } });
  });

  it('turns a bare string rejection (an unknown command) into an internal BackendFailure', async () => {
    invoke.mockRejectedValueOnce('command get_note not found');
    await expect(be.getNote('user', 'x')).rejects.toMatchObject({ code: 'internal', message: 'command get_note not found' });
  });

  it('listens on memoria://event and hands over the payload', async () => {
    const unlisten = vi.fn();
    listen.mockResolvedValue(unlisten);
    const got: unknown[] = [];
    const off = await be.onEvent((e) => got.push(e));
    expect(listen).toHaveBeenCalledWith('memoria://event', expect.any(Function));
    const cb = listen.mock.calls[0][1] as (ev: { payload: unknown }) => void;
    cb({ payload: { kind: 'noteAdded', scope: 'user', id: 'n1' } });
    expect(got).toEqual([{ kind: 'noteAdded', scope: 'user', id: 'n1' }]);
    off();
    expect(unlisten).toHaveBeenCalled();
  });
});
