import { screen, waitFor, within } from '@testing-library/svelte';
import { describe, expect, it } from 'vitest';
import { demoConversations, fakeConversation, longConversation } from '../src/lib/backend/fake';
import { BackendFailure } from '../src/lib/backend/index';
import { day } from '../src/lib/i18n/index.svelte';
import { callsOf, demoSeed, goTo, renderApp } from './helpers';

const withConversations = (extra = {}) => demoSeed({ conversations: demoConversations(), ...extra });

describe('Conversations page', () => {
  it('tells how to start capturing when nothing was captured', async () => {
    const { user } = await renderApp();
    await goTo(user, 'conversations');
    const empty = await screen.findByTestId('conversations-empty');
    expect(empty).toHaveTextContent('No conversations captured yet');
    expect(empty).toHaveTextContent('memoria hook claude-code');
    expect(empty).toHaveTextContent('memoria capture');
    expect(empty).toHaveTextContent('docs/conversations.md');
    expect(screen.queryByTestId('conversation-item')).toBeNull();
  });

  it('lists the conversations latest first with their scope, host, count and dates', async () => {
    const { user } = await renderApp(withConversations());
    await goTo(user, 'conversations');
    await waitFor(() => expect(screen.getAllByTestId('conversation-item')).toHaveLength(2));
    const [first, second] = screen.getAllByTestId('conversation-item');
    expect(first).toHaveAttribute('data-id', 'trip-planning');
    expect(first).toHaveTextContent('6 messages');
    expect(first).toHaveTextContent('User');
    expect(second).toHaveAttribute('data-id', '0b7c2d4e-claude');
    expect(second).toHaveTextContent('project:a1b2c3 · claude-code');
    expect(second).toHaveTextContent('2 messages');
    expect(screen.getByText('2 conversations · 8 messages')).toBeInTheDocument();
  });

  it('shows a conversation’s messages in order, a held-back one marked and its text never shown', async () => {
    const { be, user } = await renderApp(withConversations());
    await goTo(user, 'conversations');
    await user.click((await screen.findAllByTestId('conversation-item'))[0]);
    await waitFor(() => expect(screen.getAllByTestId('message-item')).toHaveLength(6));
    expect(callsOf(be, 'conversationMessages')).toEqual([['trip-planning', 'user']]);
    expect(screen.getByTestId('conversation-title')).toHaveTextContent('trip-planning');
    const items = screen.getAllByTestId('message-item');
    expect(items[0]).toHaveTextContent('Ana');
    expect(items[0]).toHaveTextContent('Book the train to Porto for May 12.');
    expect(items[0].querySelector('time')).not.toBeNull();
    expect(items[1]).toHaveTextContent('Assistant');
    expect(items[1]).toHaveTextContent('Booked the 09:00 train');
    const held = items[4];
    expect(held).toHaveClass('held');
    expect(within(held).getByTestId('message-held')).toHaveTextContent('Held back');
    expect(held).toHaveTextContent('password-line');
    expect(document.body).not.toHaveTextContent('tram28-ribeira');
  });

  it('forgets a conversation only after the confirmation, which says it cannot be undone', async () => {
    const { be, user } = await renderApp(withConversations());
    await goTo(user, 'conversations');
    await user.click((await screen.findAllByTestId('conversation-item'))[0]);
    await screen.findAllByTestId('message-item');

    await user.click(screen.getByTestId('conversation-forget'));
    const dialog = await screen.findByTestId('confirm-dialog');
    expect(dialog).toHaveTextContent('Forget “trip-planning”?');
    expect(dialog).toHaveTextContent('Removes 6 messages from this computer for good');
    expect(dialog).toHaveTextContent('cannot be undone');
    await user.click(within(dialog).getByText('Cancel'));
    expect(screen.queryByTestId('confirm-dialog')).toBeNull();
    expect(callsOf(be, 'forgetConversation')).toEqual([]);

    await user.click(screen.getByTestId('conversation-forget'));
    await user.click(await screen.findByTestId('confirm-ok'));
    await waitFor(() => expect(callsOf(be, 'forgetConversation')).toEqual([['trip-planning', 'user']]));
    expect(await screen.findByText('Forgot “trip-planning” (6 messages).')).toBeInTheDocument();
    await waitFor(() => expect(screen.getAllByTestId('conversation-item')).toHaveLength(1));
    expect(screen.getByTestId('conversation-item')).toHaveAttribute('data-id', '0b7c2d4e-claude');
    expect(screen.queryByTestId('message-item')).toBeNull();
    expect(be.conversations.map((c) => c.row.id)).toEqual(['0b7c2d4e-claude']);
  });

  it('shows facts and summary beside the messages: a current fact, and a closed one struck with its end', async () => {
    const { be, user } = await renderApp(withConversations());
    await goTo(user, 'conversations');
    await user.click((await screen.findAllByTestId('conversation-item'))[0]);
    const panel = await screen.findByTestId('conversation-extract');
    expect(within(panel).getByRole('heading', { name: 'Facts and summary' })).toBeInTheDocument();
    expect(await within(panel).findByTestId('extract-summary')).toHaveTextContent('Ana planned a trip to Porto');
    expect(callsOf(be, 'conversationExtract')).toEqual([['trip-planning', 'user']]);
    const facts = within(panel).getAllByTestId('extract-fact');
    expect(facts).toHaveLength(3);
    const [closed, current] = facts;
    const trip = be.conversations.find((c) => c.row.id === 'trip-planning')!;
    expect(closed).toHaveAttribute('data-current', 'false');
    expect(closed).toHaveClass('closed');
    expect(closed).toHaveTextContent('travel date: May 12');
    expect(closed).toHaveTextContent('No longer current');
    expect(closed).toHaveTextContent(`until ${day(trip.extract!.facts[0].validTo!)}`);
    expect(current).toHaveAttribute('data-current', 'true');
    expect(current).toHaveTextContent('travel date: May 14');
    expect(current).not.toHaveTextContent('No longer current');
    expect(current).not.toHaveTextContent('until');
    expect(panel).toHaveTextContent('Hotel Ribeira');
    expect(within(panel).getByRole('heading', { name: 'People, places and things' })).toBeInTheDocument();
  });

  it('says so in its own panel when nothing was drawn out, or facts are not available', async () => {
    const { be, user } = await renderApp(withConversations());
    await goTo(user, 'conversations');
    const items = await screen.findAllByTestId('conversation-item');
    await user.click(items[1]);
    expect(await screen.findByTestId('extract-none')).toHaveTextContent('Nothing has been drawn out');

    // A shell without the extraction yet: the messages still read, the panel says why.
    be.conversationExtract = () => Promise.reject(new BackendFailure('internal', 'command conversation_extract not found'));
    await user.click(items[0]);
    await waitFor(() => expect(screen.getAllByTestId('message-item')).toHaveLength(6));
    expect(await screen.findByTestId('extract-unavailable')).toHaveTextContent('not available');
    expect(screen.getByTestId('conversation-extract')).toHaveTextContent('command conversation_extract not found');
  });

  it('renders a conversation of thousands of messages through the virtual list', async () => {
    const { user } = await renderApp(demoSeed({ conversations: [longConversation(5000)] }));
    await goTo(user, 'conversations');
    await user.click(await screen.findByTestId('conversation-item'));
    await waitFor(() => expect(screen.getAllByTestId('message-item').length).toBeGreaterThan(0));
    const list = screen.getByRole('list', { name: 'Messages' });
    expect(list).toHaveAttribute('data-total', '5000');
    expect(screen.getAllByTestId('message-item').length).toBeLessThan(100);
    expect(screen.getAllByTestId('message-item')[0]).toHaveTextContent('Message number 0');
  });

  it('says when capture is off, and where to turn it on', async () => {
    const { app, user } = await renderApp(withConversations({ settings: { conversationCapture: false } }));
    await goTo(user, 'conversations');
    const off = await screen.findByTestId('conversations-capture-off');
    expect(off).toHaveTextContent('Capture is off');
    expect(off).toHaveTextContent('memoria capture FILE still works');
    await user.click(within(off).getByText('Open Settings'));
    expect(app.page).toBe('settings');
    expect(await screen.findByTestId('settings-conversation-capture')).not.toBeChecked();
  });

  it('reads a conversation captured meanwhile on Refresh', async () => {
    const { be, user } = await renderApp(withConversations());
    await goTo(user, 'conversations');
    await waitFor(() => expect(screen.getAllByTestId('conversation-item')).toHaveLength(2));
    be.conversations.push(fakeConversation('standup', 'user', null, Date.now(), [['user', 'Ship on Tuesday', 'Ana']]));
    await user.click(screen.getByTestId('conversations-refresh'));
    await waitFor(() => expect(screen.getAllByTestId('conversation-item')[0]).toHaveAttribute('data-id', 'standup'));
    expect(screen.getAllByTestId('conversation-item')[0]).toHaveTextContent('1 message');
    expect(screen.getAllByTestId('conversation-item')[0]).not.toHaveTextContent('1 messages');
    expect(screen.getByText('3 conversations · 9 messages')).toBeInTheDocument();
  });
});
