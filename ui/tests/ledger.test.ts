import { screen, waitFor, within } from '@testing-library/svelte';
import { describe, expect, it } from 'vitest';
import type { CaptureRun } from '../src/lib/backend/types';
import { callsOf, demoSeed, goTo, renderApp } from './helpers';

const run = (id: number, extra: Partial<CaptureRun>): CaptureRun => ({
  id,
  at: Date.now() - (10 - id) * 60_000,
  doneAt: null,
  scope: 'user',
  conversation: `c-${id}`,
  entry: 'hook',
  host: 'claude-code',
  model: null,
  state: 'skipped',
  reason: null,
  notes: [],
  detail: null,
  ...extra,
});

const RUNS: CaptureRun[] = [
  run(1, { reason: 'no_eligible_model', entry: 'cli', host: null }),
  run(2, { state: 'written', model: 'smollm2', notes: [{ id: 'lives-in-lisbon', kind: 'user', reinforced: false }] }),
  run(3, { state: 'written', model: 'smollm2', notes: [{ id: 'lives-in-lisbon', kind: 'user', reinforced: true }] }),
  run(4, { reason: 'poison_gate', model: 'smollm2', detail: 'a note tripped the poison gate (`override`)' }),
  run(5, { state: 'pending', entry: 'mcp', host: 'mcp' }),
];

describe('Model capture view', () => {
  it('lists each turn with what came of it, the newest first, and reads again on refresh', async () => {
    const { be, user } = await renderApp(demoSeed({ captureRuns: RUNS }));
    await goTo(user, 'conversations');
    await user.click(await screen.findByTestId('conversations-tab-ledger'));
    await waitFor(() => expect(screen.getAllByTestId('ledger-run')).toHaveLength(5));
    const [pending, refused, reinforced, written, none] = screen.getAllByTestId('ledger-run');
    expect(within(pending).getByTestId('ledger-outcome')).toHaveTextContent('Waiting for the model');
    expect(pending).toHaveTextContent('mcp via mcp · no model asked');
    expect(within(refused).getByTestId('ledger-outcome')).toHaveTextContent('Refused: read as instructions');
    expect(within(refused).getByTestId('ledger-detail')).toHaveTextContent('`override`');
    expect(within(refused).getByTestId('ledger-outcome')).not.toHaveClass('failed');
    expect(within(reinforced).getByTestId('ledger-note')).toHaveTextContent('Reinforced lives-in-lisbon (user)');
    expect(within(written).getByTestId('ledger-outcome')).toHaveTextContent('Wrote user');
    expect(written).toHaveTextContent('claude-code via hook · model smollm2');
    expect(within(written).getByTestId('ledger-note')).toHaveTextContent('New note lives-in-lisbon (user)');
    expect(within(none).getByTestId('ledger-outcome')).toHaveTextContent('Skipped: no model set');
    expect(none).toHaveTextContent('unknown host via cli');

    be.captureRuns.push(run(6, { reason: 'too_short' }), run(7, { reason: 'error', model: 'smollm2', detail: 'cannot reach it' }));
    await user.click(screen.getByTestId('ledger-refresh'));
    await waitFor(() => expect(screen.getAllByTestId('ledger-run')).toHaveLength(7));
    const [failed, short] = screen.getAllByTestId('ledger-run');
    expect(within(short).getByTestId('ledger-outcome')).toHaveTextContent('Skipped: message too short');
    // A failure reads apart from a skip.
    expect(within(failed).getByTestId('ledger-outcome')).toHaveTextContent('Failed');
    expect(within(failed).getByTestId('ledger-outcome')).toHaveClass('failed');
    expect(failed).toHaveTextContent('claude-code via hook · model smollm2');
    expect(callsOf(be, 'captureLedger')).toEqual([[100], [100]]);
  });

  it('says when no turn has reached it yet', async () => {
    const { user } = await renderApp(demoSeed());
    await goTo(user, 'conversations');
    await user.click(await screen.findByTestId('conversations-tab-ledger'));
    expect(await screen.findByTestId('ledger-empty')).toHaveTextContent('No turn has reached model capture yet.');
  });
});
