import { screen, waitFor, within } from '@testing-library/svelte';
import { EditorView } from '@codemirror/view';
import { describe, expect, it } from 'vitest';
import { callsOf, goTo, renderApp } from './helpers';

describe('Backups page', () => {
  it('lists a forgotten note, previews it against the current state and restores it', async () => {
    const { be, user } = await renderApp();
    await be.forgetNote('project:d4e5f6', 'deploy-friday-freeze-d11');
    await goTo(user, 'backups');
    const [item] = await screen.findAllByTestId('backup-item');
    expect(item).toHaveTextContent('No deploys on Friday afternoons');
    expect(item).toHaveTextContent('Forgotten');
    expect(item).toHaveTextContent('project:d4e5f6');

    await user.click(within(item).getAllByRole('button')[0]);
    await waitFor(() => expect(document.querySelectorAll('.cm-mergeView .cm-editor')).toHaveLength(2));
    const [current, backup] = [...document.querySelectorAll('.cm-mergeView .cm-editor')].map((el) => EditorView.findFromDOM(el as HTMLElement)!.state.doc.toString());
    expect(current).toBe('(the note no longer exists)');
    expect(backup).toContain('Freeze starts Friday 14:00.');

    await user.click(within(item).getByTestId('backup-restore'));
    await waitFor(() => expect(callsOf(be, 'restoreBackup')).toHaveLength(1));
    await waitFor(() => expect(screen.getByText('Restored “deploy-friday-freeze-d11”.')).toBeInTheDocument());
    expect(be.notes.has('project:d4e5f6\u0000deploy-friday-freeze-d11')).toBe(true);
  });

  it('asks for the latest 50', async () => {
    const { be, user } = await renderApp();
    await goTo(user, 'backups');
    await screen.findByText('No backups yet.');
    expect(callsOf(be, 'listBackups')).toEqual([[50]]);
  });
});
