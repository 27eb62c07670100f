import { expect } from "vitest";
import { fireEvent, render, screen, waitFor } from '@testing-library/svelte';
import userEvent from '@testing-library/user-event';
import App from '../src/App.svelte';
import { createFakeBackend, DEMO_SCOPES, demoConflicts, demoNotes, type FakeBackend, type FakeSeed } from '../src/lib/backend/fake';
import { locale } from '../src/lib/i18n/index.svelte';
import { AppState } from '../src/lib/shell/app.svelte';

export function demoSeed(extra: Partial<FakeSeed> = {}): FakeSeed {
  return { scopes: DEMO_SCOPES, notes: demoNotes(), conflicts: demoConflicts(), signedIn: true, syncEnabled: true, ...extra };
}

/** The whole app over a fake backend, in English unless the seed's settings say otherwise. */
export async function renderApp(seed: FakeSeed = demoSeed()): Promise<{ be: FakeBackend; app: AppState; user: ReturnType<typeof userEvent.setup> }> {
  locale.set('en');
  const be = createFakeBackend({ ...seed, settings: { language: 'en', ...seed.settings } });
  const app = new AppState();
  const user = userEvent.setup();
  render(App, { props: { backend: be, app } });
  await waitFor(() => expect(be.calls.some((c) => c.name === 'getSettings')).toBe(true));
  return { be, app, user };
}

export async function goTo(user: ReturnType<typeof userEvent.setup>, page: string): Promise<void> {
  await user.click(screen.getByTestId(`nav-${page}`));
}

export function callsOf(be: FakeBackend, name: string): unknown[][] {
  return be.calls.filter((c) => c.name === name).map((c) => c.args);
}

/** Picks an option the way a person's choice reaches Svelte: the value, then `change`. */
export async function choose(select: HTMLElement, value: string): Promise<void> {
  const s = select as HTMLSelectElement;
  s.value = value;
  expect(s.value).toBe(value);
  await fireEvent.change(s);
}
