// The state the shell shares with the pages: the current page, the conflict badge and the review
// count, toasts and
// the keyboard commands a page registers.

import { getContext, setContext } from 'svelte';

export type Page = 'notes' | 'conversations' | 'review' | 'conflicts' | 'sync' | 'backups' | 'overview' | 'import' | 'settings';

export interface Toast {
  id: number;
  text: string;
  kind: 'info' | 'error';
  /** What it is about (`sync`), so it can go once that is mended. */
  about?: string;
}

export class AppState {
  page = $state<Page>('notes');
  conflictCount = $state(0);
  /** Findings in the review queue. */
  findingCount = $state(0);
  /** Facts ready to become notes (the Review page's "Ready to become notes"). */
  promotionCount = $state(0);
  /** The Review page's count in the navigation: what waits there for a decision. */
  get reviewCount(): number {
    return this.findingCount + this.promotionCount;
  }
  toasts = $state<Toast[]>([]);
  /** Set by Ctrl/Cmd+K; the notes page focuses its search box and clears it. */
  wantSearch = $state(false);
  /** Set by Ctrl/Cmd+N; the notes page opens a new note and clears it. */
  wantNewNote = $state(false);
  /** Set by a page that links to a note (the Review page's consolidation); the notes page
   * opens it and clears it. */
  openNote = $state<{ scope: string; id: string } | null>(null);
  /** The open editor's save, for Ctrl/Cmd+S. */
  save: (() => void) | null = null;
  /** Closers for whatever Esc should close, innermost last. */
  private closers: (() => void)[] = [];
  private seq = 0;

  /** Shows a note on the Notes page. */
  showNote(scope: string, id: string): void {
    this.openNote = { scope, id };
    this.page = 'notes';
  }

  toast(text: string, kind: Toast['kind'] = 'info', about?: string): void {
    const id = ++this.seq;
    this.toasts = [...this.toasts, { id, text, kind, about }];
    setTimeout(() => this.dismiss(id), kind === 'error' ? 8000 : 4000);
  }

  dismiss(id: number): void {
    this.toasts = this.toasts.filter((x) => x.id !== id);
  }

  /** Dismisses the error toasts about `about`, once what they reported is mended. */
  dismissErrors(about: string): void {
    this.toasts = this.toasts.filter((x) => x.kind !== 'error' || x.about !== about);
  }

  /** Registers something Esc closes; returns the unregister function. */
  onEscape(close: () => void): () => void {
    this.closers.push(close);
    return () => {
      this.closers = this.closers.filter((c) => c !== close);
    };
  }

  /** Closes the innermost open thing; false when nothing was open. */
  escape(): boolean {
    const close = this.closers.pop();
    if (!close) return false;
    close();
    return true;
  }
}

const KEY = Symbol('memoria.app');

export function provideApp(app: AppState): void {
  setContext(KEY, app);
}

export function useApp(): AppState {
  const a = getContext<AppState | undefined>(KEY);
  if (!a) throw new Error('no app state in context');
  return a;
}

/** The message of anything a backend call threw. */
export function messageOf(e: unknown): string {
  if (e && typeof e === 'object' && 'message' in e) return String((e as { message: unknown }).message);
  return String(e);
}
