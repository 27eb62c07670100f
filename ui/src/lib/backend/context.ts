// Hands the backend to every component below the app without each one knowing which backend
// it is (Tauri in the app, the fake in tests and the browser dev mode).

import { getContext, setContext } from 'svelte';
import type { Backend } from './types';

export const BACKEND_KEY = Symbol('memoria.backend');

export function provideBackend(backend: Backend): void {
  setContext(BACKEND_KEY, backend);
}

export function useBackend(): Backend {
  const b = getContext<Backend | undefined>(BACKEND_KEY);
  if (!b) throw new Error('no backend: render the component inside App or pass the backend context');
  return b;
}
