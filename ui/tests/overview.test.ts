import { screen, within } from '@testing-library/svelte';
import { describe, expect, it } from 'vitest';
import { demoConversations } from '../src/lib/backend/fake';
import { demoSeed, goTo, renderApp } from './helpers';

describe('Overview page', () => {
  it('shows counts, the relevance chart and the engine card', async () => {
    const { user } = await renderApp();
    await goTo(user, 'overview');
    const card = await screen.findByTestId('engine-card');
    expect(card).toHaveAttribute('data-embedder', 'fastembed');
    expect(card).toHaveTextContent('8 of 8');
    expect(within(card).queryByTestId('engine-fallback')).toBeNull();
    const chart = screen.getByTestId('relevance-chart');
    expect(chart.querySelectorAll('rect')).toHaveLength(10);
    expect(screen.getByText('By scope')).toBeInTheDocument();
    expect(screen.getByText('Vault notes')).toBeInTheDocument();
  });

  it('says whether conversations are captured and what the raw log holds', async () => {
    const { user } = await renderApp(demoSeed({ conversations: demoConversations() }));
    await goTo(user, 'overview');
    const capture = await screen.findByTestId('engine-capture');
    expect(capture).toHaveAttribute('data-on', 'true');
    expect(capture).toHaveTextContent('On');
    expect(capture).toHaveTextContent('2 conversations, 8 messages kept');
    const log = screen.getByTestId('engine-raw-log');
    expect(log).toHaveTextContent(/^Kept on this computer only, never synced · [\d.]+ kB · kept until you forget a conversation$/);
  });

  it('says how long the raw log keeps conversations when a limit is set', async () => {
    const { user } = await renderApp(demoSeed({ conversations: demoConversations(), logMaxAgeDays: 365 }));
    await goTo(user, 'overview');
    expect(await screen.findByTestId('engine-raw-log')).toHaveTextContent('messages older than 365 days go');
  });

  it('names the engine switches in the UI language', async () => {
    const { user } = await renderApp(demoSeed({ settings: { language: 'zh' }, syncEnabled: false }));
    await goTo(user, 'overview');
    await screen.findByTestId('engine-card');
    const switches = screen.getAllByTestId('engine-switch');
    expect(switches.map((s) => s.dataset.key)).toEqual(['sync', 'uploadSecrets']);
    expect(switches[0]).toHaveTextContent('关 云同步');
    expect(switches[1]).toHaveTextContent('同步时包含机密');
  });

  it('warns plainly, with the fix, when recall runs on the hash fallback', async () => {
    const { user } = await renderApp(demoSeed({ hashFallback: true }));
    await goTo(user, 'overview');
    const warn = await screen.findByTestId('engine-fallback');
    expect(warn).toHaveTextContent('Recall is not using the embedding model');
    expect(warn).toHaveTextContent('How to fix it:');
    expect(warn).toHaveTextContent('model folder');
  });
});
