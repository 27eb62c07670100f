import { CompletionContext } from '@codemirror/autocomplete';
import { EditorState } from '@codemirror/state';
import { describe, expect, it } from 'vitest';
import { completeLink, linksIn } from '../src/lib/notes/wikilinks';

const targets = [
  { id: 'pricing-layout-a91', summary: 'Pricing page layout' },
  { id: 'timezone-cet-9b1', summary: 'Works in Central European Time' },
];

function complete(doc: string) {
  const state = EditorState.create({ doc });
  return completeLink(() => targets)(new CompletionContext(state, doc.length, false));
}

describe('[[links]]', () => {
  it('completes note ids after an unclosed [[, matching id or summary', () => {
    const r = complete('See [[pric');
    expect(r?.from).toBe(6);
    expect(r?.options.map((o) => o.label)).toEqual(['pricing-layout-a91']);
    expect(complete('See [[central')?.options.map((o) => o.label)).toEqual(['timezone-cet-9b1']);
    expect(complete('See [[')?.options).toHaveLength(2);
  });

  it('offers nothing outside a link', () => {
    expect(complete('See pric')).toBeNull();
    expect(complete('See [[pricing-layout-a91]] and')).toBeNull();
  });

  it('finds the linked ids of a body once each, with aliases and headings', () => {
    expect(linksIn('[[a-1]] then [[b-2|B]] and [[a-1]] and [[c-3#Part]]')).toEqual(['a-1', 'b-2', 'c-3']);
  });
});
