import { screen, waitFor, within } from '@testing-library/svelte';
import { EditorView } from '@codemirror/view';
import { describe, expect, it } from 'vitest';
import { callsOf, demoSeed, goTo, renderApp } from './helpers';

describe('Conflicts page', () => {
  it('shows a badge in the navigation while a conflict exists', async () => {
    const { be, user } = await renderApp();
    const badge = await screen.findByTestId('conflicts-badge');
    expect(badge).toHaveTextContent('1');
    expect(within(screen.getByTestId('nav-conflicts')).getByLabelText('1 unresolved')).toBe(badge);

    be.conflicts.push({ ...be.conflicts[0], id: 'second-note-1aa' });
    be.emit({ kind: 'conflictAppeared', scope: 'project:a1b2c3', id: 'second-note-1aa' });
    await waitFor(() => expect(screen.getByTestId('conflicts-badge')).toHaveTextContent('2'));

    await goTo(user, 'conflicts');
    await waitFor(() => expect(screen.getAllByTestId('conflict-item')).toHaveLength(2));
  });

  it('shows base, this machine and cloud side by side', async () => {
    const { user } = await renderApp();
    await goTo(user, 'conflicts');
    await screen.findAllByTestId('conflict-item');
    expect(screen.getByTestId('conflict-base')).toHaveTextContent('Three columns above 960px.');
    const views = [...document.querySelectorAll('.cm-mergeView .cm-editor')].map((el) => EditorView.findFromDOM(el as HTMLElement)!.state.doc.toString());
    expect(views).toHaveLength(2);
    expect(views[0]).toContain('Three columns above 960px, one below.');
    expect(views[1]).toContain('Two columns above 1024px.');
    expect(screen.getByText('This machine')).toBeInTheDocument();
    expect(screen.getByText('Cloud')).toBeInTheDocument();
  });

  for (const [testid, keep] of [
    ['conflict-keep-local', 'keep_local'],
    ['conflict-keep-cloud', 'keep_cloud'],
    ['conflict-keep-both', 'keep_both'],
  ] as const) {
    it(`"${testid}" resolves with ${keep} and clears the badge`, async () => {
      const { be, user } = await renderApp();
      await goTo(user, 'conflicts');
      await screen.findAllByTestId('conflict-item');
      await user.click(screen.getByTestId(testid));
      await waitFor(() => expect(callsOf(be, 'resolveConflict')).toEqual([['project:a1b2c3', 'pricing-layout-a91', { keep }]]));
      await waitFor(() => expect(screen.queryByTestId('conflicts-badge')).toBeNull());
      expect(await screen.findByTestId('conflicts-empty')).toBeInTheDocument();
    });
  }

  it('merges by hand and resolves with the merged text', async () => {
    const { be, user } = await renderApp();
    await goTo(user, 'conflicts');
    await screen.findAllByTestId('conflict-item');
    await user.click(screen.getByTestId('conflict-merge'));
    const editor = EditorView.findFromDOM(screen.getByTestId('conflict-merged'))!;
    expect(editor.state.doc.toString()).toContain('Three columns above 960px, one below.');
    const text = editor.state.doc.toString().replace('Three columns above 960px, one below.', 'Two columns above 1024px, one below.');
    editor.dispatch({ changes: { from: 0, to: editor.state.doc.length, insert: text } });
    await user.click(screen.getByTestId('conflict-merge-save'));
    await waitFor(() => expect(callsOf(be, 'resolveConflict')).toHaveLength(1));
    expect(callsOf(be, 'resolveConflict')[0][2]).toEqual({ keep: 'merged', text });
  });

  it('says so when there is no conflict', async () => {
    const { user } = await renderApp(demoSeed({ conflicts: [] }));
    await goTo(user, 'conflicts');
    expect(await screen.findByTestId('conflicts-empty')).toHaveTextContent('No conflicts');
    expect(screen.queryByTestId('conflicts-badge')).toBeNull();
  });
});
