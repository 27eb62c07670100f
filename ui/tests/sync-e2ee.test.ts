import { screen, waitFor } from '@testing-library/svelte';
import { describe, expect, it } from 'vitest';
import { FAKE_PASSPHRASE, FAKE_RECOVERY_KEY, FAKE_RESET_RECOVERY_KEY, FAKE_ROTATED_RECOVERY_KEY } from '../src/lib/backend/fake';
import { lastGroup, matchesLastGroup, newPassphraseReady, passphraseStrength } from '../src/lib/sync/passphrase';
import { callsOf, demoSeed, goTo, renderApp } from './helpers';

describe('passphrase strength', () => {
  it('grows with length and variety, and refuses fewer than 8 characters', () => {
    expect(passphraseStrength('')).toBe('tooShort');
    expect(passphraseStrength('abc12!X')).toBe('tooShort');
    expect(passphraseStrength('aaaaaaaaaaaa')).toBe('weak');
    expect(passphraseStrength('password')).toBe('weak');
    expect(passphraseStrength('Passw0rd!')).toBe('fair');
    expect(passphraseStrength('correct horse battery staple')).toBe('strong');
    expect(passphraseStrength('记忆 同步 加密 钥匙 很长')).toBe('fair');
  });

  it('takes a new passphrase only long enough and the same both times', () => {
    expect(newPassphraseReady(FAKE_PASSPHRASE, FAKE_PASSPHRASE)).toBe(true);
    expect(newPassphraseReady(FAKE_PASSPHRASE, `${FAKE_PASSPHRASE} `)).toBe(false);
    expect(newPassphraseReady('short', 'short')).toBe(false);
    expect(newPassphraseReady('', '')).toBe(false);
  });

  it('checks the last group of a recovery key, ignoring case and spaces', () => {
    expect(lastGroup(FAKE_RECOVERY_KEY)).toBe('M8PA');
    expect(matchesLastGroup(FAKE_RECOVERY_KEY, ' m8pa ')).toBe(true);
    expect(matchesLastGroup(FAKE_RECOVERY_KEY, '2CKE')).toBe(false);
    expect(matchesLastGroup('', '')).toBe(false);
  });
});

describe('Sync page: end-to-end encryption', () => {
  it('is set up with a passphrase typed twice, shows the recovery key once until its last group is typed back, then says end-to-end encrypted', async () => {
    const { be, user } = await renderApp();
    await goTo(user, 'sync');
    await user.click(await screen.findByTestId('e2ee-setup'));
    expect(screen.getByTestId('e2ee-loss')).toHaveTextContent('If you lose both, the copy in the cloud can never be read again');
    expect(screen.getByTestId('e2ee-loss')).toHaveTextContent('The notes on this machine are untouched');
    const turnOn = screen.getByTestId('e2ee-turn-on');
    expect(turnOn).toBeDisabled();

    const first = screen.getByLabelText('Passphrase');
    await user.type(first, 'short');
    expect(screen.getByTestId('e2ee-strength')).toHaveAttribute('data-strength', 'tooShort');
    expect(screen.getByTestId('e2ee-strength')).toHaveTextContent('Strength: too short');
    await user.clear(first);
    await user.type(first, 'password');
    expect(screen.getByTestId('e2ee-strength')).toHaveAttribute('data-strength', 'weak');
    await user.clear(first);
    await user.type(first, FAKE_PASSPHRASE);
    expect(screen.getByTestId('e2ee-strength')).toHaveTextContent('Strength: strong');

    await user.type(screen.getByLabelText('Passphrase again'), 'correct horse battery stapel');
    expect(screen.getByTestId('e2ee-mismatch')).toHaveTextContent('The two passphrases differ.');
    expect(turnOn).toBeDisabled();
    await user.clear(screen.getByLabelText('Passphrase again'));
    await user.type(screen.getByLabelText('Passphrase again'), FAKE_PASSPHRASE);
    expect(screen.queryByTestId('e2ee-mismatch')).toBeNull();
    expect(turnOn).toBeEnabled();
    await user.click(turnOn);

    // The passphrase went to the backend once, and is gone from the page.
    await waitFor(() => expect(callsOf(be, 'syncEncrypt')).toHaveLength(1));
    const key = await screen.findByTestId('e2ee-recovery-key');
    expect(key).toHaveTextContent(FAKE_RECOVERY_KEY);
    expect(document.body.innerHTML).not.toContain(FAKE_PASSPHRASE);
    expect(screen.getByTestId('sync-status')).toHaveAttribute('data-encrypted', 'yes');
    expect(screen.getByTestId('sync-encrypted')).toHaveTextContent('End-to-end encrypted');

    const done = screen.getByTestId('e2ee-recovery-done');
    expect(done).toBeDisabled();
    await user.type(screen.getByTestId('e2ee-recovery-check'), '2CKE');
    expect(screen.getByRole('alert')).toHaveTextContent('That is not the last group of the key above.');
    expect(done).toBeDisabled();
    await user.clear(screen.getByTestId('e2ee-recovery-check'));
    await user.type(screen.getByTestId('e2ee-recovery-check'), 'm8pa');
    expect(done).toBeEnabled();
    await user.click(done);

    // Shown once: the key is gone from the page, which now says what encryption does.
    expect(screen.queryByTestId('e2ee-recovery-key')).toBeNull();
    expect(document.body.innerHTML).not.toContain(FAKE_RECOVERY_KEY);
    expect(screen.getByTestId('e2ee-on')).toHaveTextContent('The sync server keeps only ciphertext');
    expect(screen.queryByTestId('e2ee-setup')).toBeNull();
  });

  it('an account encrypted on another machine is unlocked here, never set up again', async () => {
    const { be, user } = await renderApp(demoSeed({ e2ee: 'locked' }));
    await goTo(user, 'sync');
    expect(await screen.findByTestId('e2ee-unlock')).toBeVisible();
    expect(screen.queryByTestId('e2ee-setup')).toBeNull();
    expect(callsOf(be, 'syncEncrypt')).toHaveLength(0);
  });

  it('on a machine whose account is encrypted elsewhere asks for the passphrase; a wrong one is a clear error that changes nothing', async () => {
    const { be, user } = await renderApp(demoSeed({ e2ee: 'locked' }));
    await goTo(user, 'sync');
    const form = await screen.findByTestId('e2ee-unlock');
    expect(form).toHaveTextContent('Unlock this machine');
    expect(screen.getByTestId('sync-locked')).toHaveTextContent('Locked: encrypted on another machine');
    expect(screen.getByTestId('sync-status')).toHaveAttribute('data-encrypted', 'no');

    await user.type(screen.getByLabelText('Passphrase'), 'not the passphrase');
    await user.click(screen.getByTestId('e2ee-unlock-submit'));
    expect(await screen.findByTestId('e2ee-unlock-error')).toHaveTextContent(
      'That passphrase or recovery key does not open this account. Nothing was changed; try again.',
    );
    expect(screen.getByLabelText('Passphrase')).toHaveValue('');
    expect(screen.getByTestId('sync-status')).toHaveAttribute('data-encrypted', 'no');
    expect(screen.getByTestId('e2ee-unlock')).toBeVisible();
    expect((await be.syncE2ee()).unlocked).toBe(false);

    await user.type(screen.getByLabelText('Passphrase'), FAKE_PASSPHRASE);
    await user.click(screen.getByTestId('e2ee-unlock-submit'));
    await waitFor(() => expect(screen.getByTestId('sync-status')).toHaveAttribute('data-encrypted', 'yes'));
    expect(screen.getByTestId('sync-encrypted')).toHaveTextContent('End-to-end encrypted');
    expect(screen.queryByTestId('e2ee-unlock')).toBeNull();
    expect(screen.queryByTestId('sync-locked')).toBeNull();
    expect(callsOf(be, 'syncUnlock')).toEqual([['<passphrase>'], ['<passphrase>']]);
    expect(document.body.innerHTML).not.toContain(FAKE_PASSPHRASE);
  });

  it('unlocks with the recovery key instead, typed in lower case with spaces', async () => {
    const { be, user } = await renderApp(demoSeed({ e2ee: 'locked' }));
    await goTo(user, 'sync');
    await user.click(await screen.findByTestId('e2ee-switch-secret'));
    await user.type(screen.getByLabelText('Recovery key'), FAKE_RECOVERY_KEY.toLowerCase().replace(/-/g, ' '));
    await user.click(screen.getByTestId('e2ee-unlock-submit'));
    await waitFor(() => expect(screen.getByTestId('sync-status')).toHaveAttribute('data-encrypted', 'yes'));
    expect(callsOf(be, 'syncUnlock')).toEqual([['<recovery key>']]);
  });

  it('a machine another one locked out by rotating the key says the key was changed there, and unlocks with the passphrase without asking the server first', async () => {
    const { be, user } = await renderApp(demoSeed({ e2ee: 'lockedOut' }));
    await goTo(user, 'sync');
    const form = await screen.findByTestId('e2ee-unlock');
    expect(form).toHaveAttribute('data-reason', 'key-replaced');
    expect(screen.getByTestId('e2ee-unlock-why')).toHaveTextContent('The account key was changed on another machine, which locked the other machines out');
    expect(screen.getByTestId('e2ee-unlock-why')).toHaveTextContent('the passphrase or the new recovery key');
    expect(screen.getByTestId('sync-locked')).toHaveTextContent('Locked: the key was changed on another machine');
    expect(screen.getByTestId('sync-status')).toHaveAttribute('data-encrypted', 'no');
    expect(screen.queryByTestId('sync-encrypted')).toBeNull();
    expect(screen.queryByTestId('e2ee-on')).toBeNull();
    expect(screen.queryByTestId('e2ee-setup')).toBeNull();
    // Known from the status this machine keeps: the server is not asked.
    expect(callsOf(be, 'syncE2ee')).toHaveLength(0);

    await user.type(screen.getByLabelText('Passphrase'), FAKE_PASSPHRASE);
    await user.click(screen.getByTestId('e2ee-unlock-submit'));
    await waitFor(() => expect(screen.getByTestId('sync-status')).toHaveAttribute('data-encrypted', 'yes'));
    expect(screen.getByTestId('sync-encrypted')).toHaveTextContent('End-to-end encrypted');
    expect(screen.queryByTestId('e2ee-unlock')).toBeNull();
    expect(screen.queryByTestId('sync-locked')).toBeNull();
  });

  it('a locked-out machine shows an amber status, and Sync now says a scope could not sync instead of finished', async () => {
    const { user, app } = await renderApp(demoSeed({ e2ee: 'lockedOut' }));
    await goTo(user, 'sync');
    await screen.findByTestId('e2ee-unlock');
    const dot = screen.getByTestId('sync-status').querySelector('.dot');
    expect(dot).toHaveClass('warn');
    expect(dot).not.toHaveClass('on');
    await user.click(screen.getByTestId('sync-now'));
    await waitFor(() => expect(screen.getByTestId('toast')).toHaveTextContent('Sync finished, but not every scope could sync: the error is below.'));
    expect(screen.getByTestId('toast')).not.toHaveTextContent(/^Sync finished\.$/);
    const scope = screen.getAllByTestId('sync-scope')[0];
    expect(scope).toHaveTextContent("the account's key was replaced on another machine");
    // An error about something else, which the unlock does not mend.
    app.toast('The note could not be saved.', 'error');

    await user.type(screen.getByLabelText('Passphrase'), FAKE_PASSPHRASE);
    await user.click(screen.getByTestId('e2ee-unlock-submit'));
    await waitFor(() => expect(screen.getByTestId('sync-status')).toHaveAttribute('data-encrypted', 'yes'));
    expect(screen.getByTestId('sync-status').querySelector('.dot')).toHaveClass('on');
    expect(screen.getByTestId('sync-status').querySelector('.dot')).not.toHaveClass('warn');
    // The error the locked pass reported goes with the lock; the unlock says so instead, and
    // the other error stays.
    const toasts = screen.getAllByTestId('toast').map((x) => x.textContent);
    expect(toasts.some((x) => x?.includes('not every scope could sync'))).toBe(false);
    expect(toasts.some((x) => x?.includes('The note could not be saved.'))).toBe(true);
    expect(toasts.some((x) => x?.includes('Unlocked'))).toBe(true);
  });

  it('a locked-out machine unlocks with the new recovery key, not the one the rotation replaced', async () => {
    const { be, user } = await renderApp(demoSeed({ e2ee: 'lockedOut' }));
    await goTo(user, 'sync');
    await user.click(await screen.findByTestId('e2ee-switch-secret'));
    await user.type(screen.getByLabelText('Recovery key'), FAKE_RECOVERY_KEY);
    await user.click(screen.getByTestId('e2ee-unlock-submit'));
    expect(await screen.findByTestId('e2ee-unlock-error')).toHaveTextContent('does not open this account');
    expect(screen.getByTestId('e2ee-unlock')).toHaveAttribute('data-reason', 'key-replaced');
    await user.type(screen.getByLabelText('Recovery key'), FAKE_ROTATED_RECOVERY_KEY);
    await user.click(screen.getByTestId('e2ee-unlock-submit'));
    await waitFor(() => expect(screen.getByTestId('sync-status')).toHaveAttribute('data-encrypted', 'yes'));
    expect(callsOf(be, 'syncUnlock')).toEqual([['<recovery key>'], ['<recovery key>']]);
  });

  it('says a locked-out machine is locked, and why, in Chinese and Spanish', async () => {
    for (const [language, status, why] of [
      ['zh', '已锁定：密钥已在另一台电脑上更换', '账户密钥已在另一台电脑上更换'],
      ['es', 'Bloqueado: la clave se cambió en otro equipo', 'La clave de la cuenta se cambió en otro equipo'],
    ] as const) {
      const { user } = await renderApp(demoSeed({ e2ee: 'lockedOut', settings: { language } }));
      await goTo(user, 'sync');
      expect(await screen.findByTestId('e2ee-unlock-why')).toHaveTextContent(why);
      expect(screen.getByTestId('sync-locked')).toHaveTextContent(status);
      document.body.innerHTML = '';
    }
  });

  it('changes the passphrase: the current one, the new one twice with its strength; a wrong current one is a clear error that changes nothing', async () => {
    const NEW = 'velvet compass harbor 1977';
    const { be, user } = await renderApp(demoSeed({ e2ee: 'on' }));
    await goTo(user, 'sync');
    await user.click(await screen.findByTestId('e2ee-change'));
    const form = screen.getByTestId('e2ee-change-form');
    expect(form).toHaveTextContent('the recovery key still works');
    const submit = screen.getByTestId('e2ee-change-submit');
    expect(submit).toBeDisabled();

    await user.type(screen.getByLabelText('Current passphrase'), 'not the passphrase');
    await user.type(screen.getByLabelText('New passphrase'), 'short');
    expect(screen.getByTestId('e2ee-new-strength')).toHaveAttribute('data-strength', 'tooShort');
    expect(submit).toBeDisabled();
    await user.clear(screen.getByLabelText('New passphrase'));
    await user.type(screen.getByLabelText('New passphrase'), NEW);
    expect(screen.getByTestId('e2ee-new-strength')).toHaveTextContent('Strength: strong');
    await user.type(screen.getByLabelText('New passphrase again'), 'velvet compass harbor 1978');
    expect(screen.getByTestId('e2ee-new-mismatch')).toHaveTextContent('The two passphrases differ.');
    expect(submit).toBeDisabled();
    await user.clear(screen.getByLabelText('New passphrase again'));
    await user.type(screen.getByLabelText('New passphrase again'), NEW);
    expect(submit).toBeEnabled();
    await user.click(submit);

    // Wrong: said plainly, every secret gone from the form, the old passphrase still the one.
    expect(await screen.findByTestId('e2ee-change-error')).toHaveTextContent(
      'That passphrase or recovery key does not open this account. The passphrase was not changed; try again.',
    );
    expect(callsOf(be, 'syncChangePassphrase')).toEqual([['<passphrase>', '<new passphrase>']]);
    for (const label of ['Current passphrase', 'New passphrase', 'New passphrase again']) expect(screen.getByLabelText(label)).toHaveValue('');
    expect(document.body.innerHTML).not.toContain(NEW);
    await expect(be.syncChangePassphrase({ passphrase: NEW }, 'anything long enough')).rejects.toMatchObject({ code: 'wrong_passphrase' });

    await user.type(screen.getByLabelText('Current passphrase'), FAKE_PASSPHRASE);
    await user.type(screen.getByLabelText('New passphrase'), NEW);
    await user.type(screen.getByLabelText('New passphrase again'), NEW);
    await user.click(submit);
    expect(await screen.findByText('The passphrase is changed. Unlock new machines with the new one; the recovery key still works.')).toBeVisible();
    expect(screen.queryByTestId('e2ee-change-form')).toBeNull();
    expect(screen.getByTestId('sync-encrypted')).toHaveTextContent('End-to-end encrypted');
    expect(document.body.innerHTML).not.toContain(NEW);
    expect(document.body.innerHTML).not.toContain(FAKE_PASSPHRASE);
    // The new passphrase is the account's now, the old one no longer.
    await expect(be.syncChangePassphrase({ passphrase: FAKE_PASSPHRASE }, 'anything long enough')).rejects.toMatchObject({ code: 'wrong_passphrase' });
    await be.syncChangePassphrase({ passphrase: NEW }, FAKE_PASSPHRASE);
  });

  it('changes a forgotten passphrase with the recovery key', async () => {
    const NEW = 'velvet compass harbor 1977';
    const { be, user } = await renderApp(demoSeed({ e2ee: 'on' }));
    await goTo(user, 'sync');
    await user.click(await screen.findByTestId('e2ee-change'));
    await user.click(screen.getByTestId('e2ee-change-switch-secret'));
    await user.type(screen.getByLabelText('Recovery key'), FAKE_RECOVERY_KEY.toLowerCase());
    await user.type(screen.getByLabelText('New passphrase'), NEW);
    await user.type(screen.getByLabelText('New passphrase again'), NEW);
    await user.click(screen.getByTestId('e2ee-change-submit'));
    await waitFor(() => expect(screen.queryByTestId('e2ee-change-form')).toBeNull());
    expect(callsOf(be, 'syncChangePassphrase')).toEqual([['<recovery key>', '<new passphrase>']]);
    expect(document.body.innerHTML).not.toContain(FAKE_RECOVERY_KEY);
    await be.syncChangePassphrase({ passphrase: NEW }, FAKE_PASSPHRASE);
  });

  it('with both the passphrase and the recovery key lost, sets new ones proven by the key this machine holds, the new recovery key shown once', async () => {
    const NEW = 'velvet compass harbor 1977';
    const { be, user } = await renderApp(demoSeed({ e2ee: 'on' }));
    await goTo(user, 'sync');
    await user.click(await screen.findByTestId('e2ee-change'));
    await user.click(screen.getByTestId('e2ee-change-lost-both'));
    expect(screen.getByTestId('e2ee-lost-both-what')).toHaveTextContent('This machine holds your account key, which proves the account');
    expect(screen.getByTestId('e2ee-lost-both-what')).toHaveTextContent('will no longer unlock anything');
    expect(screen.getByTestId('e2ee-change-form')).not.toHaveTextContent('the recovery key still works');
    expect(screen.queryByTestId('e2ee-current')).toBeNull();
    const submit = screen.getByTestId('e2ee-change-submit');
    expect(submit).toHaveTextContent('Set the new passphrase and recovery key');
    expect(submit).toBeDisabled();
    await user.type(screen.getByLabelText('New passphrase'), NEW);
    await user.type(screen.getByLabelText('New passphrase again'), NEW);
    expect(submit).toBeEnabled();
    await user.click(submit);

    const key = await screen.findByTestId('e2ee-recovery-key');
    expect(key).toHaveTextContent(FAKE_RESET_RECOVERY_KEY);
    expect(callsOf(be, 'syncResetPassphrase')).toEqual([['<new passphrase>']]);
    expect(callsOf(be, 'syncChangePassphrase')).toHaveLength(0);
    expect(document.body.innerHTML).not.toContain(NEW);
    await user.type(screen.getByTestId('e2ee-recovery-check'), lastGroup(FAKE_RESET_RECOVERY_KEY));
    await user.click(screen.getByTestId('e2ee-recovery-done'));
    expect(await screen.findByTestId('e2ee-on')).toBeVisible();
    expect(document.body.innerHTML).not.toContain(FAKE_RESET_RECOVERY_KEY);
    // The new passphrase and recovery key open the account; the old ones do not.
    await expect(be.syncChangePassphrase({ passphrase: FAKE_PASSPHRASE }, 'whatever long enough')).rejects.toMatchObject({ code: 'wrong_passphrase' });
    await expect(be.syncChangePassphrase({ recoveryKey: FAKE_RECOVERY_KEY }, 'whatever long enough')).rejects.toMatchObject({ code: 'wrong_passphrase' });
    await be.syncChangePassphrase({ recoveryKey: FAKE_RESET_RECOVERY_KEY }, NEW);
  });

  it('offers the way back with both lost in Chinese and Spanish', async () => {
    for (const [language, button, what] of [
      ['zh', '两者都丢了？使用这台电脑持有的密钥', '这台电脑持有你的账户密钥'],
      ['es', '¿Perdiste ambas? Usa la clave que tiene este equipo', 'Este equipo tiene la clave de tu cuenta'],
    ] as const) {
      const { user } = await renderApp(demoSeed({ e2ee: 'on', settings: { language } }));
      await goTo(user, 'sync');
      await user.click(await screen.findByTestId('e2ee-change'));
      const lostBoth = screen.getByTestId('e2ee-change-lost-both');
      expect(lostBoth).toHaveTextContent(button);
      await user.click(lostBoth);
      expect(screen.getByTestId('e2ee-lost-both-what')).toHaveTextContent(what);
      document.body.innerHTML = '';
    }
  });

  it('offers to change the passphrase in Chinese and Spanish, and cancelling changes nothing', async () => {
    for (const [language, button, label] of [
      ['zh', '更改密码短语…', '当前密码短语'],
      ['es', 'Cambiar la frase de contraseña…', 'Frase de contraseña actual'],
    ] as const) {
      const { be, user } = await renderApp(demoSeed({ e2ee: 'on', settings: { language } }));
      await goTo(user, 'sync');
      const change = await screen.findByTestId('e2ee-change');
      expect(change).toHaveTextContent(button);
      await user.click(change);
      await user.type(screen.getByLabelText(label), 'something typed');
      await user.click(screen.getByRole('button', { name: language === 'zh' ? '取消' : 'Cancelar' }));
      expect(screen.queryByTestId('e2ee-change-form')).toBeNull();
      expect(callsOf(be, 'syncChangePassphrase')).toHaveLength(0);
      expect(document.body.innerHTML).not.toContain('something typed');
      document.body.innerHTML = '';
    }
  });

  it('says end-to-end encrypted in Chinese and Spanish too', async () => {
    for (const [language, text] of [
      ['zh', '端到端加密'],
      ['es', 'Cifrado de extremo a extremo'],
    ] as const) {
      const { user } = await renderApp(demoSeed({ e2ee: 'on', settings: { language } }));
      await goTo(user, 'sync');
      expect(await screen.findByTestId('sync-encrypted')).toHaveTextContent(text);
      document.body.innerHTML = '';
    }
  });

  it('offers nothing about encryption while signed out', async () => {
    const { be, user } = await renderApp(demoSeed({ signedIn: false }));
    await goTo(user, 'sync');
    await screen.findByTestId('sync-signin');
    expect(screen.queryByTestId('e2ee-setup')).toBeNull();
    expect(callsOf(be, 'syncE2ee')).toHaveLength(0);
  });
});

describe('Sync page: rotating the account key', () => {
  it('asks the passphrase; a wrong one is an error on the form that changes nothing; the right one shows the new recovery key once with the set-up check', async () => {
    const { be, user } = await renderApp(demoSeed({ e2ee: 'on' }));
    await goTo(user, 'sync');
    await user.click(await screen.findByTestId('e2ee-rotate'));
    const form = screen.getByTestId('e2ee-rotate-form');
    expect(form).toHaveTextContent('every note is encrypted again under it');
    expect(screen.getByTestId('e2ee-lock-out')).toHaveAccessibleDescription(/After a lost or stolen machine/);
    expect(screen.getByTestId('e2ee-lock-out')).not.toBeChecked();
    const submit = screen.getByTestId('e2ee-rotate-submit');
    expect(submit).toBeDisabled();

    await user.type(screen.getByLabelText('Passphrase'), 'not the passphrase');
    await user.click(submit);
    expect(await screen.findByTestId('e2ee-rotate-error')).toHaveTextContent('That passphrase does not open this account. Nothing was changed; try again.');
    expect(screen.getByLabelText('Passphrase')).toHaveValue('');
    expect(screen.queryByTestId('e2ee-recovery-key')).toBeNull();
    // Nothing changed: the recovery key from before still opens the account.
    await be.syncChangePassphrase({ recoveryKey: FAKE_RECOVERY_KEY }, FAKE_PASSPHRASE);

    await user.type(screen.getByLabelText('Passphrase'), FAKE_PASSPHRASE);
    await user.click(submit);
    const key = await screen.findByTestId('e2ee-recovery-key');
    expect(key).toHaveTextContent(FAKE_ROTATED_RECOVERY_KEY);
    expect(screen.getByTestId('e2ee-recovery')).toHaveTextContent('the one before no longer unlocks');
    expect(screen.queryByTestId('e2ee-rotated-locked-out')).toBeNull();
    expect(callsOf(be, 'syncRotateKey')).toEqual([
      ['<passphrase>', false],
      ['<passphrase>', false],
    ]);
    expect(document.body.innerHTML).not.toContain(FAKE_PASSPHRASE);

    // The set-up's check: the old key's last group is not this key's.
    const done = screen.getByTestId('e2ee-recovery-done');
    await user.type(screen.getByTestId('e2ee-recovery-check'), 'M8PA');
    expect(screen.getByRole('alert')).toHaveTextContent('That is not the last group of the key above.');
    expect(done).toBeDisabled();
    await user.clear(screen.getByTestId('e2ee-recovery-check'));
    await user.type(screen.getByTestId('e2ee-recovery-check'), '9vtj');
    await user.click(done);
    expect(await screen.findByText('The account key is replaced. Your other machines follow at their next sync.')).toBeVisible();
    expect(document.body.innerHTML).not.toContain(FAKE_ROTATED_RECOVERY_KEY);
    expect(screen.getByTestId('sync-encrypted')).toHaveTextContent(/^ *End-to-end encrypted$/);
    expect(screen.getByTestId('sync-encrypted')).toHaveAttribute('data-rotating', 'no');
    // The new recovery key opens the account, the old one no longer.
    await expect(be.syncChangePassphrase({ recoveryKey: FAKE_RECOVERY_KEY }, FAKE_PASSPHRASE)).rejects.toMatchObject({ code: 'wrong_passphrase' });
    await be.syncChangePassphrase({ recoveryKey: FAKE_ROTATED_RECOVERY_KEY }, FAKE_PASSPHRASE);
  });

  it('locks out the other machines when asked, shows its progress while it runs, and says the rotation is under way while not complete', async () => {
    const { be, user } = await renderApp(demoSeed({ e2ee: 'on', e2eeOtherMachines: true }));
    await goTo(user, 'sync');
    await user.click(await screen.findByTestId('e2ee-rotate'));
    await user.type(screen.getByLabelText('Passphrase'), FAKE_PASSPHRASE);
    await user.click(screen.getByTestId('e2ee-lock-out'));
    // Held until released, to see the page while the rotation runs.
    let release = () => {};
    const gate = new Promise<void>((r) => (release = r));
    const rotate = be.syncRotateKey.bind(be);
    be.syncRotateKey = async (p, l) => {
      await gate;
      return rotate(p, l);
    };
    await user.click(screen.getByTestId('e2ee-rotate-submit'));
    expect(await screen.findByTestId('e2ee-progress')).toHaveTextContent('Encrypting every note again under the new key');
    expect(screen.getByTestId('e2ee-rotate-submit')).toBeDisabled();
    release();

    await screen.findByTestId('e2ee-recovery-key');
    expect(callsOf(be, 'syncRotateKey')).toEqual([['<passphrase>', true]]);
    expect(screen.getByTestId('e2ee-rotated-locked-out')).toHaveTextContent('Machines holding only the old key are locked out');
    expect(screen.getByTestId('e2ee-rotated-under-way')).toHaveTextContent('Key rotation under way');
    expect(screen.getByTestId('sync-encrypted')).toHaveTextContent('End-to-end encrypted · key rotation under way');
    await user.type(screen.getByTestId('e2ee-recovery-check'), '9VTJ');
    await user.click(screen.getByTestId('e2ee-recovery-done'));
    expect(await screen.findByTestId('e2ee-rotation-under-way')).toHaveTextContent('move to the new key when one of them syncs');
    // Turning encryption off waits for the rotation.
    expect(screen.getByTestId('e2ee-turn-off')).toBeDisabled();
    expect(screen.getByTestId('e2ee-turn-off')).toHaveAccessibleDescription(/once the key rotation under way has finished/);
  });

  it('cancelling changes nothing and clears the passphrase', async () => {
    const { be, user } = await renderApp(demoSeed({ e2ee: 'on' }));
    await goTo(user, 'sync');
    await user.click(await screen.findByTestId('e2ee-rotate'));
    await user.type(screen.getByLabelText('Passphrase'), FAKE_PASSPHRASE);
    await user.click(screen.getByTestId('e2ee-lock-out'));
    await user.click(screen.getByRole('button', { name: 'Cancel' }));
    expect(screen.queryByTestId('e2ee-rotate-form')).toBeNull();
    expect(callsOf(be, 'syncRotateKey')).toHaveLength(0);
    expect(document.body.innerHTML).not.toContain(FAKE_PASSPHRASE);
    await user.click(screen.getByTestId('e2ee-rotate'));
    expect(screen.getByLabelText('Passphrase')).toHaveValue('');
    expect(screen.getByTestId('e2ee-lock-out')).not.toBeChecked();
  });

  it('is offered in Chinese and Spanish, the lock-out explained', async () => {
    for (const [language, button, lockOut, hint] of [
      ['zh', '轮换账户密钥…', '把我的其他电脑锁在外面', '适用于电脑丢失或被盗之后'],
      ['es', 'Rotar la clave de la cuenta…', 'Dejar fuera a mis otros equipos', 'Tras perder un equipo'],
    ] as const) {
      const { user } = await renderApp(demoSeed({ e2ee: 'on', settings: { language } }));
      await goTo(user, 'sync');
      const rotate = await screen.findByTestId('e2ee-rotate');
      expect(rotate).toHaveTextContent(button);
      await user.click(rotate);
      expect(screen.getByLabelText(lockOut)).toHaveAccessibleDescription(new RegExp(hint));
      document.body.innerHTML = '';
    }
  });
});

describe('Sync page: turning end-to-end encryption off', () => {
  it('asks for a confirmation that says what it does; cancel changes nothing; confirmed, the status says encryption is off', async () => {
    const { be, user } = await renderApp(demoSeed({ e2ee: 'on' }));
    await goTo(user, 'sync');
    await user.click(await screen.findByTestId('e2ee-turn-off'));
    const what = screen.getByTestId('e2ee-off-what');
    expect(what).toHaveTextContent('uploaded again in plaintext, so the sync server can read them');
    expect(what).toHaveTextContent('the encrypted copies are then removed');
    expect(what).toHaveTextContent('your other machines go back to plaintext');
    expect(callsOf(be, 'syncDecrypt')).toHaveLength(0);
    await user.click(screen.getByRole('button', { name: 'Cancel' }));
    expect(screen.queryByTestId('e2ee-off-form')).toBeNull();
    expect(callsOf(be, 'syncDecrypt')).toHaveLength(0);
    expect(screen.getByTestId('sync-status')).toHaveAttribute('data-encrypted', 'yes');

    await user.click(screen.getByTestId('e2ee-turn-off'));
    await user.click(screen.getByTestId('e2ee-turn-off-confirm'));
    expect(await screen.findByText('End-to-end encryption is off: the sync server keeps your notes in plaintext again.')).toBeVisible();
    expect(callsOf(be, 'syncDecrypt')).toEqual([[]]);
    expect(screen.getByTestId('sync-status')).toHaveAttribute('data-encrypted', 'no');
    expect(screen.queryByTestId('sync-encrypted')).toBeNull();
    // Off: the card offers setting encryption up again.
    expect(screen.getByTestId('e2ee-setup')).toBeVisible();
  });

  it('says turning off is under way while other machines still hold encrypted notes, in the status and on the card', async () => {
    const { be, user } = await renderApp(demoSeed({ e2ee: 'on', e2eeOtherMachines: true }));
    await goTo(user, 'sync');
    await user.click(await screen.findByTestId('e2ee-turn-off'));
    // Held until released, to see the page while it runs.
    let release = () => {};
    const gate = new Promise<void>((r) => (release = r));
    const decrypt = be.syncDecrypt.bind(be);
    be.syncDecrypt = async () => {
      await gate;
      return decrypt();
    };
    await user.click(screen.getByTestId('e2ee-turn-off-confirm'));
    expect(await screen.findByTestId('e2ee-progress')).toHaveTextContent('Uploading every note again in plaintext');
    expect(screen.getByTestId('e2ee-turn-off-confirm')).toBeDisabled();
    release();
    expect(await screen.findByTestId('sync-e2ee-turning-off')).toHaveTextContent('End-to-end encryption being turned off');
    expect(screen.queryByTestId('sync-encrypted')).toBeNull();
    expect(screen.getByTestId('e2ee-turning-off')).toHaveTextContent('go back to plaintext when one of them syncs');
    // No passphrase or key change while it goes back to plaintext.
    expect(screen.queryByTestId('e2ee-rotate')).toBeNull();
    expect(screen.queryByTestId('e2ee-change')).toBeNull();
    expect(callsOf(be, 'syncDecrypt')).toHaveLength(1);
  });

  it('a refusal (a rotation under way elsewhere) is an error on the confirmation, encryption staying on', async () => {
    const { be, user } = await renderApp(demoSeed({ e2ee: 'on' }));
    await goTo(user, 'sync');
    await user.click(await screen.findByTestId('e2ee-turn-off'));
    be.syncDecrypt = () => Promise.reject(Object.assign(new Error("a rotation of this account's key is under way"), { code: 'keys_exist' }));
    await user.click(screen.getByTestId('e2ee-turn-off-confirm'));
    expect(await screen.findByTestId('e2ee-off-error')).toHaveTextContent("a rotation of this account's key is under way");
    expect(screen.getByTestId('sync-status')).toHaveAttribute('data-encrypted', 'yes');
  });

  it('confirms in Chinese and Spanish, and says when another machine turned it off', async () => {
    for (const [language, confirm, ended] of [
      ['zh', '关闭加密并以明文上传', '端到端加密已在另一台电脑上关闭'],
      ['es', 'Desactivar el cifrado y subir en texto plano', 'El cifrado de extremo a extremo se desactivó desde otro equipo'],
    ] as const) {
      const { user } = await renderApp(demoSeed({ e2ee: 'on', settings: { language } }));
      await goTo(user, 'sync');
      await user.click(await screen.findByTestId('e2ee-turn-off'));
      expect(screen.getByTestId('e2ee-turn-off-confirm')).toHaveTextContent(confirm);
      document.body.innerHTML = '';
      await renderApp(demoSeed({ e2ee: 'off', e2eeEnded: true, settings: { language } }));
      await goTo(user, 'sync');
      expect(await screen.findByTestId('sync-e2ee-ended')).toHaveTextContent(ended);
      document.body.innerHTML = '';
    }
  });
});
