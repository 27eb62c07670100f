// Light and dark themes are CSS variables (see app.css); `system` follows
// `prefers-color-scheme`, the other two pin one.

import type { ThemeChoice } from '../backend/types';

export function applyTheme(choice: ThemeChoice): void {
  const root = document.documentElement;
  if (choice === 'system') delete root.dataset.theme;
  else root.dataset.theme = choice;
}
