import { screen, waitFor, within } from '@testing-library/svelte';
import { describe, expect, it } from 'vitest';
import { demoConversations } from '../src/lib/backend/fake';
import { callsOf, demoSeed, goTo, renderApp } from './helpers';

/** The demo's conversations with the trip planned on host `grok`: its three replies, the hotel
 * fact drawn from one of them and its summary are grok's memory. */
function withGrok() {
  const conversations = demoConversations();
  conversations[0].row.host = 'grok';
  return demoSeed({ conversations });
}

describe('Quarantine card on the Overview page', () => {
  it('lists the providers that wrote memory, each with what may still be recalled', async () => {
    const { user } = await renderApp(withGrok());
    await goTo(user, 'overview');
    const card = await screen.findByTestId('quarantine-card');
    await waitFor(() => expect(within(card).getAllByTestId('quarantine-provider')).toHaveLength(3));
    const rows = within(card).getAllByTestId('quarantine-provider').map((r) => r.textContent?.replace(/\s+/g, ' ').trim());
    expect(rows).toEqual(['host claude-code 1 recallable', 'host grok 3 recallable', 'model claude-sonnet 1 recallable']);
    expect(within(card).getByTestId('quarantine-preview')).toBeDisabled();
    expect(within(card).getByTestId('quarantine-no-history')).toHaveTextContent('No quarantines yet.');
  });

  it('previews, asks before hiding, applies, and releases exactly what it hid', async () => {
    const { be, user } = await renderApp(withGrok());
    await goTo(user, 'overview');
    const card = await screen.findByTestId('quarantine-card');
    const grok = (await within(card).findAllByTestId('quarantine-provider')).find((r) => r.textContent?.includes('grok'))!;
    await user.click(within(grok).getByRole('checkbox'));
    await user.click(within(card).getByTestId('quarantine-preview'));
    expect(await within(card).findByTestId('quarantine-preview-counts')).toHaveTextContent(
      'Would hide 3 messages, 1 fact, 1 summary, 0 captured notes, from 1 conversation. Nothing has changed yet.',
    );
    const trip = be.conversations[0];
    const before = structuredClone({ marks: trip.messages.map((m) => m.quarantined), facts: trip.extract!.facts.map((f) => f.trust) });
    // Asked inline; cancelling changes nothing.
    await user.click(within(card).getByTestId('quarantine-apply'));
    await user.click(within(card).getByTestId('quarantine-confirm-no'));
    expect(callsOf(be, 'quarantineApply')).toEqual([]);
    await user.click(within(card).getByTestId('quarantine-apply'));
    await user.click(within(card).getByTestId('quarantine-confirm-yes'));
    expect(callsOf(be, 'quarantineApply')).toEqual([[{ hosts: ['grok'], models: [], since: null, until: null }]]);
    const entry = await within(card).findByTestId('quarantine-entry');
    expect(entry).toHaveTextContent('grok');
    expect(entry).toHaveTextContent('3 messages, 1 fact, 1 summary');
    // The provider's replies are marked and its fact quarantined; the person's words are not.
    const id = entry.getAttribute('data-id')!;
    expect(trip.messages.map((m) => m.quarantined)).toEqual(trip.messages.map((m) => (m.role === 'assistant' ? `quarantine:${id}` : null)));
    expect(trip.extract!.facts.map((f) => f.trust)).toEqual(['owner', 'owner', 'quarantined']);
    const grokNow = within(card).getAllByTestId('quarantine-provider').find((r) => r.textContent?.includes('grok'))!;
    expect(grokNow).toHaveTextContent('0 recallable');

    await user.click(within(entry).getByTestId('quarantine-release'));
    expect(await within(card).findByTestId('quarantine-released')).toHaveTextContent(/^Released /);
    expect(callsOf(be, 'quarantineRelease')).toEqual([[id]]);
    expect({ marks: trip.messages.map((m) => m.quarantined), facts: trip.extract!.facts.map((f) => f.trust) }).toEqual(before);
  });

  it('says which notes did not come back as they were', async () => {
    const { be, user } = await renderApp(withGrok());
    be.quarantineRelease = async (id) => ({
      id,
      messages: 3,
      derived: 2,
      rederived: 0,
      notes: 0,
      renamed: [['pier.md', 'pier-restored.md']],
      missing: ['gone.md'],
      failed: [['sub/x.md', 'not a folder']],
    });
    await goTo(user, 'overview');
    const card = await screen.findByTestId('quarantine-card');
    const grok = (await within(card).findAllByTestId('quarantine-provider')).find((r) => r.textContent?.includes('grok'))!;
    await user.click(within(grok).getByRole('checkbox'));
    await user.click(within(card).getByTestId('quarantine-preview'));
    await user.click(await within(card).findByTestId('quarantine-apply'));
    await user.click(within(card).getByTestId('quarantine-confirm-yes'));
    await user.click(await within(card).findByTestId('quarantine-release'));
    expect(await screen.findByText(/pier\.md came back as pier-restored\.md/)).toHaveTextContent(
      'gone.md was gone from the quarantine folder · sub/x.md could not be put back (not a folder); its file stays in the quarantine folder',
    );
  });

  it('sends a range of whole days and says when nothing is left to hide', async () => {
    const { be, user } = await renderApp(withGrok());
    await goTo(user, 'overview');
    const card = await screen.findByTestId('quarantine-card');
    const host = (await within(card).findAllByTestId('quarantine-provider')).find((r) => r.textContent?.includes('claude-code'))!;
    await user.click(within(host).getByRole('checkbox'));
    await user.type(within(card).getByTestId('quarantine-since'), '2001-02-03');
    await user.type(within(card).getByTestId('quarantine-until'), '2001-02-04');
    await user.click(within(card).getByTestId('quarantine-preview'));
    expect(await within(card).findByTestId('quarantine-preview-counts')).toHaveTextContent('Nothing left to quarantine for these providers.');
    expect(within(card).queryByTestId('quarantine-apply')).toBeNull();
    const [[sent]] = callsOf(be, 'quarantinePreview') as [[{ since: number; until: number }]];
    expect(sent.since).toBe(new Date(2001, 1, 3).getTime());
    expect(sent.until).toBe(new Date(2001, 1, 5).getTime() - 1);
  });

  it('says so when no provider has written memory', async () => {
    const { user } = await renderApp(demoSeed());
    await goTo(user, 'overview');
    expect(await screen.findByTestId('quarantine-no-providers')).toHaveTextContent('No host or model has written memory yet.');
  });
});
