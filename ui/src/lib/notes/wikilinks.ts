// `[[id]]` links in the Markdown editor: completion of note ids after `[[`, a mark on every
// link, and Ctrl/Cmd+click (or Ctrl/Cmd+Enter on a link) to open it.

import { autocompletion, type CompletionContext, type CompletionResult } from '@codemirror/autocomplete';
import type { Extension } from '@codemirror/state';
import { Decoration, EditorView, MatchDecorator, ViewPlugin, type DecorationSet, type ViewUpdate, keymap } from '@codemirror/view';

export interface LinkTarget {
  id: string;
  summary: string;
}

const LINK = /\[\[([^\]\n|#]+)(?:[|#][^\]\n]*)?\]\]/g;

/** The ids linked from `text`, in order of first appearance. */
export function linksIn(text: string): string[] {
  const out: string[] = [];
  for (const m of text.matchAll(LINK)) {
    const id = m[1].trim();
    if (id && !out.includes(id)) out.push(id);
  }
  return out;
}

/** Completions for the text after an unclosed `[[`. */
export function completeLink(targets: () => LinkTarget[]) {
  return (ctx: CompletionContext): CompletionResult | null => {
    const before = ctx.matchBefore(/\[\[[^\]\n]*$/);
    if (!before) return null;
    const typed = before.text.slice(2).toLowerCase();
    const from = before.from + 2;
    const options = targets()
      .filter((n) => !typed || n.id.includes(typed) || n.summary.toLowerCase().includes(typed))
      .slice(0, 50)
      .map((n) => ({
        label: n.id,
        detail: n.summary,
        apply: (view: EditorView, _c: unknown, f: number, to: number) => {
          const closes = view.state.sliceDoc(to, to + 2) === ']]';
          const insert = closes ? n.id : `${n.id}]]`;
          view.dispatch({ changes: { from: f, to, insert }, selection: { anchor: f + insert.length + (closes ? 2 : 0) } });
        },
      }));
    return { from, options, filter: false };
  };
}

function linkAt(view: EditorView, pos: number): string | null {
  const line = view.state.doc.lineAt(pos);
  for (const m of line.text.matchAll(LINK)) {
    const start = line.from + (m.index ?? 0);
    if (pos >= start && pos <= start + m[0].length) return m[1].trim();
  }
  return null;
}

export function wikilinks(targets: () => LinkTarget[], open: (id: string) => void): Extension {
  const decorator = new MatchDecorator({
    regexp: LINK,
    decoration: (m) => Decoration.mark({ class: 'cm-wikilink', attributes: { 'data-link': m[1].trim(), title: 'Ctrl/⌘ + click to open' } }),
  });
  const marks = ViewPlugin.fromClass(
    class {
      decorations: DecorationSet;
      constructor(view: EditorView) {
        this.decorations = decorator.createDeco(view);
      }
      update(u: ViewUpdate) {
        this.decorations = decorator.updateDeco(u, this.decorations);
      }
    },
    { decorations: (v) => v.decorations },
  );
  return [
    marks,
    autocompletion({ override: [completeLink(targets)], activateOnTyping: true }),
    EditorView.domEventHandlers({
      mousedown(e, view) {
        if (!(e.ctrlKey || e.metaKey)) return false;
        const pos = view.posAtCoords({ x: e.clientX, y: e.clientY });
        const id = pos === null ? null : linkAt(view, pos);
        if (!id) return false;
        e.preventDefault();
        open(id);
        return true;
      },
    }),
    keymap.of([
      {
        key: 'Mod-Enter',
        run(view) {
          const id = linkAt(view, view.state.selection.main.head);
          if (!id) return false;
          open(id);
          return true;
        },
      },
    ]),
  ];
}
