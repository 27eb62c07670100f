// Backend events for as long as a component lives: each function returns the teardown to give
// back from `onMount`. The subscription is asynchronous, so a component gone before it answers
// unsubscribes as soon as it does.

import type { Backend, BackendEvent } from './types';

export function listen(backend: Backend, handler: (e: BackendEvent) => void): () => void {
  let off: (() => void) | undefined;
  let gone = false;
  void backend.onEvent(handler).then((f) => (gone ? f() : (off = f)));
  return () => {
    gone = true;
    off?.();
  };
}

/** Calls `refresh` once a burst of note events is over (`delayMs` after the last one): an
 * import or a sync that touches many notes reads a list again once, not once a note. */
export function onNoteChanges(backend: Backend, refresh: () => void, delayMs = 500): () => void {
  let later: ReturnType<typeof setTimeout> | undefined;
  const stop = listen(backend, (e) => {
    if (e.kind !== 'noteAdded' && e.kind !== 'noteChanged' && e.kind !== 'noteRemoved') return;
    clearTimeout(later);
    later = setTimeout(refresh, delayMs);
  });
  return () => {
    stop();
    clearTimeout(later);
  };
}
