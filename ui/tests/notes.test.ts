import { fireEvent, screen, waitFor, within } from '@testing-library/svelte';
import { EditorView } from '@codemirror/view';
import { describe, expect, it } from 'vitest';
import { manyNotes } from '../src/lib/backend/fake';
import { callsOf, choose, demoSeed, renderApp } from './helpers';

const items = () => screen.queryAllByTestId('note-item');
const bodyView = () => EditorView.findFromDOM(screen.getByTestId('note-body'))!;

describe('Notes page', () => {
  it('lists notes and filters them by scope, type and tag', async () => {
    await renderApp();
    await waitFor(() => expect(items()).toHaveLength(8));
    expect(screen.getByText('Pricing cards use fills, not borders')).toBeInTheDocument();

    await choose(screen.getByTestId('filter-scope'), 'user');
    await waitFor(() => expect(items()).toHaveLength(2));
    expect(items().every((el) => el.textContent?.includes('User'))).toBe(true);

    await choose(screen.getByTestId('filter-scope'), 'all');
    await choose(screen.getByTestId('filter-type'), 'feedback');
    await waitFor(() => expect(items()).toHaveLength(2));

    await choose(screen.getByTestId('filter-tag'), 'ops');
    await waitFor(() => expect(items()).toHaveLength(1));
    expect(items()[0]).toHaveTextContent('No deploys on Friday afternoons');
  });

  it('renders only the rows in view of 5,000 notes and follows the scroll', async () => {
    await renderApp(demoSeed({ notes: manyNotes(5000), conflicts: [] }));
    await waitFor(() => expect(screen.getByText('5000 notes')).toBeInTheDocument());
    const rendered = items();
    expect(rendered.length).toBeGreaterThan(5);
    expect(rendered.length).toBeLessThan(60);
    expect(rendered[0]).toHaveAttribute('data-id', 'note-00000');

    const list = screen.getByRole('list', { name: 'Notes list' });
    list.scrollTop = 58 * 2500;
    await fireEvent.scroll(list);
    await waitFor(() => expect(items().some((el) => el.getAttribute('data-id') === 'note-02500')).toBe(true));
    expect(items().length).toBeLessThan(60);
    expect(items().some((el) => el.getAttribute('data-id') === 'note-00000')).toBe(false);
  });

  it('searches the first keystroke at once and, while a search runs, only the latest text next', async () => {
    const { be, user } = await renderApp();
    await waitFor(() => expect(items()).toHaveLength(8));
    // Hold every search open until the test lets it answer.
    const search = be.searchNotes.bind(be);
    const held: (() => void)[] = [];
    be.searchNotes = (q) => new Promise((done) => held.push(() => void search(q).then(done)));
    const asked = () => (callsOf(be, 'searchNotes') as [{ query: string }][]).map((c) => c[0].query);
    const before = asked().length;
    const input = screen.getByTestId('search-input');
    await user.type(input, 'p');
    expect(held).toHaveLength(1);
    await user.type(input, 'ric');
    // The first is still running: nothing else was asked.
    expect(held).toHaveLength(1);
    held.shift()!();
    await waitFor(() => expect(held).toHaveLength(1));
    held.shift()!();
    await waitFor(() => expect(document.querySelector('[data-results-for="pric"]')).not.toBeNull());
    // 'p', then the latest text; 'pr' and 'pri' were never searched.
    expect(asked().slice(before)).toEqual(['p', 'pric']);
    expect(screen.getAllByTestId('search-result').length).toBeGreaterThanOrEqual(1);
  });

  it('searches as you type and shows a result’s explanation on demand', async () => {
    const { be, user } = await renderApp();
    await user.type(screen.getByTestId('search-input'), 'pricing');
    await waitFor(() => expect(screen.getAllByTestId('search-result').length).toBeGreaterThanOrEqual(2));
    const last = callsOf(be, 'searchNotes').at(-1)![0] as { query: string; explain: boolean };
    expect(last).toMatchObject({ query: 'pricing', explain: true });
    expect(screen.queryByTestId('search-explain')).toBeNull();
    expect(screen.getAllByTestId('search-ranks')[0]).toHaveTextContent(/BM25 #1 · vectors #\d+/);
    // Each result says how likely it answers the search.
    expect(screen.getAllByTestId('search-relevance')[0]).toHaveTextContent('100% likely');
    expect(screen.getAllByTestId('search-relevance')[0]).toHaveAttribute('title', 'How likely this note answers the search');

    const first = screen.getAllByTestId('search-result')[0];
    await user.click(within(first).getByRole('button', { name: 'Why this result?' }));
    const panel = screen.getByTestId('search-explain');
    for (const label of ['Keyword rank (BM25)', 'Meaning rank (vectors)', 'Fused relevance', 'Recency (decay)', 'Trust weight']) {
      expect(within(panel).getByText(label)).toBeInTheDocument();
    }
    await user.click(within(first).getByRole('button', { name: 'Hide explanation' }));
    expect(screen.queryByTestId('search-explain')).toBeNull();

    await user.click(within(first).getAllByRole('button')[0]);
    await waitFor(() => expect(screen.getByTestId('note-summary')).toHaveValue('Pricing cards use fills, not borders'));
  });

  it('edits and saves a note (button and Ctrl+S)', async () => {
    const { be, user } = await renderApp();
    await waitFor(() => expect(items().length).toBeGreaterThan(0));
    await user.click(screen.getByText('Works in Central European Time'));
    const summary = await screen.findByTestId('note-summary');
    await waitFor(() => expect(summary).toHaveValue('Works in Central European Time'));
    expect(screen.getByTestId('note-save')).toBeDisabled();

    await user.clear(summary);
    await user.type(summary, 'Works in CET, mornings best');
    const view = bodyView();
    view.dispatch({ changes: { from: view.state.doc.length, insert: 'Mornings are best.\n' } });
    await user.type(screen.getByTestId('note-tags'), 'time');
    await user.click(screen.getByTestId('note-save'));
    await waitFor(() => expect(callsOf(be, 'updateNote')).toHaveLength(1));
    const [scope, id, patch] = callsOf(be, 'updateNote')[0];
    expect(scope).toBe('user');
    expect(id).toBe('timezone-cet-9b1');
    expect(patch).toMatchObject({ summary: 'Works in CET, mornings best', body: 'Meetings after 16:00 CET are hard.\nMornings are best.\n', tags: ['time'] });
    await waitFor(() => expect(screen.getByText('Saved')).toBeInTheDocument());

    await user.type(summary, '!');
    await user.keyboard('{Control>}s{/Control}');
    await waitFor(() => expect(callsOf(be, 'updateNote')).toHaveLength(2));
    expect((callsOf(be, 'updateNote')[1][2] as { summary: string }).summary).toBe('Works in CET, mornings best!');
  });

  it('creates a note with Ctrl+N and lists it', async () => {
    const { be, user } = await renderApp();
    await waitFor(() => expect(items().length).toBe(8));
    await user.keyboard('{Control>}n{/Control}');
    const summary = await screen.findByTestId('note-summary');
    await waitFor(() => expect(summary).toHaveFocus());
    await user.type(summary, 'Likes tea');
    await choose(screen.getByTestId('note-type'), 'user');
    await user.click(screen.getByTestId('note-save'));
    await waitFor(() => expect(callsOf(be, 'createNote')).toHaveLength(1));
    expect(callsOf(be, 'createNote')[0][0]).toMatchObject({ summary: 'Likes tea', noteType: 'user', tags: [] });
    await waitFor(() => expect(items().length).toBe(9));
    expect(screen.getAllByText('Likes tea').length).toBeGreaterThan(0);
  });

  it('forgets a note only after a confirmation that says it is backed up', async () => {
    const { be, user } = await renderApp();
    await waitFor(() => expect(items().length).toBe(8));
    await user.click(screen.getByText('No deploys on Friday afternoons'));
    await screen.findByTestId('note-summary');
    await user.click(screen.getByTestId('note-forget'));
    const dialog = screen.getByRole('dialog', { name: 'Forget this note?' });
    expect(dialog).toBe(screen.getByTestId('forget-dialog'));
    expect(dialog).toHaveTextContent('A backup is kept');
    expect(dialog).toHaveTextContent('Backups');

    await user.click(within(dialog).getByRole('button', { name: 'Cancel' }));
    expect(screen.queryByTestId('forget-dialog')).toBeNull();
    expect(callsOf(be, 'forgetNote')).toHaveLength(0);

    await user.click(screen.getByTestId('note-forget'));
    await user.keyboard('{Escape}');
    expect(screen.queryByTestId('forget-dialog')).toBeNull();

    await user.click(screen.getByTestId('note-forget'));
    await user.click(screen.getByTestId('confirm-ok'));
    await waitFor(() => expect(callsOf(be, 'forgetNote')).toEqual([['project:d4e5f6', 'deploy-friday-freeze-d11']]));
    await waitFor(() => expect(items().length).toBe(7));
    expect(screen.getByText('Forgotten. A backup is kept in Backups.')).toBeInTheDocument();
  });

  it('shows a note whose file does not parse with its error and raw text', async () => {
    const { user } = await renderApp();
    await waitFor(() => expect(items().length).toBe(8));
    const broken = items().find((el) => el.getAttribute('data-id') === 'half-written-77f')!;
    expect(broken).toHaveTextContent('Cannot be read');
    await user.click(broken);
    expect(await screen.findByTestId('note-error')).toHaveTextContent('frontmatter is not valid JSON or YAML');
    expect(screen.getByTestId('note-raw')).toHaveTextContent('The closing brace went missing.');
    expect(screen.queryByTestId('note-save')).toBeNull();
  });

  it('follows [[links]] and backlinks', async () => {
    const { user } = await renderApp();
    await waitFor(() => expect(items().length).toBe(8));
    await user.click(screen.getByText('Pricing cards use fills, not borders'));
    const link = await screen.findByTestId('note-link');
    expect(link).toHaveTextContent('pricing-layout-a91');
    const back = await screen.findByTestId('note-backlink');
    expect(back).toHaveTextContent('Prefers short answers with code first');
    await user.click(link);
    await waitFor(() => expect(screen.getByTestId('note-summary')).toHaveValue('Pricing page layout: three columns on desktop'));
    expect(document.querySelector('[data-testid="note-body"]')?.closest('.cm-editor')).not.toBeNull();
  });

  it('shows a note added by another process without a reload', async () => {
    const { be } = await renderApp();
    await waitFor(() => expect(items().length).toBe(8));
    const now = Date.now();
    be.notes.set('user\u0000from-cli-001', { scope: 'user', id: 'from-cli-001', summary: 'Added by the CLI', noteType: 'user', tags: [], body: 'x\n', createdAt: now, updatedAt: now + 1000, trust: 'owner', importance: 0.5 });
    be.emit({ kind: 'noteAdded', scope: 'user', id: 'from-cli-001' });
    await waitFor(() => expect(screen.getByText('Added by the CLI')).toBeInTheDocument());
  });

  it('says what Memoria is on an empty home and offers import', async () => {
    const { user, app } = await renderApp({ scopes: undefined, notes: [], conflicts: [] });
    const welcome = await screen.findByTestId('welcome');
    expect(welcome).toHaveTextContent('Markdown notes');
    await user.click(screen.getByTestId('welcome-import'));
    expect(app.page).toBe('import');
    expect(await screen.findByTestId('import-path')).toBeInTheDocument();
  });

  it('focuses search with Ctrl+K from any page', async () => {
    const { user } = await renderApp();
    await user.click(screen.getByTestId('nav-overview'));
    await user.keyboard('{Control>}k{/Control}');
    await waitFor(() => expect(screen.getByTestId('search-input')).toHaveFocus());
  });
});
