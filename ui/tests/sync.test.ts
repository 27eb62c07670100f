import { screen, waitFor } from '@testing-library/svelte';
import { describe, expect, it } from 'vitest';
import { callsOf, demoSeed, goTo, renderApp } from './helpers';

describe('Sync page', () => {
  it('关闭云同步 (turn off cloud sync) disables 立即同步 (sync now) until turned on again', async () => {
    const { be, user } = await renderApp();
    await goTo(user, 'sync');
    const now = await screen.findByTestId('sync-now');
    await waitFor(() => expect(now).toBeEnabled());
    const toggle = screen.getByTestId('sync-toggle');
    expect(toggle).not.toBeChecked();
    expect(toggle).toHaveAccessibleName('Turn off cloud sync');

    await user.click(toggle);
    await waitFor(() => expect(callsOf(be, 'syncSetEnabled')).toEqual([[false, null]]));
    await waitFor(() => expect(screen.getByTestId('sync-now')).toBeDisabled());
    expect(screen.getByTestId('sync-toggle')).toBeChecked();
    expect(screen.getByTestId('sync-status')).toHaveAttribute('data-state', 'off');
    expect(screen.getByTestId('sync-status')).toHaveTextContent('Cloud sync is off');

    await user.click(screen.getByTestId('sync-toggle'));
    await waitFor(() => expect(screen.getByTestId('sync-now')).toBeEnabled());
    await user.click(screen.getByTestId('sync-now'));
    await waitFor(() => expect(callsOf(be, 'syncNow')).toHaveLength(1));
  });

  it('shows each scope with last sync, last download, errors and quotas', async () => {
    const { user } = await renderApp();
    await goTo(user, 'sync');
    const scopes = await screen.findAllByTestId('sync-scope');
    expect(scopes.map((s) => s.getAttribute('data-scope'))).toEqual(['user', 'project:a1b2c3', 'project:d4e5f6']);
    expect(scopes[1]).toHaveTextContent('0 added · 0 changed · 0 deleted');
    expect(scopes[1]).toHaveTextContent('of 5000 notes');
    expect(scopes[1]).toHaveTextContent('1 held back');
    expect(screen.getByRole('switch', { name: 'Sync memoria' })).toBeChecked();
  });

  it('while cloud sync is off each scope switch is disabled, dimmed, and says why', async () => {
    const { user } = await renderApp(demoSeed({ syncEnabled: false }));
    await goTo(user, 'sync');
    const scopes = await screen.findAllByTestId('sync-scope');
    const sw = screen.getByRole('switch', { name: 'Sync memoria' });
    expect(sw).toBeDisabled();
    expect(sw).toHaveAccessibleDescription('Paused while cloud sync is off');
    expect(scopes[1]).toHaveClass('paused');

    await user.click(screen.getByTestId('sync-toggle'));
    await waitFor(() => expect(screen.getByRole('switch', { name: 'Sync memoria' })).toBeEnabled());
    expect(screen.getByRole('switch', { name: 'Sync memoria' })).not.toHaveAccessibleDescription();
    expect(screen.queryAllByTestId('sync-scope-paused')).toHaveLength(0);
    expect(screen.getAllByTestId('sync-scope')[1]).not.toHaveClass('paused');
  });

  it('signs in with a server URL and token, and out again', async () => {
    const { be, user } = await renderApp(demoSeed({ signedIn: false }));
    await goTo(user, 'sync');
    expect(await screen.findByTestId('sync-status')).toHaveAttribute('data-state', 'signed-out');
    expect(screen.getByTestId('sync-now')).toBeDisabled();
    await user.type(screen.getByLabelText('Server URL'), 'https://sync.example.org');
    await user.type(screen.getByLabelText('Access token'), 'tok-123');
    await user.click(screen.getByTestId('sync-signin'));
    await waitFor(() => expect(callsOf(be, 'syncLogin')).toEqual([[{ server: 'https://sync.example.org', token: 'tok-123' }]]));
    await waitFor(() => expect(screen.getByTestId('sync-status')).toHaveAttribute('data-state', 'on'));
    await user.click(screen.getByTestId('sync-signout'));
    await waitFor(() => expect(screen.getByTestId('sync-status')).toHaveAttribute('data-state', 'signed-out'));
  });

  it('a pass the background sync starts shows as running, and 立即同步 waits until it finishes', async () => {
    const { be, user } = await renderApp();
    await goTo(user, 'sync');
    const now = await screen.findByTestId('sync-now');
    await waitFor(() => expect(now).toBeEnabled());
    be.emit({ kind: 'syncStarted', scope: 'user' });
    await waitFor(() => expect(screen.getByTestId('sync-now')).toBeDisabled());
    expect(screen.getByTestId('sync-status')).toHaveTextContent('Syncing');
    const before = callsOf(be, 'syncStatus').length;
    be.emit({ kind: 'syncFinished', scope: 'user', ok: true, error: null, download: { added: 1, changed: 0, deleted: 0 }, uploaded: 0, newConflicts: [] });
    await waitFor(() => expect(screen.getByTestId('sync-now')).toBeEnabled());
    expect(callsOf(be, 'syncStatus').length).toBeGreaterThan(before);
  });

  it('a scope synced at another address offers the re-point, which moves it and syncs', async () => {
    const { be, user } = await renderApp(demoSeed({ syncMovedFrom: 'http://127.0.0.1:8787' }));
    await goTo(user, 'sync');
    const moved = await screen.findByTestId('sync-moved');
    expect(moved).toHaveTextContent('Paused: first synced at http://127.0.0.1:8787');
    expect(moved).toHaveTextContent('https://sync.example.org');
    expect(screen.getAllByTestId('sync-moved')).toHaveLength(1);
    await user.click(screen.getByRole('button', { name: 'Re-point to https://sync.example.org' }));
    await waitFor(() => expect(callsOf(be, 'syncRepoint')).toEqual([['https://sync.example.org']]));
    await waitFor(() => expect(screen.queryByTestId('sync-moved')).toBeNull());
    expect(await screen.findByText('Re-pointed to https://sync.example.org; syncing there now.')).toBeInTheDocument();
  });

  it('a refused re-point says why and leaves the scope paused', async () => {
    const { be, user } = await renderApp(demoSeed({ syncMovedFrom: 'http://127.0.0.1:8787', repointRefused: true }));
    await goTo(user, 'sync');
    await user.click(await screen.findByTestId('sync-repoint'));
    await waitFor(() => expect(callsOf(be, 'syncRepoint')).toHaveLength(1));
    expect(await screen.findByText(/2 of 2 note\(s\) differ/)).toBeInTheDocument();
    expect(screen.getByTestId('sync-moved')).toBeInTheDocument();
    expect(screen.getByTestId('sync-repoint')).toBeEnabled();
  });
});
