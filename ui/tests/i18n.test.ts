import { screen, waitFor } from '@testing-library/svelte';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { en } from '../src/lib/i18n/en';
import { es } from '../src/lib/i18n/es';
import { languageFor, systemLanguage } from '../src/lib/i18n/index.svelte';
import { zh } from '../src/lib/i18n/zh';
import { callsOf, choose, demoSeed, goTo, renderApp } from './helpers';

describe('i18n', () => {
  afterEach(() => vi.unstubAllGlobals());

  it('switches the whole UI to 中文 from Settings, with the product’s Chinese labels', async () => {
    const { be, user } = await renderApp();
    expect(screen.getByTestId('nav-notes')).toHaveTextContent('Notes');
    await goTo(user, 'settings');
    await choose(await screen.findByTestId('settings-language'), 'zh');
    await waitFor(() => expect(screen.getByTestId('nav-notes')).toHaveTextContent('笔记'));
    expect(callsOf(be, 'setSettings')).toContainEqual([{ language: 'zh' }]);
    expect(document.documentElement.lang).toBe('zh-CN');
    await goTo(user, 'sync');
    expect(await screen.findByTestId('sync-now')).toHaveTextContent('立即同步');
    expect(screen.getByTestId('sync-toggle')).toHaveAccessibleName('关闭云同步');
    expect(screen.getByTestId('nav-conflicts')).toHaveTextContent('冲突');
  });

  it('starts in the language the settings name', async () => {
    await renderApp(demoSeed({ settings: { language: 'es' } }));
    await waitFor(() => expect(screen.getByTestId('nav-notes')).toHaveTextContent('Notas'));
  });

  it('follows the system language the shell reports, over navigator.language', async () => {
    vi.stubGlobal('navigator', { ...navigator, language: 'en-US' });
    await renderApp(demoSeed({ settings: { language: null, systemLanguage: 'zh-CN' } }));
    await waitFor(() => expect(screen.getByTestId('nav-notes')).toHaveTextContent('笔记'));
  });

  it('follows navigator.language', () => {
    vi.stubGlobal('navigator', { language: 'zh-CN' });
    expect(systemLanguage()).toBe('zh');
    expect(languageFor('es-MX')).toBe('es');
    expect(languageFor('de-DE')).toBe('en');
    expect(languageFor(undefined)).toBe('en');
  });

  it('has every English key in 中文 and Español, none left empty', () => {
    for (const d of [zh, es]) {
      expect(Object.keys(d).sort()).toEqual(Object.keys(en).sort());
      expect(Object.values(d).every((v) => v.trim() !== '')).toBe(true);
    }
    expect(zh['sync.now']).toBe('立即同步');
    expect(zh['sync.off']).toBe('关闭云同步');
  });
});
