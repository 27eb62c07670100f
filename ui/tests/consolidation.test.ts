// Consolidation in the app: replaced notes dimmed and labelled in the list, the editor naming
// the note that replaced them, the standing factor in the search explanation, and the Review
// page's last pass and "Consolidate now" (preview first, apply on confirmation).
import { screen, waitFor, within } from '@testing-library/svelte';
import { describe, expect, it } from 'vitest';
import type { FakeNote, FakeSeed } from '../src/lib/backend/fake';
import type { LastConsolidation } from '../src/lib/backend/types';
import { callsOf, demoSeed, goTo, renderApp } from './helpers';

const DAY = 86_400_000;
const RATE = 'Each client gets 100 requests a minute at the API gateway, counted by a token bucket.\n';

function note(id: string, summary: string, body: string, extra: Partial<FakeNote> = {}): FakeNote {
  const now = Date.now();
  return { scope: 'user', id, summary, noteType: 'user', tags: [], body, createdAt: now - DAY, updatedAt: now - DAY, trust: 'owner', importance: 0.5, ...extra };
}

/** Three originals a pass folded into `rate-limit-folded`, and a note an older one supersedes. */
function folded(): FakeNote[] {
  const by = { how: 'consolidated' as const, id: 'rate-limit-folded' };
  return [
    note('rate-1', 'Gateway rate limit', RATE, { status: 'consolidated', replacedBy: by }),
    note('rate-2', 'Rate limit per client', RATE, { status: 'consolidated', replacedBy: by }),
    note('rate-3', 'Token bucket at the gateway', RATE, { status: 'consolidated', replacedBy: by }),
    note('rate-limit-folded', 'Gateway rate limit: 100 a minute per client', `${RATE}\n## Consolidated from\n\n- [[rate-1]]\n- [[rate-2]]\n- [[rate-3]]\n`),
    note('deploy-days-old', 'Deploy days', 'Deploys go out on Mondays.\n', { replacedBy: { how: 'superseded', id: 'deploy-days' } }),
    note('deploy-days', 'Deploy days, current', 'Deploys go out on Tuesdays.\n'),
  ];
}

const lastPass = (at = Date.now() - 3_600_000): LastConsolidation => ({
  at,
  daily: true,
  folded: [{ clusterId: 'fold-1', scope: 'user', intoId: 'rate-limit-folded', summary: 'Gateway rate limit: 100 a minute per client', newNote: true, goalId: null, sources: ['rate-1', 'rate-2', 'rate-3'] }],
  goalsClosed: [],
  skipped: [],
  backups: 3,
  error: null,
});

const seed = (extra: Partial<FakeSeed> = {}) => demoSeed({ notes: folded(), conflicts: [], lastConsolidation: lastPass(), ...extra });
const row = (id: string) => screen.getAllByTestId('note-item').find((el) => el.dataset.id === id)!;

describe('consolidation in the app', () => {
  it('dims and labels replaced notes in the list, and the editor links to the note that replaced it', async () => {
    const { user } = await renderApp(seed());
    await waitFor(() => expect(screen.getAllByTestId('note-item')).toHaveLength(6));
    for (const id of ['rate-1', 'rate-2', 'rate-3']) {
      expect(row(id)).toHaveClass('replaced');
      expect(row(id)).toHaveAttribute('data-replaced', 'consolidated');
      expect(within(row(id)).getByTestId('note-replaced')).toHaveTextContent('Consolidated');
    }
    expect(row('deploy-days-old')).toHaveAttribute('data-replaced', 'superseded');
    expect(within(row('deploy-days-old')).getByTestId('note-replaced')).toHaveTextContent('Superseded');
    for (const id of ['rate-limit-folded', 'deploy-days']) {
      expect(row(id)).not.toHaveClass('replaced');
      expect(within(row(id)).queryByTestId('note-replaced')).toBeNull();
    }

    await user.click(row('rate-2'));
    const banner = await screen.findByTestId('note-replaced-by');
    expect(banner).toHaveTextContent('This note was consolidated into another note. It is kept as it was');
    const link = within(banner).getByTestId('note-replaced-link');
    expect(link).toHaveTextContent('Gateway rate limit: 100 a minute per client');
    await user.click(link);
    await waitFor(() => expect(screen.getByTestId('note-summary')).toHaveValue('Gateway rate limit: 100 a minute per client'));
    expect(screen.queryByTestId('note-replaced-by')).toBeNull();

    await user.click(row('deploy-days-old'));
    await waitFor(() => expect(screen.getByTestId('note-replaced-by')).toHaveTextContent('A newer note supersedes this one.'));
  });

  it('labels replaced notes in Chinese', async () => {
    await renderApp(seed({ settings: { language: 'zh' } }));
    await waitFor(() => expect(within(row('rate-1')).getByTestId('note-replaced')).toHaveTextContent('已整合'));
    expect(within(row('deploy-days-old')).getByTestId('note-replaced')).toHaveTextContent('已被取代');
  });

  it('labels replaced notes in Spanish', async () => {
    await renderApp(seed({ settings: { language: 'es' } }));
    await waitFor(() => expect(within(row('rate-1')).getByTestId('note-replaced')).toHaveTextContent('Consolidada'));
    expect(within(row('deploy-days-old')).getByTestId('note-replaced')).toHaveTextContent('Sustituida');
  });

  it('dims a replaced note among the results and shows its standing factor in the explanation', async () => {
    const { user } = await renderApp(seed());
    await user.type(screen.getByTestId('search-input'), 'gateway');
    await waitFor(() => expect(screen.getAllByTestId('search-result').length).toBeGreaterThanOrEqual(4));
    const results = screen.getAllByTestId('search-result');
    const of = (summary: string) => results.find((r) => r.textContent?.includes(summary))!;

    const original = of('Token bucket at the gateway');
    // Shown, dimmed and labelled, below the note that replaced it.
    expect(original).toHaveAttribute('data-replaced', 'true');
    expect(within(original).getByTestId('search-replaced')).toHaveTextContent('Replaced');
    await user.click(within(original).getByRole('button', { name: 'Why this result?' }));
    const panel = within(original).getByTestId('search-explain');
    expect(within(panel).getByText('Standing')).toBeInTheDocument();
    expect(within(panel).getByTestId('explain-standing')).toHaveTextContent('× 0.5 replaced');

    const current = of('Gateway rate limit: 100 a minute per client');
    expect(current).not.toHaveAttribute('data-replaced');
    expect(within(current).queryByTestId('search-replaced')).toBeNull();
    await user.click(within(current).getByRole('button', { name: 'Why this result?' }));
    expect(within(within(current).getByTestId('search-explain')).queryByText('Standing')).toBeNull();
  });

  it('shows the last pass on the Review page: what it folded, as links, and that nothing was deleted', async () => {
    const { user } = await renderApp(seed());
    await goTo(user, 'review');
    const last = await screen.findByTestId('consolidation-last');
    expect(last).toHaveTextContent('Last daily pass: 1 h ago');
    const fold = within(last).getByTestId('consolidation-fold');
    expect(within(fold).getByTestId('consolidation-into')).toHaveTextContent('Gateway rate limit: 100 a minute per client');
    expect(within(fold).getAllByTestId('consolidation-source').map((b) => b.textContent)).toEqual(['rate-1', 'rate-2', 'rate-3']);
    expect(within(last).getByTestId('consolidation-kept')).toHaveTextContent(
      'Nothing was deleted: the 3 originals are kept, marked consolidated, and each was backed up first (3 backups in Backups).',
    );
    // A source opens on the Notes page.
    await user.click(within(fold).getAllByTestId('consolidation-source')[1]);
    await waitFor(() => expect(screen.getByTestId('note-summary')).toHaveValue('Rate limit per client'));
    expect(screen.getByTestId('note-replaced-by')).toBeInTheDocument();
  });

  it('says when no pass ran yet', async () => {
    const { user } = await renderApp(seed({ lastConsolidation: null }));
    await goTo(user, 'review');
    expect(await screen.findByTestId('consolidation-none')).toHaveTextContent('No consolidation has run on this computer yet.');
  });

  const rewordings = () => [
    note('limit-a', 'Gateway limit', RATE),
    note('limit-b', 'Gateway limit again', RATE),
    note('limit-c', 'Gateway limit once more', RATE),
    note('unrelated', 'Timezone', 'Meetings after 16:00 CET are hard.\n'),
  ];

  it('consolidates now only after showing what will change', async () => {
    const { be, user } = await renderApp(seed({ notes: rewordings(), lastConsolidation: null }));
    await goTo(user, 'review');
    await user.click(await screen.findByTestId('consolidate-now'));
    const preview = await screen.findByTestId('consolidation-preview');
    const cluster = within(preview).getByTestId('consolidation-preview-cluster');
    for (const text of ['Gateway limit', 'limit-a', 'limit-b', 'limit-c', 'new note']) expect(cluster).toHaveTextContent(text);
    expect(preview).toHaveTextContent('Nothing is deleted.');
    expect(preview).not.toHaveTextContent('unrelated');
    // Nothing is written until the person confirms.
    expect(callsOf(be, 'consolidationApply')).toHaveLength(0);
    expect([...be.notes.values()].every((n) => !n.status)).toBe(true);

    await user.click(within(preview).getByTestId('consolidation-apply'));
    expect(await screen.findByTestId('consolidation-result')).toHaveTextContent('Groups of notes consolidated: 1.');
    expect(callsOf(be, 'consolidationApply')).toHaveLength(1);
    expect(screen.queryByTestId('consolidation-preview')).toBeNull();
    const last = await screen.findByTestId('consolidation-last');
    expect(last).toHaveAttribute('data-daily', 'false');
    expect(within(last).getAllByTestId('consolidation-source').map((b) => b.textContent)).toEqual(['limit-a', 'limit-b', 'limit-c']);
    expect(['limit-a', 'limit-b', 'limit-c'].map((id) => [...be.notes.values()].find((n) => n.id === id)!.status)).toEqual([
      'consolidated',
      'consolidated',
      'consolidated',
    ]);

    await goTo(user, 'notes');
    await waitFor(() => expect(row('limit-b')).toHaveClass('replaced'));
    expect(row('unrelated')).not.toHaveClass('replaced');
  });

  it('reports a group whose notes changed since the preview as left alone, and a cancel writes nothing', async () => {
    const { be, user } = await renderApp(seed({ notes: rewordings(), lastConsolidation: null }));
    await goTo(user, 'review');
    await user.click(await screen.findByTestId('consolidate-now'));
    await screen.findByTestId('consolidation-preview');
    await user.click(screen.getByRole('button', { name: 'Cancel' }));
    expect(screen.queryByTestId('consolidation-preview')).toBeNull();
    expect(callsOf(be, 'consolidationApply')).toHaveLength(0);

    await user.click(screen.getByTestId('consolidate-now'));
    await screen.findByTestId('consolidation-preview');
    const b = [...be.notes.values()].find((n) => n.id === 'limit-b')!;
    b.body = 'Each client: 120 requests a minute.\n';
    await user.click(screen.getByTestId('consolidation-apply'));
    const result = await screen.findByTestId('consolidation-result');
    expect(result).toHaveTextContent('Groups of notes consolidated: 0.');
    expect(result).toHaveTextContent('Left as they were: 1. The reason for each is listed under the last pass.');
    expect(await screen.findByTestId('consolidation-skipped')).toHaveTextContent('limit-b');
    expect([...be.notes.values()].every((n) => !n.status)).toBe(true);
  });

  it('refreshes the last pass when the daily pass reports one', async () => {
    const { be, user } = await renderApp(seed({ lastConsolidation: null }));
    await goTo(user, 'review');
    await screen.findByTestId('consolidation-none');
    // The fake's record changes as the shell's would after a daily pass.
    await be.consolidationApply({ clusters: [], threshold: 0.96, minSize: 3, maxAgeDays: 7, candidates: 0, vectors: false });
    be.emit({ kind: 'consolidated', at: Date.now(), folded: 1, notes: 3 });
    expect(await screen.findByTestId('consolidation-last')).toHaveTextContent('It found nothing to fold.');
  });
});
