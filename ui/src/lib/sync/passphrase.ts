// How strong a passphrase looks, from its length and the kinds of characters in it: a hint
// while typing, not a guarantee. The engine refuses fewer than `MIN_PASSPHRASE_CHARS`.

/** The shortest passphrase the engine takes (`MIN_PASSPHRASE_CHARS` in engine/src/api/sync.rs). */
export const MIN_PASSPHRASE_CHARS = 8;

export type Strength = 'tooShort' | 'weak' | 'fair' | 'strong';

/** 0 (too short) to 3 (strong): length counts most; lower case, upper case, digits, symbols
 * and spaces between words each add variety. */
export function passphraseStrength(p: string): Strength {
  const chars = [...p];
  if (chars.length < MIN_PASSPHRASE_CHARS) return 'tooShort';
  const kinds = [/\p{Ll}/u, /\p{Lu}/u, /\p{N}/u, /[^\p{L}\p{N}\s]/u, /\s/u].filter((r) => r.test(p)).length;
  const distinct = new Set(chars).size;
  if (distinct < 5) return 'weak';
  const score = (chars.length >= 12 ? 1 : 0) + (chars.length >= 20 ? 1 : 0) + (kinds >= 2 ? 1 : 0) + (kinds >= 3 ? 1 : 0);
  return score >= 3 ? 'strong' : score >= 1 ? 'fair' : 'weak';
}

/** The last group of a recovery key (`…-M8PA` → `M8PA`): typed back to show it was saved. */
export function lastGroup(recoveryKey: string): string {
  const groups = recoveryKey.trim().split('-');
  return groups[groups.length - 1] ?? '';
}

/** Whether `typed` is the key's last group, ignoring case and surrounding spaces. */
export function matchesLastGroup(recoveryKey: string, typed: string): boolean {
  const want = lastGroup(recoveryKey);
  return want.length > 0 && typed.trim().toUpperCase() === want.toUpperCase();
}

/** Whether a new passphrase typed twice can be sent: long enough, and the same both times. */
export function newPassphraseReady(first: string, again: string): boolean {
  return passphraseStrength(first) !== 'tooShort' && first === again;
}
