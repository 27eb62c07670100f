import { screen, waitFor, within } from '@testing-library/svelte';
import { EditorView } from '@codemirror/view';
import { describe, expect, it } from 'vitest';
import { demoNotes, reviewNotes } from '../src/lib/backend/fake';
import type { FakeSeed } from '../src/lib/backend/fake';
import { callsOf, demoSeed, goTo, renderApp } from './helpers';

const seed = (extra: Partial<FakeSeed> = {}) => demoSeed({ notes: [...demoNotes(), ...reviewNotes()], ...extra });
const editorText = (testid: string) => EditorView.findFromDOM(screen.getByTestId(testid))!.state.doc.toString();

async function openMerge(extra: Partial<FakeSeed> = {}) {
  const r = await renderApp(seed(extra));
  await goTo(r.user, 'review');
  const topic = (await screen.findAllByTestId('review-finding')).find((f) => f.dataset.kind === 'same_topic')!;
  await r.user.click(within(topic).getByTestId('review-merge'));
  await waitFor(() => expect(editorText('merge-body')).toContain('## Deploys go out on Tuesdays'));
  return r;
}

describe('Review page (待整理)', () => {
  it('counts the findings in the navigation and groups them by kind with their notes', async () => {
    const { user } = await renderApp(seed());
    await waitFor(() => expect(screen.getByTestId('review-count')).toHaveTextContent('2'));
    expect(within(screen.getByTestId('nav-review')).getByLabelText('2 to tidy up')).toBeInTheDocument();
    await goTo(user, 'review');
    const findings = await screen.findAllByTestId('review-finding');
    expect(findings.map((f) => f.dataset.kind)).toEqual(['same_topic', 'broken_link']);
    expect(screen.getByRole('heading', { name: /Same topic/ })).toBeInTheDocument();
    expect(screen.getByRole('heading', { name: /Broken links/ })).toBeInTheDocument();
    expect(findings[0]).toHaveTextContent('Deploys go out on Tuesdays');
    expect(findings[0]).toHaveTextContent('deploys-tuesdays-0a1');
    expect(findings[0]).toHaveTextContent('deploys-on-tuesday-5c2');
    expect(findings[0]).toHaveTextContent(/2 notes say much the same · \d+% of their words shared/);
    expect(findings[1]).toHaveTextContent('Links to notes that do not exist: rollback-plan-000');
    expect(within(findings[1]).queryByTestId('review-merge')).toBeNull();
  });

  it('dismisses a finding until one of its notes changes', async () => {
    const { be, user } = await renderApp(seed());
    await goTo(user, 'review');
    const link = (await screen.findAllByTestId('review-finding'))[1];
    await user.click(within(link).getByTestId('review-dismiss'));
    await waitFor(() => expect(screen.getAllByTestId('review-finding')).toHaveLength(1));
    expect(callsOf(be, 'dismissFinding')).toEqual([[link.dataset.finding]]);
    await waitFor(() => expect(screen.getByTestId('review-count')).toHaveTextContent('1'));
    expect(screen.getByText('1 dismissed')).toBeInTheDocument();

    const n = [...be.notes.values()].find((x) => x.id === 'release-checklist-9d3')!;
    n.body += 'Edited.\n';
    n.updatedAt += 1;
    be.emit({ kind: 'noteChanged', scope: n.scope, id: n.id });
    await waitFor(() => expect(screen.getAllByTestId('review-finding')).toHaveLength(2), { timeout: 3000 });
  });

  it('merges by hand: the draft in the editor, then what will change, then the apply', async () => {
    const { be, user } = await openMerge();
    expect(editorText('merge-body')).toContain('## Deploys go out on Tuesday\n');
    expect(screen.getByTestId('merge-summary')).toHaveValue('Deploys go out on Tuesdays');
    const model = screen.getByTestId('merge-draft-model');
    expect(model).toBeDisabled();
    expect(model).toHaveTextContent('Suggest a merge: no model is configured');
    expect(screen.getByTestId('merge-draft-manual')).toHaveTextContent('Merge by hand');
    expect(callsOf(be, 'mergePlan')).toEqual([[['deploys-tuesdays-0a1', 'deploys-on-tuesday-5c2'], 'user', 'manual']]);

    const editor = EditorView.findFromDOM(screen.getByTestId('merge-body'))!;
    const text = 'Production deploys go out on Tuesdays, after the staging smoke tests pass.\n';
    editor.dispatch({ changes: { from: 0, to: editor.state.doc.length, insert: text } });
    await user.click(screen.getByTestId('merge-preview-open'));
    const preview = await screen.findByTestId('merge-preview');
    expect(within(preview).getByTestId('merge-kept')).toHaveTextContent('deploys-tuesdays-0a1');
    expect(within(preview).getByTestId('merge-deleted')).toHaveTextContent('deploys-on-tuesday-5c2');
    expect(within(preview).getByTestId('merge-relinked')).toHaveTextContent('Release checklist');
    expect(within(preview).getByTestId('merge-backups')).toHaveTextContent('3: one of every note changed or deleted');
    expect(callsOf(be, 'mergeApply')).toHaveLength(0);

    await user.click(screen.getByTestId('merge-apply'));
    await waitFor(() => expect(screen.getByTestId('review-merged')).toHaveTextContent('Merged into deploys-tuesdays-0a1. 3 backups written'));
    const req = callsOf(be, 'mergeApply')[0][0] as { planId: string; summary: string; body: string };
    expect(req).toMatchObject({ summary: 'Deploys go out on Tuesdays', body: text, ids: ['deploys-tuesdays-0a1', 'deploys-on-tuesday-5c2'], scope: 'user' });
    expect(req.planId).toMatch(/^plan-/);
    expect([...be.notes.values()].map((n) => n.id)).not.toContain('deploys-on-tuesday-5c2');
    expect([...be.notes.values()].find((n) => n.id === 'release-checklist-9d3')!.body).toContain('[[deploys-tuesdays-0a1]]');
    const backups = await be.listBackups();
    expect(backups.filter((b) => b.reason === 'merge')).toHaveLength(3);
    await waitFor(() => expect(screen.getAllByTestId('review-finding').map((f) => f.dataset.kind)).toEqual(['broken_link']));
    expect(screen.getByTestId('review-count')).toHaveTextContent('1');
  });

  it('shows the trust and the secret the merged note gets from its notes, and sends a trust only when the person picks one', async () => {
    const labelled = reviewNotes().map((n) => (n.id === 'deploys-on-tuesday-5c2' ? { ...n, trust: 'peer' as const, tags: [...n.tags, 'contains-secrets'] } : n));
    const r = await renderApp(demoSeed({ notes: [...demoNotes(), ...labelled] }));
    await goTo(r.user, 'review');
    const topic = (await screen.findAllByTestId('review-finding')).find((f) => f.dataset.kind === 'same_topic')!;
    await r.user.click(within(topic).getByTestId('review-merge'));
    await waitFor(() => expect(editorText('merge-body')).toContain('## Deploys go out on Tuesdays'));
    expect(screen.getByText(/deploys-on-tuesday-5c2 · from other people \(peer\)/)).toBeInTheDocument();
    await r.user.click(screen.getByTestId('merge-preview-open'));
    const preview = await screen.findByTestId('merge-preview');
    const trust = within(preview).getByTestId('merge-trust') as HTMLSelectElement;
    expect(trust.value).toBe('');
    expect(trust.selectedOptions[0]).toHaveTextContent('As its notes give it: from other people (peer)');
    expect(within(preview).getByTestId('merge-secret')).toHaveTextContent('tagged contains-secrets');
    expect(within(preview).queryByTestId('merge-trust-chosen')).toBeNull();
    await r.user.selectOptions(trust, 'owner');
    await waitFor(() => expect(within(preview).getByTestId('merge-trust-chosen')).toHaveTextContent('You chose this instead of from other people (peer)'));
    await r.user.click(within(preview).getByTestId('merge-apply'));
    await waitFor(() => expect(screen.getByTestId('review-merged')).toBeInTheDocument());
    expect(callsOf(r.be, 'mergeApply')[0][0]).toMatchObject({ draftedBy: 'manual', trust: 'owner' });
    const kept = [...r.be.notes.values()].find((n) => n.id === 'deploys-tuesdays-0a1')!;
    expect(kept.tags).toContain('contains-secrets');
  });

  it('sends no trust unless one is picked, and says who drafted the text', async () => {
    const { be, user } = await openMerge({ chatModel: true });
    await user.click(screen.getByTestId('merge-draft-model'));
    await waitFor(() => expect(editorText('merge-body')).not.toContain('## '));
    await user.click(screen.getByTestId('merge-preview-open'));
    const preview = await screen.findByTestId('merge-preview');
    expect((within(preview).getByTestId('merge-trust') as HTMLSelectElement).selectedOptions[0]).toHaveTextContent('As its notes give it: derived');
    expect(within(preview).queryByTestId('merge-secret')).toBeNull();
    await user.click(within(preview).getByTestId('merge-apply'));
    await waitFor(() => expect(screen.getByTestId('review-merged')).toBeInTheDocument());
    const req = callsOf(be, 'mergeApply')[0][0] as Record<string, unknown>;
    expect(req.draftedBy).toBe('model');
    expect('trust' in req).toBe(false);
    expect([...be.notes.values()].find((n) => n.id === 'deploys-tuesdays-0a1')!.trust).toBe('derived');
  });

  it('asks the configured model for a draft (生成合并建议)', async () => {
    const { be, user } = await openMerge({ chatModel: true });
    const model = screen.getByTestId('merge-draft-model');
    expect(model).toBeEnabled();
    expect(model).toHaveTextContent('Suggest a merge');
    await user.click(model);
    await waitFor(() => expect(callsOf(be, 'mergePlan').at(-1)?.[2]).toBe('model'));
    await waitFor(() => expect(editorText('merge-body')).not.toContain('## '));
    expect(screen.getByText(/suggested by the configured model/)).toBeInTheDocument();
  });

  it('says plainly when a note changed since the plan, plans again and keeps the edited text', async () => {
    const { be, user } = await openMerge();
    await user.clear(screen.getByTestId('merge-summary'));
    await user.type(screen.getByTestId('merge-summary'), 'Deploys: Tuesdays only');
    await user.click(screen.getByTestId('merge-preview-open'));
    await screen.findByTestId('merge-preview');
    const n = [...be.notes.values()].find((x) => x.id === 'deploys-on-tuesday-5c2')!;
    n.body = 'Production deploys go out on Tuesday, after the staging smoke tests pass. Never on holidays.\n';
    n.updatedAt += 1;

    await user.click(screen.getByTestId('merge-apply'));
    const alert = await screen.findByTestId('merge-changed');
    expect(alert).toHaveTextContent('A note changed since this merge was planned, so nothing was written');
    expect(alert).toHaveTextContent('Your text is kept in the editor.');
    expect(screen.queryByTestId('merge-preview')).toBeNull();
    expect(callsOf(be, 'mergePlan')).toHaveLength(2);
    expect(screen.getByTestId('merge-summary')).toHaveValue('Deploys: Tuesdays only');
    expect([...be.notes.values()].map((x) => x.id)).toContain('deploys-on-tuesday-5c2');

    await user.click(screen.getByTestId('merge-preview-open'));
    await user.click(await screen.findByTestId('merge-apply'));
    await waitFor(() => expect(screen.getByTestId('review-merged')).toBeInTheDocument());
    const applied = callsOf(be, 'mergeApply');
    expect(applied).toHaveLength(2);
    expect((applied[1][0] as { planId: string }).planId).not.toBe((applied[0][0] as { planId: string }).planId);
  });

  it('shows the Chinese labels', async () => {
    const { user } = await renderApp(seed({ settings: { language: 'zh' } }));
    await waitFor(() => expect(screen.getByTestId('nav-review')).toHaveTextContent('待整理'));
    await goTo(user, 'review');
    const topic = (await screen.findAllByTestId('review-finding'))[0];
    await user.click(within(topic).getByTestId('review-merge'));
    expect(await screen.findByTestId('merge-draft-manual')).toHaveTextContent('手动合并');
    expect(screen.getByTestId('merge-draft-model')).toHaveTextContent('生成合并建议：未配置模型');
  });

  it('says so when there is nothing to tidy up', async () => {
    const { user } = await renderApp();
    await goTo(user, 'review');
    expect(await screen.findByTestId('review-empty')).toHaveTextContent('Nothing to tidy up.');
    expect(screen.queryByTestId('review-count')).toBeNull();
  });
});
