import { screen, waitFor } from '@testing-library/svelte';
import { describe, expect, it } from 'vitest';
import { callsOf, choose, demoSeed, goTo, renderApp } from './helpers';

describe('Settings page', () => {
  it('pins the theme and saves the sync server and model folder', async () => {
    const { be, user } = await renderApp();
    await goTo(user, 'settings');
    await choose(await screen.findByTestId('settings-theme'), 'dark');
    expect(document.documentElement.dataset.theme).toBe('dark');
    await choose(screen.getByTestId('settings-theme'), 'system');
    expect(document.documentElement.dataset.theme).toBeUndefined();

    const model = screen.getByLabelText('Model folder');
    await user.clear(model);
    await user.type(model, '/opt/models/e5');
    await user.click(screen.getByTestId('settings-save'));
    await waitFor(() => expect(callsOf(be, 'setSettings').at(-1)).toEqual([{ syncServer: 'https://sync.example.org', modelDir: '/opt/models/e5' }]));
    expect(await screen.findByText('Settings saved.')).toBeInTheDocument();
  });

  it('turns the daily consolidation off, and the Review page says so', async () => {
    const { be, user } = await renderApp();
    await goTo(user, 'review');
    await screen.findByTestId('consolidation');
    expect(screen.queryByTestId('consolidation-daily-off')).toBeNull();

    await goTo(user, 'settings');
    const box = await screen.findByTestId('settings-daily-consolidation');
    expect(box).toBeChecked();
    expect(box).toHaveAccessibleName('Consolidate daily');
    await user.click(box);
    await waitFor(() => expect(callsOf(be, 'setSettings').at(-1)).toEqual([{ dailyConsolidation: false }]));
    expect(box).not.toBeChecked();

    await goTo(user, 'review');
    expect(await screen.findByTestId('consolidation-daily-off')).toHaveTextContent('The daily pass is off');
    expect(screen.getByTestId('consolidate-now')).toBeEnabled();
  });
});

describe('Settings: conversation capture', () => {
  it('turns capture off and on, and the Conversations page and Overview say so', async () => {
    const { be, user } = await renderApp();
    await goTo(user, 'settings');
    const box = await screen.findByTestId('settings-conversation-capture');
    expect(box).toBeChecked();
    expect(box).toBeEnabled();
    expect(box).toHaveAccessibleName('Capture conversations');
    expect(box).toHaveAccessibleDescription(expect.stringContaining('memoria capture FILE still works'));
    await user.click(box);
    await waitFor(() => expect(callsOf(be, 'setSettings').at(-1)).toEqual([{ conversationCapture: false }]));
    expect(box).not.toBeChecked();

    await goTo(user, 'conversations');
    expect(await screen.findByTestId('conversations-capture-off')).toBeInTheDocument();
    await goTo(user, 'overview');
    const capture = await screen.findByTestId('engine-capture');
    expect(capture).toHaveAttribute('data-on', 'false');
    expect(capture).toHaveTextContent('Off');

    await goTo(user, 'settings');
    await user.click(await screen.findByTestId('settings-conversation-capture'));
    await waitFor(() => expect(callsOf(be, 'setSettings').at(-1)).toEqual([{ conversationCapture: true }]));
    await goTo(user, 'conversations');
    await screen.findByTestId('conversations-empty');
    expect(screen.queryByTestId('conversations-capture-off')).toBeNull();
  });

  it('cannot change capture the environment decides, and says why', async () => {
    const { user } = await renderApp(demoSeed({ settings: { conversationCapture: false, conversationCaptureEnv: true } }));
    await goTo(user, 'settings');
    const box = await screen.findByTestId('settings-conversation-capture');
    expect(box).toBeDisabled();
    expect(box).not.toBeChecked();
    expect(screen.getByTestId('settings-capture-env')).toHaveTextContent('MEMORIA_CONVERSATIONS__CAPTURE');
  });
});

describe('keyboard', () => {
  it('moves through the notes list with the arrow keys', async () => {
    const { user } = await renderApp();
    await waitFor(() => expect(screen.getAllByTestId('note-item')).toHaveLength(8));
    screen.getByTestId('search-input').focus();
    await user.keyboard('{ArrowDown}');
    const rows = screen.getAllByTestId('note-item');
    expect(rows[0]).toHaveFocus();
    await user.keyboard('{ArrowDown}');
    expect(screen.getAllByTestId('note-item')[1]).toHaveFocus();
    await user.keyboard('{End}');
    await waitFor(() => expect(screen.getAllByTestId('note-item')[7]).toHaveFocus());
    await user.keyboard('{Enter}');
    await waitFor(() => expect(screen.getByTestId('note-summary')).toHaveValue('CI runs clippy with -D warnings'));
  });

  it('every navigation button has a name and a page', async () => {
    await renderApp();
    for (const id of ['nav-notes', 'nav-conversations', 'nav-review', 'nav-conflicts', 'nav-sync', 'nav-backups', 'nav-overview']) {
      expect(screen.getByTestId(id)).toHaveAccessibleName();
    }
    expect(screen.getByTestId('nav-notes')).toHaveAttribute('aria-current', 'page');
  });
});
