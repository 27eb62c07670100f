import { screen, waitFor } from '@testing-library/svelte';
import { describe, expect, it } from 'vitest';
import { callsOf, goTo, renderApp } from './helpers';

describe('Import page', () => {
  it('imports a folder with a progress bar fed by indexProgress events', async () => {
    const { be, user } = await renderApp();
    const seen: number[] = [];
    await be.onEvent((e) => {
      if (e.kind === 'indexProgress') queueMicrotask(() => seen.push(Number(screen.queryByTestId('import-progress')?.getAttribute('aria-valuenow'))));
    });
    await goTo(user, 'import');
    await user.type(screen.getByTestId('import-path'), '/home/ana/Vault');
    await user.click(screen.getByTestId('import-start'));
    const report = await screen.findByTestId('import-report');
    expect(report).toHaveTextContent('Imported 4 new, 0 updated, 0 unchanged from 4 files.');
    expect(callsOf(be, 'importFolder')).toEqual([[{ path: '/home/ana/Vault', scope: null }]]);
    const bar = screen.getByTestId('import-progress');
    expect(bar).toHaveAttribute('aria-valuenow', '4');
    expect(bar).toHaveAttribute('aria-valuemax', '4');
    expect(seen.some((n) => n > 0 && n < 4)).toBe(true);
  });

  it('shows why a folder cannot be imported', async () => {
    const { user } = await renderApp();
    await goTo(user, 'import');
    await user.type(screen.getByTestId('import-path'), 'Vault');
    await user.click(screen.getByTestId('import-start'));
    await waitFor(() => expect(screen.getByRole('alert')).toHaveTextContent('is not a full folder path'));
  });
});
