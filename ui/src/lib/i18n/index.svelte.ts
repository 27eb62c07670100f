// The UI language: follows the system's (as the shell reports it, else `navigator.language`)
// until the person picks one, switchable at run time. `t()` reads the current language, so a template that calls it re-renders on a switch.

import type { Language } from '../backend/types';
import { en, type MessageKey } from './en';
import { es } from './es';
import { zh } from './zh';

const dicts = { en, zh, es } as const;

export const LANGUAGES: { code: Language; name: string }[] = [
  { code: 'en', name: 'English' },
  { code: 'zh', name: '中文' },
  { code: 'es', name: 'Español' },
];

/** The supported language closest to a BCP 47 tag (`zh-CN` → `zh`, `es-MX` → `es`). */
export function languageFor(tag: string | null | undefined): Language {
  const base = (tag ?? '').toLowerCase().split(/[-_]/)[0];
  return base === 'zh' || base === 'es' ? base : 'en';
}

/** The system's language tag as the shell read it, when it did. */
let reported: string | null = null;

export function systemLanguage(): Language {
  if (reported) return languageFor(reported);
  return languageFor(typeof navigator === 'undefined' ? 'en' : navigator.language);
}

const state = $state<{ lang: Language }>({ lang: systemLanguage() });

export const locale = {
  get lang(): Language {
    return state.lang;
  },
  /** Records the system's language tag as the shell read it (used while `set(null)`). */
  setSystem(tag: string | null | undefined) {
    reported = tag ?? null;
  },
  /** `null` follows the system. */
  set(lang: Language | null) {
    state.lang = lang ?? systemLanguage();
    if (typeof document !== 'undefined') document.documentElement.lang = state.lang === 'zh' ? 'zh-CN' : state.lang;
  },
};

export function t(key: MessageKey, params: Record<string, string | number> = {}): string {
  const text: string = dicts[state.lang][key] ?? en[key] ?? key;
  return text.replace(/\{(\w+)\}/g, (m, name: string) => (name in params ? String(params[name]) : m));
}

/** A count with its noun: the `one` text for 1, else `many` with `{n}` filled in. */
export function counted(n: number, one: MessageKey, many: MessageKey): string {
  return t(n === 1 ? one : many, { n });
}

/** "5 min ago", "3 days ago", or a date for older times. */
export function ago(ms: number | null | undefined, now = Date.now()): string {
  if (ms === null || ms === undefined) return t('common.never');
  const s = Math.max(0, (now - ms) / 1000);
  if (s < 60) return t('time.justNow');
  if (s < 3600) return t('time.minutes', { n: Math.floor(s / 60) });
  if (s < 86400) return t('time.hours', { n: Math.floor(s / 3600) });
  if (s < 2 * 86400) return t('time.day');
  if (s < 30 * 86400) return t('time.days', { n: Math.floor(s / 86400) });
  return dateTime(ms);
}

export function dateTime(ms: number): string {
  const tag = state.lang === 'zh' ? 'zh-CN' : state.lang;
  // A one-off value formatted at once, never kept or mutated.
  // eslint-disable-next-line svelte/prefer-svelte-reactivity
  return new Date(ms).toLocaleString(tag, { dateStyle: 'medium', timeStyle: 'short' });
}

/** A day as people read it in the UI language, without the time. */
export function day(ms: number): string {
  const tag = state.lang === 'zh' ? 'zh-CN' : state.lang;
  // A one-off value formatted at once, never kept or mutated.
  // eslint-disable-next-line svelte/prefer-svelte-reactivity
  return new Date(ms).toLocaleDateString(tag, { dateStyle: 'medium' });
}

/** A size in bytes as people read it in the UI language: "820 B", "48 kB", "1.2 MB". */
export function size(bytes: number): string {
  const tag = state.lang === 'zh' ? 'zh-CN' : state.lang;
  const [value, unit] = bytes < 1000 ? [bytes, 'byte'] : bytes < 1e6 ? [bytes / 1e3, 'kilobyte'] : bytes < 1e9 ? [bytes / 1e6, 'megabyte'] : [bytes / 1e9, 'gigabyte'];
  return new Intl.NumberFormat(tag, { style: 'unit', unit, unitDisplay: 'short', maximumFractionDigits: value < 10 ? 1 : 0 }).format(value);
}

/** A scope's name as shown: the user scope in the UI language, others by their own label. */
export function scopeName(key: string, label: string): string {
  return key === 'user' ? t('scope.user') : label;
}

export type { MessageKey };
