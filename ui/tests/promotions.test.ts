// "Ready to become notes" on the Review page: facts said in three or more conversations, the
// trust each note will get, a promotion asked for and confirmed, and the note it wrote.
import { cleanup, screen, waitFor, within } from '@testing-library/svelte';
import { describe, expect, it } from 'vitest';
import { demoPromotions, type FakeSeed } from '../src/lib/backend/fake';
import { callsOf, demoSeed, goTo, renderApp } from './helpers';

const seed = (extra: Partial<FakeSeed> = {}) => demoSeed({ conflicts: [], promotions: demoPromotions(), ...extra });
const item = (key: string) => screen.getAllByTestId('promotion').find((el) => el.dataset.key === key)!;

async function openReview(extra: Partial<FakeSeed> = {}) {
  const r = await renderApp(seed(extra));
  // The navigation's count reads the list once, and the page again.
  await waitFor(() => expect(callsOf(r.be, 'listPromotions')).toHaveLength(1));
  await goTo(r.user, 'review');
  await waitFor(() => expect(callsOf(r.be, 'listPromotions')).toHaveLength(2));
  return r;
}

describe('facts ready to become notes', () => {
  it('lists each fact with how often and when it was said, and the trust its note will get', async () => {
    await openReview();
    const section = await screen.findByTestId('promotions');
    expect(within(section).getByRole('heading', { name: /Ready to become notes/ })).toBeInTheDocument();
    await waitFor(() => expect(screen.getAllByTestId('promotion')).toHaveLength(2));
    const heron = item('fact:team-heron');
    expect(heron).toHaveTextContent("Ana's team name is Heron");
    expect(heron).toHaveTextContent('3 conversations');
    expect(heron).toHaveTextContent(/ – /);
    expect(heron).toHaveTextContent('your own words');
    expect(within(heron).queryByTestId('promotion-trust')).toBeNull();

    // Someone else said it: the note is only as trusted as that, said plainly.
    const dune = item('fact:marta-book');
    expect(dune).toHaveAttribute('data-trust', 'peer');
    const badge = within(dune).getByTestId('promotion-trust');
    expect(badge).toHaveTextContent('from other people (peer)');
    expect(badge).toHaveAttribute('title', expect.stringContaining('Someone other than you stated it'));
    expect(within(dune).getByTestId('promotion-why')).toHaveTextContent('Someone other than you stated it');
    expect(dune).not.toHaveTextContent('your own words');
  });

  it('asks first, then writes the note, names it in a toast and opens it on the Notes page', async () => {
    const { be, user } = await openReview();
    await waitFor(() => expect(screen.getAllByTestId('promotion')).toHaveLength(2));
    await user.click(within(item('fact:team-heron')).getByTestId('promotion-promote'));
    const dialog = await screen.findByTestId('promotion-confirm');
    expect(dialog).toHaveTextContent('Write a note from this fact?');
    expect(dialog).toHaveTextContent('A note “Ana\'s team name is Heron” will be written in User from the 3 messages that stated it');
    expect(dialog).toHaveTextContent('Its trust: yours. You stated it yourself every time, so the note has full trust.');

    // Cancel writes nothing.
    await user.click(within(dialog).getByRole('button', { name: 'Cancel' }));
    await waitFor(() => expect(screen.queryByTestId('promotion-confirm')).toBeNull());
    expect(callsOf(be, 'promote')).toHaveLength(0);

    await user.click(within(item('fact:team-heron')).getByTestId('promotion-promote'));
    await user.click(within(await screen.findByTestId('promotion-confirm')).getByTestId('confirm-ok'));
    await waitFor(() => expect(screen.getByTestId('toast')).toHaveTextContent('Wrote the note “Ana\'s team name is Heron” (ana-s-team-name-is-heron) from 3 messages.'));
    expect(callsOf(be, 'promote')).toEqual([['fact:team-heron']]);
    await waitFor(() => expect(screen.getAllByTestId('promotion').map((el) => el.dataset.key)).toEqual(['fact:marta-book']));
    const note = be.notes.get('user\u0000ana-s-team-name-is-heron')!;
    expect(note).toMatchObject({ summary: "Ana's team name is Heron", tags: ['promoted'], trust: null });

    expect(screen.getByTestId('promotion-done')).toHaveTextContent('Wrote the note “Ana\'s team name is Heron”.');
    await user.click(screen.getByTestId('promotion-open'));
    await waitFor(() => expect(screen.getByTestId('note-summary')).toHaveValue("Ana's team name is Heron"));
  });

  it('counts the facts ready to become notes in the navigation, with the findings', async () => {
    const r = await renderApp(seed());
    // The demo notes hold no finding: the two facts are what waits on the Review page.
    await waitFor(() => expect(screen.getByTestId('review-count')).toHaveTextContent('2'));
    expect(within(screen.getByTestId('nav-review')).getByLabelText('2 to tidy up')).toBeInTheDocument();
    await goTo(r.user, 'review');
    await waitFor(() => expect(screen.getAllByTestId('promotion')).toHaveLength(2));
    await r.user.click(within(item('fact:team-heron')).getByTestId('promotion-promote'));
    await r.user.click(within(await screen.findByTestId('promotion-confirm')).getByTestId('confirm-ok'));
    await waitFor(() => expect(screen.getByTestId('review-count')).toHaveTextContent('1'));
  });

  it('says the trust a peer’s fact gives the note before writing it', async () => {
    const { be, user } = await openReview({ promotions: demoPromotions().filter((p) => p.trust === 'peer') });
    await waitFor(() => expect(screen.getAllByTestId('promotion')).toHaveLength(1));
    await user.click(within(item('fact:marta-book')).getByTestId('promotion-promote'));
    const dialog = await screen.findByTestId('promotion-confirm');
    expect(dialog).toHaveTextContent('Its trust: from other people (peer). Someone other than you stated it');
    await user.click(within(dialog).getByTestId('confirm-ok'));
    await waitFor(() => expect(screen.getByTestId('toast')).toHaveTextContent('Wrote the note “Marta\'s favorite book is Dune”'));
    expect([...be.notes.values()].find((n) => n.summary === "Marta's favorite book is Dune")!.trust).toBe('peer');
    // The last one promoted: what was written stays named, above the quiet line.
    await waitFor(() => expect(screen.getByTestId('promotions-none')).toBeInTheDocument());
    expect(screen.getByTestId('promotion-done')).toHaveTextContent('Wrote the note “Marta\'s favorite book is Dune”.');
  });

  it('says so when the fact is no longer ready, and reads the list again', async () => {
    const { be, user } = await openReview();
    await waitFor(() => expect(screen.getAllByTestId('promotion')).toHaveLength(2));
    await user.click(within(item('fact:team-heron')).getByTestId('promotion-promote'));
    // Meanwhile another value was stated: the fact is replaced, so no longer proposed.
    be.promotions.splice(0, 1);
    await user.click(within(await screen.findByTestId('promotion-confirm')).getByTestId('confirm-ok'));
    await waitFor(() => expect(screen.getByTestId('toast')).toHaveTextContent('no fact fact:team-heron ready for promotion here'));
    await waitFor(() => expect(screen.getAllByTestId('promotion').map((el) => el.dataset.key)).toEqual(['fact:marta-book']));
    expect(screen.queryByTestId('promotion-done')).toBeNull();
  });

  it('shows one quiet line when nothing is ready', async () => {
    await openReview({ promotions: [] });
    await waitFor(() => expect(screen.getByTestId('promotions-none')).toHaveTextContent('No facts are ready to become notes.'));
    expect(screen.queryByTestId('promotions')).toBeNull();
    expect(screen.queryByRole('heading', { name: /Ready to become notes/ })).toBeNull();
  });

  it('says why an automatic promotion left a fact for you, in the UI language', async () => {
    const at = new Date(2026, 11, 4, 6, 0).getTime();
    const left = demoPromotions().map((p) =>
      p.key === 'fact:team-heron'
        ? { ...p, autoLeft: { model: 'smollm2', code: 'value_dropped' as const, reason: 'the summary does not keep the fact’s value “Heron”', at } }
        : p,
    );
    for (const [language, words] of [
      ['en', 'The model smollm2 left it for you on Dec 4, 2026: its summary lost the fact’s value.'],
      ['zh', '模型 smollm2 于 2026年12月4日 将其留给你处理：它的摘要丢失了事实的值。'],
      ['es', 'El modelo smollm2 lo dejó para ti el 4 dic 2026: su resumen perdió el valor del hecho.'],
    ] as const) {
      await openReview({ promotions: left, settings: { language } });
      await waitFor(() => expect(screen.getAllByTestId('promotion')).toHaveLength(2));
      const why = within(item('fact:team-heron')).getByTestId('promotion-left');
      expect(why).toHaveTextContent(words);
      expect(why).toHaveAttribute('data-code', 'value_dropped');
      // The engine's own words, exactly, on hover.
      expect(why).toHaveAttribute('title', 'the summary does not keep the fact’s value “Heron”');
      // A fact no model left has no such line.
      expect(within(item('fact:marta-book')).queryByTestId('promotion-left')).toBeNull();
      cleanup();
    }
  });

  it('reads in 中文', async () => {
    await openReview({ settings: { language: 'zh' } });
    await waitFor(() => expect(screen.getByTestId('promotions')).toHaveTextContent('可以写成笔记的事实'));
    expect(within(item('fact:team-heron')).getByTestId('promotion-promote')).toHaveTextContent('写成笔记…');
    expect(within(item('fact:marta-book')).getByTestId('promotion-trust')).toHaveTextContent('来自他人（peer）');
  });
});
