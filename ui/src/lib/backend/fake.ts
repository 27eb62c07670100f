// An in-memory backend with the same interface as the Tauri one: the component tests run
// against it, and `VITE_FAKE=1` / `?fake` runs the UI in a plain browser on it.

import { BackendFailure } from './index';
import type {
  Backend,
  BackendEvent,
  BackupPreview,
  BackupReason,
  BackupRow,
  Conflict,
  ConsolidationCluster,
  ConsolidationPlan,
  ConversationExtract,
  ConversationMessage,
  ConversationRow,
  CreateNote,
  DraftKind,
  EpisodicFact,
  Explain,
  Finding,
  FindingNote,
  LastConsolidation,
  ImportReport,
  Labels,
  ListFilter,
  MergePlan,
  MergeSource,
  MessageRole,
  NoteDetail,
  NotePatch,
  NoteRow,
  NoteType,
  Overview,
  Promoted,
  Promotion,
  Quarantine,
  QuarantineProvider,
  QuarantineSelection,
  ReplacedBy,
  Resolution,
  ReviewQueue,
  ScopeInfo,
  ScopeKey,
  SearchHit,
  SearchQuery,
  Settings,
  SettingsPatch,
  SyncSecret,
  SyncStatus,
  Trust,
  WorkingBlock,
  CaptureRun,
} from './types';

/** The tag that keeps a note from agents, exports and the server. */
const SECRETS_TAG = 'contains-secrets';

export interface FakeNote {
  scope: ScopeKey;
  id: string;
  summary: string;
  noteType: NoteType | null;
  tags: string[];
  body: string;
  createdAt: number;
  updatedAt: number;
  trust: Trust | null;
  importance: number | null;
  /** A parse error: the note is listed with it and shown with `raw`. */
  error?: string | null;
  raw?: string;
  /** `consolidated` once a consolidation folded it. */
  status?: string | null;
  replacedBy?: ReplacedBy | null;
}

/** The fake account's end-to-end encryption passphrase and recovery key (seed `e2ee`). */
export const FAKE_PASSPHRASE = 'correct horse battery staple';
export const FAKE_RECOVERY_KEY = 'K7QD-3M9X-ZB2R-T8WN-4HFA-6YCE-P1VG-J5SK-0RDM-XW3Q-9TBN-7FHZ-2CKE-M8PA';
/** The recovery key a rotation of the fake account's key makes (the one before stops opening). */
export const FAKE_ROTATED_RECOVERY_KEY = 'R4TE-8NKW-2QHD-V6ZP-1MXC-J9FB-5SGA-T3YE-7LUN-0PWD-X2KR-6BQM-H8CZ-9VTJ';
/** The recovery key a new passphrase set with this machine's key makes (the one before stops
 * opening). */
export const FAKE_RESET_RECOVERY_KEY = 'N2WX-5JQC-8RTB-K4MZ-0HDV-7PGE-3YSA-L6FU-9CXN-1BQR-T5WK-4ZDM-J7HP-2EVG';

export interface FakeSeed {
  scopes?: ScopeInfo[];
  notes?: FakeNote[];
  conflicts?: Conflict[];
  signedIn?: boolean;
  syncEnabled?: boolean;
  /** The user scope was first synced at this address, not the one signed in to. */
  syncMovedFrom?: string;
  /** A re-point finds the server there is another store. */
  repointRefused?: boolean;
  /** End-to-end encryption: `locked` is an account encrypted on another machine with the
   * passphrase `FAKE_PASSPHRASE` and the recovery key `FAKE_RECOVERY_KEY`, not unlocked here;
   * `lockedOut` one whose key another machine rotated with the others locked out, this machine
   * holding only the old key (the new recovery key is `FAKE_ROTATED_RECOVERY_KEY`). */
  e2ee?: 'off' | 'on' | 'locked' | 'lockedOut';
  /** A rotation or turning off leaves scopes synced only from other machines to move later:
   * it answers `complete: false` and stays under way. */
  e2eeOtherMachines?: boolean;
  /** Encryption on, with a rotation already under way (begun here or on another machine). */
  e2eeRotating?: boolean;
  /** Another machine turned encryption off (seed with `e2ee: 'off'`). */
  e2eeEnded?: boolean;
  /** Recall on the hash fallback (the engine card's warning). */
  hashFallback?: boolean;
  settings?: Partial<Settings>;
  /** Earlier versions already in the backups, newest last. */
  backups?: { note: FakeNote; reason: BackupReason }[];
  /** A chat model is configured for merge drafts (生成合并建议). */
  chatModel?: boolean;
  /** What the last consolidation pass did. */
  lastConsolidation?: LastConsolidation | null;
  /** Conversations in the raw log. */
  conversations?: FakeConversation[];
  /** Facts ready to become notes (the engine finds them in the log; the fake is told). */
  promotions?: Promotion[];
  /** Working-memory blocks (expired ones are never listed). */
  working?: WorkingBlock[];
  /** The capture ledger's rows, in the order they were written. */
  captureRuns?: CaptureRun[];
  /** The raw log's retention by age (`conversations.maxAgeDays`); 0: no limit. */
  logMaxAgeDays?: number;
}

/** A conversation of the fake's raw log: its row, its messages and what was drawn out of it. */
export interface FakeConversation {
  row: ConversationRow;
  messages: ConversationMessage[];
  extract?: ConversationExtract;
}

/** Every call the fake received, for tests that check what a page asked for. */
export interface FakeCall {
  name: keyof Backend;
  args: unknown[];
}

export interface FakeBackend extends Backend {
  calls: FakeCall[];
  /** Sends an event to every listener, as the shell would. */
  emit(e: BackendEvent): void;
  /** Direct access to the stored notes (tests add or change notes "from another process"). */
  notes: Map<string, FakeNote>;
  conflicts: Conflict[];
  /** The raw log's conversations (tests capture "from another process" by pushing one). */
  conversations: FakeConversation[];
  /** The facts ready to become notes (tests change them "from another process"). */
  promotions: Promotion[];
  /** Working-memory blocks (tests add one "from an agent" by pushing it). */
  working: WorkingBlock[];
  /** The capture ledger (tests add a row "from a capture" by pushing one). */
  captureRuns: CaptureRun[];
}

const DAY = 86_400_000;
const key = (scope: string, id: string) => `${scope}\u0000${id}`;

export function fileText(n: Pick<FakeNote, 'id' | 'summary' | 'noteType' | 'tags' | 'body' | 'createdAt' | 'updatedAt'>): string {
  const fm: Record<string, unknown> = { id: n.id, summary: n.summary };
  if (n.noteType) fm.type = n.noteType;
  if (n.tags.length) fm.tags = n.tags;
  fm.createdAt = n.createdAt;
  fm.updatedAt = n.updatedAt;
  return `---\n${JSON.stringify(fm)}\n---\n${n.body}`;
}

function slug(summary: string): string {
  const base = summary
    .toLowerCase()
    .normalize('NFKD')
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 40);
  const rand = Math.random().toString(16).slice(2, 5);
  return `${base || 'note'}-${rand}`;
}

function linksOf(body: string): string[] {
  const out: string[] = [];
  for (const m of body.matchAll(/\[\[([^\]|#]+)(?:[|#][^\]]*)?\]\]/g)) {
    const id = m[1].trim();
    if (!out.includes(id)) out.push(id);
  }
  return out;
}

/** A short stable fingerprint of a text (the fake's content hashes and ids). */
function digest(text: string): string {
  let h = 5381;
  for (let i = 0; i < text.length; i++) h = ((h * 33) ^ text.charCodeAt(i)) >>> 0;
  return h.toString(16).padStart(8, '0');
}

const STOP = new Set(['the', 'and', 'for', 'are', 'but', 'not', 'you', 'with', 'this', 'that', 'from', 'have', 'has', 'was', 'were', 'its', 'into', 'than', 'then', 'they', 'what', 'when', 'will', 'can', 'also', 'only', 'very', 'more', 'some', 'any', 'all', 'each', 'after', 'before']);

/** The words the engine's same-topic rule compares: summary, body and `#tags`. */
function topicWords(n: FakeNote): Set<string> {
  const out = new Set<string>();
  for (const w of `${n.summary} ${n.body}`.toLowerCase().split(/[^\p{L}\p{N}]+/u)) {
    if ([...w].length >= 3 && !STOP.has(w)) out.add(w);
  }
  for (const t of n.tags) out.add(`#${t.toLowerCase()}`);
  return out;
}

function jaccard(a: Set<string>, b: Set<string>): number {
  let shared = 0;
  for (const w of a) if (b.has(w)) shared += 1;
  const union = a.size + b.size - shared;
  return union ? shared / union : 0;
}

/** Notes this much alike in words are the same topic (the engine's words-only rule). */
const SAME_TOPIC = 0.5;
/** A same-topic finding holds 2 to 6 notes. */
const MAX_GROUP = 6;
/** A word in more notes than this proposes no pair. */
const COMMON_WORD = 50;
const TOO_LONG = 8000;

export const DEMO_SCOPES: ScopeInfo[] = [
  { key: 'user', kind: 'user', label: 'User', root: null, count: 0 },
  { key: 'project:a1b2c3', kind: 'project', label: 'memoria', root: '/home/ana/src/memoria', count: 0 },
  { key: 'project:d4e5f6', kind: 'project', label: 'website', root: '/home/ana/src/website', count: 0 },
  { key: 'domain:rust', kind: 'domain', label: 'rust', root: null, count: 0 },
];

export function demoNotes(now = Date.now()): FakeNote[] {
  const n = (
    scope: string,
    id: string,
    summary: string,
    noteType: NoteType | null,
    tags: string[],
    body: string,
    ageDays: number,
    extra: Partial<FakeNote> = {},
  ): FakeNote => ({
    scope,
    id,
    summary,
    noteType,
    tags,
    body,
    createdAt: now - (ageDays + 3) * DAY,
    updatedAt: now - ageDays * DAY,
    trust: 'owner',
    importance: 0.5,
    ...extra,
  });
  return [
    n('user', 'prefers-short-answers-1a2', 'Prefers short answers with code first', 'user', ['style'],
      'Answer with the code first, then at most three sentences.\nSee [[pricing-borderless-3fa]] for the design side.\n', 1),
    n('user', 'timezone-cet-9b1', 'Works in Central European Time', 'user', [], 'Meetings after 16:00 CET are hard.\n', 12),
    n('project:a1b2c3', 'pricing-borderless-3fa', 'Pricing cards use fills, not borders', 'feedback', ['design'],
      'Cards are separated by fill and whitespace. See [[pricing-layout-a91]].\n', 3),
    n('project:a1b2c3', 'pricing-layout-a91', 'Pricing page layout: three columns on desktop', 'project', ['design', 'web'],
      'Three columns above 960px, one below. The middle card is highlighted.\n', 5),
    n('project:a1b2c3', 'sync-uses-etag-cas-7c0', 'Sync replaces the manifest with ETag compare-and-swap', 'reference', ['sync'],
      'A lost race is retried from a fresh manifest, never overwritten.\n', 20, { trust: 'derived', importance: 0.8 }),
    n('project:d4e5f6', 'deploy-friday-freeze-d11', 'No deploys on Friday afternoons', 'feedback', ['ops'],
      'Freeze starts Friday 14:00.\n', 40, { trust: 'peer', importance: 0.3 }),
    n('domain:rust', 'clippy-deny-warnings-e21', 'CI runs clippy with -D warnings', 'domain', ['ci', 'rust'],
      'cargo clippy --workspace --all-targets -- -D warnings\n', 60),
    n('project:a1b2c3', 'half-written-77f', 'half-written', null, [], '', 2, {
      error: 'frontmatter is not valid JSON or YAML: expected `,` or `}` at line 2 column 31',
      raw: '---\n{"id":"half-written-77f","summary":"oops"\n---\nThe closing brace went missing.\n',
    }),
  ];
}

export function demoConflicts(now = Date.now()): Conflict[] {
  const base = fileText({ id: 'pricing-layout-a91', summary: 'Pricing page layout', noteType: 'project', tags: ['design'], body: 'Three columns above 960px.\n', createdAt: now - 9 * DAY, updatedAt: now - 9 * DAY });
  const local = fileText({ id: 'pricing-layout-a91', summary: 'Pricing page layout: three columns on desktop', noteType: 'project', tags: ['design', 'web'], body: 'Three columns above 960px, one below.\n', createdAt: now - 9 * DAY, updatedAt: now - 5 * DAY });
  const cloud = fileText({ id: 'pricing-layout-a91', summary: 'Pricing layout (two columns)', noteType: 'project', tags: ['design'], body: 'Two columns above 1024px.\n', createdAt: now - 9 * DAY, updatedAt: now - 4 * DAY });
  return [
    { scope: 'project:a1b2c3', id: 'pricing-layout-a91', reason: 'merge', kinds: ['summary', 'body'], foundAtMs: now - 3_600_000, base, local, cloud },
  ];
}

/** Two notes that say much the same (a same-topic finding) and one with a broken link: the
 * Review page's demo and test data. */
export function reviewNotes(now = Date.now()): FakeNote[] {
  const n = (id: string, summary: string, body: string, ageDays: number, tags: string[] = []): FakeNote => ({
    scope: 'user',
    id,
    summary,
    noteType: 'user',
    tags,
    body,
    createdAt: now - ageDays * DAY,
    updatedAt: now - ageDays * DAY,
    trust: 'owner',
    importance: 0.5,
  });
  return [
    n('deploys-tuesdays-0a1', 'Deploys go out on Tuesdays', 'Production deploys go out on Tuesdays after the staging smoke tests pass.\n', 30, ['ops']),
    n('deploys-on-tuesday-5c2', 'Deploys go out on Tuesday', 'Production deploys go out on Tuesday, after the staging smoke tests pass.\n', 4, ['ops']),
    n('release-checklist-9d3', 'Release checklist', 'Before a deploy, read [[deploys-on-tuesday-5c2]] and [[rollback-plan-000]].\n', 8),
  ];
}

/** A fact Ana keeps telling her agents and one a colleague said (a `peer` note): the Review
 * page's "Ready to become notes" demo and test data. */
export function demoPromotions(now = Date.now()): Promotion[] {
  const fact = (
    key: string,
    subject: string,
    attribute: string,
    value: string,
    text: string,
    conversations: string[],
    firstDaysAgo: number,
    trust: Trust | null,
  ): Promotion => ({
    key,
    scope: 'user',
    subject,
    attribute,
    value,
    text,
    conversations,
    sources: conversations.map((c) => `msg:${digest(`user\u0000${c}\u00001`)}`),
    firstAt: now - firstDaysAgo * DAY,
    lastAt: now - DAY,
    trust,
    autoLeft: null,
  });
  return [
    fact('fact:team-heron', 'Ana', 'team name', 'Heron', "Ana's team name is Heron", ['standup-monday', 'retro-wednesday', 'planning-friday'], 9, null),
    fact('fact:marta-book', 'Marta', 'favorite book', 'Dune', "Marta's favorite book is Dune", ['book-club-1', 'book-club-2', 'book-club-3'], 30, 'peer'),
  ];
}

/** A fake with the demo data (the browser dev mode). */
export function demoBackend(settings: Partial<Settings> = {}): FakeBackend {
  return createFakeBackend({
    settings,
    scopes: DEMO_SCOPES,
    notes: [...demoNotes(), ...reviewNotes()],
    conflicts: demoConflicts(),
    conversations: demoConversations(),
    promotions: demoPromotions(),
    signedIn: true,
    syncEnabled: true,
    backups: demoNotes()
      .filter((n) => n.id === 'prefers-short-answers-1a2')
      .map((n) => ({ note: { ...n, body: 'Answer with the code first.\n' }, reason: 'agent-update' as const })),
  });
}

/** `count` generated notes spread over the demo scopes (for the virtual list). */
export function manyNotes(count: number, now = Date.now()): FakeNote[] {
  const types: NoteType[] = ['user', 'feedback', 'project', 'reference', 'domain'];
  const scopes = DEMO_SCOPES.map((s) => s.key);
  return Array.from({ length: count }, (_, i) => ({
    scope: scopes[i % scopes.length],
    id: `note-${String(i).padStart(5, '0')}`,
    summary: `Generated note number ${i}`,
    noteType: types[i % types.length],
    tags: i % 3 === 0 ? ['bulk'] : [],
    body: `Body of note ${i}.\n`,
    createdAt: now - i * 60_000,
    updatedAt: now - i * 60_000,
    trust: 'owner' as Trust,
    importance: 0.5,
  }));
}

/** A conversation of `texts` (`[role, text, speaker?]`), one message a minute from `start`;
 * texts that look like a credential are held back as the engine's guard holds them, and orders
 * to an assistant quarantined as its poison gate does. */
export function fakeConversation(
  id: string,
  scope: ScopeKey,
  host: string | null,
  start: number,
  texts: [MessageRole, string, string?][],
  extract?: ConversationExtract,
): FakeConversation {
  const messages = texts.map(([role, text, speaker], i): ConversationMessage => {
    const secret = /password\s*[:=]|AKIA[0-9A-Z]{16}|-----BEGIN [A-Z ]*PRIVATE KEY-----/i.test(text) ? 'password-line' : null;
    return {
      key: `msg:${digest(`${scope}\u0000${id}\u0000${i + 1}`)}`,
      messageId: String(i + 1),
      seq: i,
      at: start + i * 60_000,
      role,
      speaker: speaker ?? null,
      model: role === 'assistant' && host ? 'claude-sonnet' : null,
      text: secret ? `[held back: it looks like a credential (${secret})]` : text,
      secret,
      quarantined: !secret && /ignore (all )?(previous|prior) instructions/i.test(text) ? 'override' : null,
    };
  });
  return {
    row: { scope, id, host, messages: messages.length, firstAt: messages[0]?.at ?? null, lastAt: messages.at(-1)?.at ?? null },
    messages,
    extract,
  };
}

/** A trip planned with an agent (a fact changed on the way, a password held back) and a coding
 * session: the Conversations page's demo and test data. */
export function demoConversations(now = Date.now()): FakeConversation[] {
  const start = now - 2 * DAY;
  const trip = fakeConversation(
    'trip-planning',
    'user',
    null,
    start,
    [
      ['user', 'Book the train to Porto for May 12.', 'Ana'],
      ['assistant', 'Booked the 09:00 train to Porto on May 12.'],
      ['user', 'Change of plan: make it May 14, and find a hotel near Ribeira.', 'Ana'],
      ['assistant', 'Moved the train to May 14 and booked Hotel Ribeira for two nights.'],
      ['user', 'The hotel wifi password: tram28-ribeira', 'Ana'],
      ['assistant', 'Noted. Anything else for the trip?'],
    ],
    {
      summary: { text: 'Ana planned a trip to Porto: the train moved from May 12 to May 14, and Hotel Ribeira is booked for two nights.', sources: [] },
      facts: [
        { key: 'ana/travel-date', subject: 'Ana', attribute: 'travel date', value: 'May 12', validFrom: start, validTo: start + 2 * 60_000, sources: [], trust: 'owner' },
        { key: 'ana/travel-date-2', subject: 'Ana', attribute: 'travel date', value: 'May 14', validFrom: start + 2 * 60_000, validTo: null, sources: [], trust: 'owner' },
        { key: 'ana/hotel', subject: 'Ana', attribute: 'hotel in Porto', value: 'Hotel Ribeira', validFrom: start + 3 * 60_000, validTo: null, sources: [], trust: 'derived' },
      ],
      entities: [
        { name: 'Ana', kind: 'person', count: 3 },
        { name: 'Porto', kind: 'place', count: 2 },
        { name: 'Hotel Ribeira', kind: 'place', count: 1 },
      ],
    },
  );
  trip.extract!.summary!.sources = trip.messages.map((m) => m.key);
  trip.extract!.facts[0].sources = [trip.messages[0].key];
  trip.extract!.facts[1].sources = [trip.messages[2].key];
  trip.extract!.facts[2].sources = [trip.messages[3].key];
  const session = fakeConversation('0b7c2d4e-claude', 'project:a1b2c3', 'claude-code', now - 5 * DAY, [
    ['user', 'Why does the sync test fail on CI only?'],
    ['assistant', 'The runner has two cores, so the watcher batches differ; the test now waits for the rescan.'],
  ]);
  return [trip, session];
}

/** Working memory an agent and the person keep at hand: one block in the project, one of the
 * person's about to expire. */
export function demoWorking(now = Date.now()): WorkingBlock[] {
  const HOUR = 3_600_000;
  return [
    { key: 'wm:3f9a1c', scope: 'project:a1b2c3', text: 'Halfway through the sync test fix: the watcher now rescans; CI run pending.', role: 'assistant', createdAt: now - HOUR, expiresAt: now + 23 * HOUR, uses: 2 },
    { key: 'wm:8b2e47', scope: 'user', text: 'Call the hotel about the late check-in before 6 pm.', role: 'user', createdAt: now - 22 * HOUR, expiresAt: now + 2 * HOUR, uses: 0 },
  ];
}

/** A conversation of `count` messages (the messages' virtual list). */
export function longConversation(count: number, now = Date.now()): FakeConversation {
  const texts: [MessageRole, string][] = Array.from({ length: count }, (_, i) => [i % 2 ? 'assistant' : 'user', `Message number ${i}`]);
  return fakeConversation('long-session', 'user', 'openclaw', now - count * 60_000, texts);
}

export function createFakeBackend(seed: FakeSeed = {}): FakeBackend {
  const notes = new Map<string, FakeNote>();
  for (const n of seed.notes ?? []) notes.set(key(n.scope, n.id), { ...n });
  const scopes: ScopeInfo[] = (seed.scopes ?? [{ key: 'user', kind: 'user', label: 'User', root: null, count: 0 }]).map((s) => ({ ...s }));
  const conflicts: Conflict[] = [...(seed.conflicts ?? [])];
  const conversations: FakeConversation[] = (seed.conversations ?? []).map((c) => structuredClone(c));
  const promotions: Promotion[] = (seed.promotions ?? []).map((p) => structuredClone(p));
  const working: WorkingBlock[] = (seed.working ?? []).map((b) => ({ ...b }));
  const captureRuns: CaptureRun[] = (seed.captureRuns ?? []).map((r) => structuredClone(r));
  const backups: { row: BackupRow; text: string }[] = [];
  const listeners = new Set<(e: BackendEvent) => void>();
  const calls: FakeCall[] = [];
  let backupSeq = 0;
  let settings: Settings = {
    language: null,
    theme: 'system',
    syncServer: seed.signedIn ? 'https://sync.example.org' : null,
    modelDir: '/home/ana/.cache/memoria/models/e5-small-int8',
    dailyConsolidation: true,
    conversationCapture: true,
    conversationCaptureEnv: false,
    home: '/home/ana/.memoria',
    ...seed.settings,
  };
  const sync = {
    signedIn: seed.signedIn ?? false,
    server: seed.signedIn ? settings.syncServer : null,
    enabled: seed.syncEnabled ?? true,
    lastSyncedMs: seed.signedIn ? Date.now() - 120_000 : null,
    disabledScopes: new Set<string>(),
    lastError: new Map<string, string>(),
    lastDownload: { added: 0, changed: 0, deleted: 0 },
    movedFrom: seed.syncMovedFrom ?? null,
    e2ee: seed.e2ee ?? 'off',
    passphrase: FAKE_PASSPHRASE,
    recoveryKey: seed.e2ee === 'lockedOut' ? FAKE_ROTATED_RECOVERY_KEY : FAKE_RECOVERY_KEY,
    rotating: seed.e2eeRotating ?? false,
    turningOff: false,
    ended: seed.e2eeEnded ?? false,
  };
  // A secret as the fake account checks it: its passphrase, or its recovery key typed in any
  // case, with spaces or dashes.
  const opens = (secret: SyncSecret) =>
    'passphrase' in secret ? secret.passphrase === sync.passphrase : secret.recoveryKey.replace(/[\s-]/g, '').toUpperCase() === sync.recoveryKey.replace(/-/g, '');

  const emit = (e: BackendEvent) => {
    for (const l of [...listeners]) l(e);
  };
  const record = (name: keyof Backend, args: unknown[]) => calls.push({ name, args });
  const tick = () => new Promise<void>((r) => setTimeout(r, 0));
  const fail = (code: string, message: string) => new BackendFailure(code, message);

  // One conversation by id (and scope, when given), as the engine finds it.
  const conversation = (id: string, scope: ScopeKey | null | undefined): FakeConversation => {
    if (!id.trim()) throw fail('invalid_input', 'no conversation named: choose one from the list');
    const found = conversations.filter((c) => c.row.id === id && (!scope || c.row.scope === scope));
    if (!found.length) throw fail('not_found', `no conversation ${id} visible here`);
    if (found.length > 1) throw fail('invalid_input', `conversation ${id} is in several scopes (${found.map((c) => c.row.scope).join(', ')}): name the scope`);
    return found[0];
  };
  const find = (scope: ScopeKey, id: string): FakeNote => {
    const n = notes.get(key(scope, id));
    if (!n) throw fail('not_found', `There is no note "${id}" in ${scope}.`);
    return n;
  };
  const row = (n: FakeNote): NoteRow => ({
    scope: n.scope,
    id: n.id,
    summary: n.summary,
    noteType: n.noteType,
    tags: [...n.tags],
    updatedAt: n.updatedAt,
    error: n.error ?? null,
    status: n.status ?? null,
    replacedBy: n.replacedBy ? { ...n.replacedBy } : null,
  });
  const backup = (n: FakeNote, reason: BackupReason): string => {
    backupSeq += 1;
    const backupId = `${new Date().toISOString().replace(/[-:.]/g, '').slice(0, 15)}-${n.id}-${backupSeq}`;
    backups.unshift({
      row: { backupId, scope: n.scope, noteId: n.id, reason, createdAt: Date.now() + backupSeq, summary: n.summary },
      text: n.raw ?? fileText(n),
    });
    return backupId;
  };
  for (const b of seed.backups ?? []) backup(b.note, b.reason);

  // The review queue, computed from the notes the way the engine does (same topic by words,
  // broken links, too long); dismissals hold for the notes' current versions.
  const dismissals = new Map<string, Record<string, string>>();
  const hashOf = (n: FakeNote) => digest(fileText(n));
  const findingNote = (n: FakeNote): FindingNote => ({ scope: n.scope, id: n.id, summary: n.summary, hash: hashOf(n), path: `${n.id}.md`, updatedAt: n.updatedAt });
  const findingId = (kind: string, group: FakeNote[]) => `${kind}-${digest(`${kind}\n${group.map((n) => `${n.scope}/${n.id}`).sort().join('\n')}`)}`;
  const findings = (): Finding[] => {
    const ok = [...notes.values()].filter((n) => !n.error);
    const out: Finding[] = [];
    const words = new Map(ok.map((n) => [n, topicWords(n)]));
    // Candidates share a word that few notes have, as the engine's join finds them: a vault of
    // thousands of notes stays cheap to review.
    const byWord = new Map<string, FakeNote[]>();
    for (const n of ok) {
      for (const w of words.get(n)!) {
        const list = byWord.get(w);
        if (list) list.push(n);
        else byWord.set(w, [n]);
      }
    }
    const seen = new Set<FakeNote>();
    for (const n of ok) {
      if (seen.has(n)) continue;
      const group = [n];
      const inGroup = new Set(group);
      let weakest = 1;
      for (let i = 0; i < group.length && group.length < MAX_GROUP; i++) {
        const candidates = new Set<FakeNote>();
        for (const w of words.get(group[i])!) {
          const list = byWord.get(w)!;
          if (list.length <= COMMON_WORD) for (const c of list) candidates.add(c);
        }
        for (const o of candidates) {
          if (inGroup.has(o) || seen.has(o) || o.scope !== n.scope) continue;
          const j = jaccard(words.get(group[i])!, words.get(o)!);
          if (j >= SAME_TOPIC) {
            group.push(o);
            inGroup.add(o);
            weakest = Math.min(weakest, j);
            if (group.length >= MAX_GROUP) break;
          }
        }
      }
      if (group.length < 2) continue;
      for (const g of group) seen.add(g);
      out.push({
        kind: 'same_topic',
        id: findingId('topic', group),
        scope: n.scope,
        notes: group.map(findingNote),
        message: `${group.length} notes look like the same topic`,
        lexical: weakest,
        cosine: null,
      });
    }
    const ids = new Set(ok.map((n) => n.id));
    for (const n of ok) {
      const targets = linksOf(n.body).filter((t) => !ids.has(t));
      if (targets.length) out.push({ kind: 'broken_link', id: findingId('link', [n]), scope: n.scope, notes: [findingNote(n)], message: `links to ${targets.join(', ')}, which is not a note`, targets });
    }
    for (const n of ok) {
      if (n.body.length > TOO_LONG) out.push({ kind: 'too_long', id: findingId('long', [n]), scope: n.scope, notes: [findingNote(n)], message: 'the body is very long', chars: n.body.length, limit: TOO_LONG });
    }
    return out;
  };
  const holds = (f: Finding) => {
    const d = dismissals.get(f.id);
    return !!d && f.notes.every((n) => d[`${n.scope}/${n.id}`] === n.hash);
  };
  // The derive path's label rule, as the engine applies it.
  const standing: Record<Trust, number> = { quarantined: 0, peer: 1, ingested: 2, derived: 3, owner: 4 };
  const sourceOf = (n: FakeNote): MergeSource => ({
    id: n.id,
    summary: n.summary,
    tags: n.tags.filter((t) => t !== SECRETS_TAG),
    hash: hashOf(n),
    createdAt: n.createdAt,
    updatedAt: n.updatedAt,
    path: `${n.id}.md`,
    body: n.body,
    trust: n.trust,
    secret: n.tags.includes(SECRETS_TAG),
  });
  const labelsOf = (sources: MergeSource[], draft: DraftKind): Labels => {
    let trust: Trust = draft === 'model' ? 'derived' : 'owner';
    for (const x of sources) if (standing[x.trust ?? 'owner'] < standing[trust]) trust = x.trust ?? 'owner';
    return { trust: trust === 'owner' ? null : trust, secret: sources.some((x) => x.secret), inferred: false };
  };
  const plan = (ids: string[], scope: ScopeKey | null, draft: DraftKind): MergePlan => {
    if (ids.length < 2) throw fail('invalid_input', 'a merge needs two or more notes: name every note to merge');
    const found = ids.map((id) => {
      const n = [...notes.values()].find((x) => x.id === id && (!scope || x.scope === scope));
      if (!n) throw fail('not_found', `There is no note "${id}".`);
      return n;
    });
    if (found.some((n) => n.scope !== found[0].scope)) throw fail('invalid_input', 'only notes of one scope can be merged');
    const sources: MergeSource[] = found.map(sourceOf).sort((a, b) => (a.createdAt ?? 0) - (b.createdAt ?? 0) || a.id.localeCompare(b.id));
    const keptId = sources[0].id;
    const deletedIds = sources.slice(1).map((x) => x.id);
    if (draft === 'model' && !seed.chatModel) {
      throw fail('config', 'no model is configured for merge drafts: set `model.url` to an OpenAI-compatible endpoint, or use the manual draft');
    }
    const body =
      draft === 'model'
        ? `${sources.map((x) => x.body.trim()).join('\n\n')}\n`
        : sources.map((x) => `## ${x.summary}\n\n${x.body.trim()}\n`).join('\n');
    const sc = found[0].scope;
    const relinked = [...notes.values()]
      .filter((o) => o.scope === sc && !ids.includes(o.id) && linksOf(o.body).some((l) => deletedIds.includes(l)))
      .map((o) => ({ id: o.id, summary: o.summary }));
    return {
      planId: `plan-${digest(`${sc}\n${sources.map((x) => `${x.id}\n${x.hash}`).join('\n')}`)}`,
      scope: sc,
      keptId,
      deletedIds,
      sources,
      tags: [...new Set([...sources.flatMap((x) => x.tags), ...(sources.some((x) => x.secret) ? [SECRETS_TAG] : [])])],
      labels: labelsOf(sources, draft),
      draft: { kind: draft, summary: sources[0].summary, body },
      relinked,
    };
  };
  // Consolidation, the way the engine plans it: clusters of three or more recent working notes
  // of one scope that say the same thing (by words here), folded into a new note.
  let lastConsolidation: LastConsolidation | null = seed.lastConsolidation ?? null;
  const consolidationPlan = (): ConsolidationPlan => {
    // Never a quarantined note or one holding a secret; never notes of different trust together.
    const recent = [...notes.values()].filter((n) => !n.error && !n.status && n.trust !== 'quarantined' && !n.tags.includes(SECRETS_TAG) && Date.now() - n.updatedAt <= 7 * DAY);
    const clusters: ConsolidationCluster[] = [];
    const taken = new Set<FakeNote>();
    for (const n of recent) {
      if (taken.has(n)) continue;
      const group = recent.filter((o) => o.scope === n.scope && o.trust === n.trust && !taken.has(o) && (o === n || jaccard(topicWords(n), topicWords(o)) >= SAME_TOPIC));
      if (group.length < 3) continue;
      for (const g of group) taken.add(g);
      const sources: MergeSource[] = group
        .map(sourceOf)
        .sort((a, b) => (a.createdAt ?? 0) - (b.createdAt ?? 0) || a.id.localeCompare(b.id));
      const intoId = `${sources[0].id}-consolidated`;
      const body = `${sources.map((x) => x.body.trim()).join('\n\n')}\n\n## Consolidated from\n\n${sources.map((x) => `- [[${x.id}]] ${x.summary}`).join('\n')}\n`;
      clusters.push({
        clusterId: `fold-${digest(sources.map((x) => `${x.id}\n${x.hash}`).join('\n'))}`,
        scope: n.scope,
        sources,
        intoId,
        newNote: true,
        draft: { kind: 'manual', summary: sources[0].summary, body },
        tags: [...new Set(sources.flatMap((x) => x.tags))],
        labels: labelsOf(sources, 'manual'),
        basis: 'similar',
        cosine: null,
        lexical: 1,
      });
    }
    return { clusters, threshold: 0.96, minSize: 3, maxAgeDays: 7, candidates: recent.length, vectors: false };
  };
  const guardSecret = (text: string) => {
    if (/AKIA[0-9A-Z]{16}|-----BEGIN [A-Z ]*PRIVATE KEY-----|password\s*[:=]\s*\S+/i.test(text)) {
      throw fail('credential_refused', 'This looks like a credential (an API key, a private key, a token or a password), so it was not saved.');
    }
  };
  const status = (): SyncStatus => ({
    signedIn: sync.signedIn,
    server: sync.server,
    userId: sync.signedIn ? 'ana' : null,
    enabled: sync.enabled,
    running: false,
    lastSyncedMs: sync.lastSyncedMs,
    pausedUntilMs: null,
    encrypted: sync.signedIn && sync.e2ee === 'on',
    encryptionLocked: sync.signedIn && sync.e2ee === 'lockedOut',
    rotationUnderWay: sync.signedIn && sync.e2ee === 'on' && sync.rotating,
    encryptionTurningOff: sync.signedIn && sync.e2ee === 'on' && sync.turningOff,
    encryptionEnded: sync.signedIn && sync.e2ee === 'off' && sync.ended,
    scopes: scopes
      .filter((s) => s.kind !== 'domain')
      .map((s) => ({
        scope: s.key,
        label: s.label,
        enabled: !sync.disabledScopes.has(s.key),
        lastSyncedMs: sync.signedIn ? sync.lastSyncedMs : null,
        lastError: sync.lastError.get(s.key) ?? null,
        lastDownload: s.key === 'user' ? { ...sync.lastDownload } : { added: 0, changed: 0, deleted: 0 },
        quotas: sync.signedIn
          ? { liveNotesPerScope: 5000, changesPerCommit: 500, bodyBytes: 131072, responseBodyBytes: 16777216, tombstoneDays: 90 }
          : null,
        liveNotes: [...notes.values()].filter((n) => n.scope === s.key).length,
        heldBack: conflicts.filter((c) => c.scope === s.key).map((c) => c.id),
        movedFrom: s.key === 'user' ? sync.movedFrom : null,
      })),
  });

  const score = (n: FakeNote, words: string[]): number => {
    const hay = `${n.summary} ${n.id} ${n.tags.join(' ')} ${n.body}`.toLowerCase();
    let s = 0;
    for (const w of words) {
      if (n.summary.toLowerCase().includes(w)) s += 2;
      if (hay.includes(w)) s += 1;
    }
    return s;
  };

  // Quarantines of a provider's memory, the way the engine keeps them: each label changed, with
  // how to put back the one it had.
  const quarantines: Quarantine[] = [];
  const undos = new Map<string, (() => void)[]>();
  const hiddenSummaries = new Set<FakeConversation>();
  const takes = (sel: QuarantineSelection, host: string | null, model: string | null, at: number | null) => {
    const any = (names: string[], v: string | null) =>
      names.length === 0 || (v !== null && names.some((n) => n.toLowerCase() === v.toLowerCase()));
    const within = at === null ? sel.since === null && sel.until === null : (sel.since === null || at >= sel.since) && (sel.until === null || at <= sel.until);
    return any(sel.hosts, host) && any(sel.models, model) && within;
  };
  const quarantinePlan = (sel: QuarantineSelection) => {
    if (sel.hosts.length + sel.models.length === 0) {
      throw fail('invalid_input', 'a quarantine names at least one host or model: name the provider whose memory to hide');
    }
    const messages: ConversationMessage[] = [];
    const facts: ConversationExtract['facts'] = [];
    const summaries: FakeConversation[] = [];
    let conversationsTaken = 0;
    for (const c of conversations) {
      // The person's own words, and other people's, are never the provider's.
      const taken = c.messages.filter((m) => (m.role === 'assistant' || m.role === 'tool') && m.quarantined === null && takes(sel, c.row.host, m.model, m.at));
      if (taken.length === 0) continue;
      conversationsTaken += 1;
      messages.push(...taken);
      const keys = new Set(taken.map((m) => m.key));
      facts.push(...(c.extract?.facts ?? []).filter((f) => f.trust !== 'quarantined' && f.sources.some((k) => keys.has(k))));
      if (c.extract?.summary?.sources.some((k) => keys.has(k)) && !hiddenSummaries.has(c)) summaries.push(c);
    }
    const counts = { messages: messages.length, facts: facts.length, summaries: summaries.length, notes: 0, conversations: conversationsTaken };
    return { messages, facts, summaries, counts };
  };

  const be: FakeBackend = {
    calls,
    notes,
    conflicts,
    conversations,
    promotions,
    working,
    captureRuns,
    emit,

    async listScopes() {
      record('listScopes', []);
      await tick();
      return scopes.map((s) => ({ ...s, count: [...notes.values()].filter((n) => n.scope === s.key).length }));
    },

    async listNotes(filter: ListFilter = {}) {
      record('listNotes', [filter]);
      await tick();
      return [...notes.values()]
        .filter((n) => !filter.scopes?.length || filter.scopes.includes(n.scope))
        .filter((n) => !filter.noteType || n.noteType === filter.noteType)
        .filter((n) => !filter.tag || n.tags.includes(filter.tag))
        .sort((a, b) => b.updatedAt - a.updatedAt)
        .map(row);
    },

    async getNote(scope, id) {
      record('getNote', [scope, id]);
      await tick();
      const n = find(scope, id);
      const backlinks = [...notes.values()]
        .filter((o) => o !== n && linksOf(o.body).includes(n.id))
        .map((o) => ({ scope: o.scope, id: o.id, summary: o.summary }));
      const detail: NoteDetail = {
        ...row(n),
        body: n.body,
        raw: n.raw ?? fileText(n),
        path: `${scope === 'user' ? settings.home + '/memory/user' : (scopes.find((s) => s.key === scope)?.root ?? '') + '/MEMORY'}/${n.id}.md`,
        createdAt: n.createdAt,
        trust: n.trust,
        importance: n.importance,
        links: linksOf(n.body),
        backlinks,
      };
      return detail;
    },

    async createNote(req: CreateNote) {
      record('createNote', [req]);
      await tick();
      if (!req.summary.trim()) throw fail('invalid_input', 'A note needs a summary.');
      guardSecret(`${req.summary}\n${req.body}`);
      const scope = req.scope ?? (req.noteType === 'user' || !scopes.some((s) => s.kind === 'project') ? 'user' : scopes.find((s) => s.kind === 'project')!.key);
      const now = Date.now();
      const n: FakeNote = {
        scope,
        id: slug(req.summary),
        summary: req.summary.trim(),
        noteType: req.noteType,
        tags: [...req.tags],
        body: req.body.endsWith('\n') || !req.body ? req.body : `${req.body}\n`,
        createdAt: now,
        updatedAt: now,
        trust: 'owner',
        importance: 0.5,
      };
      notes.set(key(scope, n.id), n);
      emit({ kind: 'noteAdded', scope, id: n.id });
      return row(n);
    },

    async updateNote(scope, id, patch: NotePatch) {
      record('updateNote', [scope, id, patch]);
      await tick();
      const n = find(scope, id);
      if (patch.summary !== undefined && !patch.summary.trim()) throw fail('invalid_input', 'A note needs a summary.');
      guardSecret(`${patch.summary ?? ''}\n${patch.body ?? ''}`);
      if (patch.summary !== undefined) n.summary = patch.summary.trim();
      if (patch.body !== undefined) n.body = patch.body;
      if (patch.noteType !== undefined) n.noteType = patch.noteType;
      if (patch.tags !== undefined) n.tags = [...patch.tags];
      if (patch.importance !== undefined) n.importance = patch.importance;
      n.error = null;
      n.raw = undefined;
      n.updatedAt = Date.now();
      emit({ kind: 'noteChanged', scope, id });
      return row(n);
    },

    async forgetNote(scope, id) {
      record('forgetNote', [scope, id]);
      await tick();
      const n = find(scope, id);
      const backupId = backup(n, 'forget');
      notes.delete(key(scope, id));
      emit({ kind: 'noteRemoved', scope, id });
      return { scope, id, backupId };
    },

    async searchNotes(q: SearchQuery) {
      record('searchNotes', [q]);
      await tick();
      const words = q.query.toLowerCase().split(/\s+/).filter(Boolean);
      if (!words.length) return [];
      const scored = [...notes.values()]
        .filter((n) => !n.error)
        .filter((n) => !q.scopes?.length || q.scopes.includes(n.scope))
        .map((n) => ({ n, s: score(n, words) }))
        .filter((x) => x.s > 0)
        .sort((a, b) => b.s - a.s)
        .slice(0, q.limit ?? 20);
      return scored.map(({ n, s }, i): SearchHit => {
        const explain: Explain = {
          bm25Rank: i + 1,
          bm25Score: s * 1.7,
          vectorRank: Math.max(1, scored.length - i),
          cosine: 0.4 + 0.05 * s,
          fused: 1 / (60 + i + 1) + 1 / (60 + scored.length - i),
          coverage: 1,
          vectorWeight: 0.5,
          decay: Math.max(0.3, 1 - (Date.now() - n.updatedAt) / (365 * DAY)),
          trust: n.trust === 'peer' ? 0.3 : n.trust === 'ingested' ? 0.6 : 1,
          importance: n.importance ?? 0.5,
          access: 1,
          standing: n.replacedBy || n.status === 'consolidated' ? 0.5 : 1,
        };
        const idx = n.body.toLowerCase().indexOf(words[0]);
        return {
          scope: n.scope,
          id: n.id,
          summary: n.summary,
          noteType: n.noteType,
          score: explain.fused * explain.decay * explain.trust * explain.standing,
          // The share of the query's words the note holds stands in for the model's relevance.
          relevance: words.filter((w) => `${n.summary} ${n.body}`.toLowerCase().includes(w)).length / words.length,
          snippet: idx >= 0 ? n.body.slice(Math.max(0, idx - 30), idx + 60).trim() : n.body.slice(0, 90).trim() || null,
          explain: q.explain ? explain : null,
        };
      });
    },

    async listBackups(limit = 50) {
      record('listBackups', [limit]);
      await tick();
      return backups.slice(0, limit).map((b) => ({ ...b.row }));
    },

    async previewBackup(backupId): Promise<BackupPreview> {
      record('previewBackup', [backupId]);
      await tick();
      const b = backups.find((x) => x.row.backupId === backupId);
      if (!b) throw fail('not_found', `There is no backup "${backupId}".`);
      const cur = notes.get(key(b.row.scope, b.row.noteId));
      return { backup: { ...b.row }, backupText: b.text, currentText: cur ? (cur.raw ?? fileText(cur)) : null };
    },

    async restoreBackup(backupId) {
      record('restoreBackup', [backupId]);
      await tick();
      const b = backups.find((x) => x.row.backupId === backupId);
      if (!b) throw fail('not_found', `There is no backup "${backupId}".`);
      const cur = notes.get(key(b.row.scope, b.row.noteId));
      if (cur && (cur.raw ?? fileText(cur)) === b.text) {
        return { scope: b.row.scope, id: b.row.noteId, path: '', replacedBackup: null, unchanged: true };
      }
      const replacedBackup = cur ? backup(cur, 'restore-over') : null;
      const m = /^---\n(.*)\n---\n([\s\S]*)$/.exec(b.text);
      const fm = m ? (JSON.parse(m[1]) as Record<string, unknown>) : {};
      const now = Date.now();
      const n: FakeNote = {
        scope: b.row.scope,
        id: b.row.noteId,
        summary: String(fm.summary ?? b.row.summary ?? b.row.noteId),
        noteType: (fm.type as NoteType | undefined) ?? null,
        tags: (fm.tags as string[] | undefined) ?? [],
        body: m ? m[2] : b.text,
        createdAt: Number(fm.createdAt ?? now),
        updatedAt: now,
        trust: 'owner',
        importance: 0.5,
      };
      notes.set(key(n.scope, n.id), n);
      emit({ kind: cur ? 'noteChanged' : 'noteAdded', scope: n.scope, id: n.id });
      return { scope: n.scope, id: n.id, path: `${n.id}.md`, replacedBackup, unchanged: false };
    },

    async syncStatus() {
      record('syncStatus', []);
      await tick();
      return status();
    },

    async syncLogin(login) {
      record('syncLogin', [login]);
      await tick();
      if (!/^https?:\/\/\S+$/.test(login.server)) throw fail('invalid_input', 'The server address must start with http:// or https://.');
      if (!login.token.trim()) throw fail('invalid_input', 'Paste the token the server gave you.');
      sync.signedIn = true;
      sync.server = login.server;
      settings = { ...settings, syncServer: login.server };
      return status();
    },

    async syncLogout() {
      record('syncLogout', []);
      await tick();
      sync.signedIn = false;
      sync.server = null;
      return status();
    },

    async syncSetEnabled(enabled, scope = null) {
      record('syncSetEnabled', [enabled, scope]);
      await tick();
      if (scope) {
        if (enabled) sync.disabledScopes.delete(scope);
        else sync.disabledScopes.add(scope);
      } else {
        sync.enabled = enabled;
      }
      return status();
    },

    async syncNow() {
      record('syncNow', []);
      await tick();
      if (!sync.signedIn) throw fail('not_signed_in', 'Sign in to a sync server first.');
      if (!sync.enabled) throw fail('sync_off', 'Cloud sync is turned off. Turn it on to sync.');
      for (const s of status().scopes.filter((x) => x.enabled)) emit({ kind: 'syncStarted', scope: s.scope });
      sync.lastSyncedMs = Date.now();
      sync.lastDownload = { added: 0, changed: 0, deleted: 0 };
      // A machine without the account's current key is refused each scope's pass, as the
      // engine's is: nothing sent or taken, the scope's error says why.
      const locked = sync.e2ee === 'locked' || sync.e2ee === 'lockedOut';
      for (const s of status().scopes.filter((x) => x.enabled)) {
        const error = locked
          ? `${s.scope}: ${sync.e2ee === 'lockedOut' ? "the account's key was replaced on another machine, and the key this machine holds no longer opens the notes" : "this account's notes are end-to-end encrypted and this machine does not hold the key"}: unlock this machine with the passphrase or the recovery key`
          : null;
        if (error) sync.lastError.set(s.scope, error);
        else sync.lastError.delete(s.scope);
        emit({ kind: 'syncFinished', scope: s.scope, ok: !error, error, download: { added: 0, changed: 0, deleted: 0 }, uploaded: 0, newConflicts: [] });
      }
      return status();
    },

    async syncRepoint(server) {
      record('syncRepoint', [server]);
      await tick();
      if (seed.repointRefused) {
        throw fail('not_same_store', `nothing was re-pointed to ${server}: user's manifest does not match: 2 of 2 note(s) differ from the last sync here`);
      }
      sync.movedFrom = null;
      sync.server = server;
      sync.lastSyncedMs = Date.now();
      return status();
    },

    async syncE2ee() {
      record('syncE2ee', []);
      await tick();
      if (!sync.signedIn) throw fail('not_signed_in', 'Sign in to a sync server first.');
      return { supported: true, accountEncrypted: sync.e2ee !== 'off', unlocked: sync.e2ee === 'on', keyReplaced: sync.e2ee === 'lockedOut' };
    },

    async syncEncrypt(passphrase) {
      // Secrets are never recorded: only that one was given.
      record('syncEncrypt', ['<passphrase>']);
      await tick();
      if (!sync.signedIn) throw fail('not_signed_in', 'Sign in to a sync server first.');
      if ([...passphrase].length < 8) throw fail('invalid_input', 'the passphrase is too short: use at least 8 characters (a few unrelated words are best)');
      if (sync.e2ee !== 'off') throw fail('exists', "this account's notes are already end-to-end encrypted");
      sync.e2ee = 'on';
      sync.lastSyncedMs = Date.now();
      return { recoveryKey: FAKE_RECOVERY_KEY, status: status() };
    },

    async syncUnlock(secret) {
      record('syncUnlock', ['passphrase' in secret ? '<passphrase>' : '<recovery key>']);
      await tick();
      if (!sync.signedIn) throw fail('not_signed_in', 'Sign in to a sync server first.');
      if (sync.e2ee === 'off') throw fail('invalid_input', "this account's notes are not end-to-end encrypted: there is nothing to unlock (turn encryption on instead)");
      if (!opens(secret)) throw fail('wrong_passphrase', 'the passphrase does not open the account key; nothing was changed on this machine');
      sync.e2ee = 'on';
      sync.lastSyncedMs = Date.now();
      return status();
    },

    async syncChangePassphrase(current, newPassphrase) {
      record('syncChangePassphrase', ['passphrase' in current ? '<passphrase>' : '<recovery key>', '<new passphrase>']);
      await tick();
      if (!sync.signedIn) throw fail('not_signed_in', 'Sign in to a sync server first.');
      if ([...newPassphrase].length < 8) throw fail('invalid_input', 'the passphrase is too short: use at least 8 characters (a few unrelated words are best)');
      if (sync.e2ee === 'off') throw fail('invalid_input', "this account's notes are not end-to-end encrypted: there is no passphrase to change (turn encryption on instead)");
      if (!opens(current)) throw fail('wrong_passphrase', 'the passphrase does not open the account key; nothing was changed on this machine');
      sync.passphrase = newPassphrase;
      sync.e2ee = 'on';
    },

    async syncResetPassphrase(newPassphrase) {
      record('syncResetPassphrase', ['<new passphrase>']);
      await tick();
      if (!sync.signedIn) throw fail('not_signed_in', 'Sign in to a sync server first.');
      if ([...newPassphrase].length < 8) throw fail('invalid_input', 'the passphrase is too short: use at least 8 characters (a few unrelated words are best)');
      if (sync.e2ee !== 'on') {
        throw fail('e2ee_locked', "this machine does not hold the account's current key, which is what proves the account without the passphrase or the recovery key: set the new passphrase on a machine that syncs end-to-end encrypted now");
      }
      sync.passphrase = newPassphrase;
      sync.recoveryKey = FAKE_RESET_RECOVERY_KEY;
      return { recoveryKey: FAKE_RESET_RECOVERY_KEY };
    },

    async syncRotateKey(passphrase, lockOut) {
      record('syncRotateKey', ['<passphrase>', lockOut]);
      await tick();
      if (!sync.signedIn) throw fail('not_signed_in', 'Sign in to a sync server first.');
      if (sync.e2ee === 'off') throw fail('invalid_input', "this account's notes are not end-to-end encrypted: there is no key to rotate (turn encryption on instead)");
      if (!opens({ passphrase })) throw fail('wrong_passphrase', 'the passphrase does not open the account key; nothing was changed on this machine');
      sync.e2ee = 'on';
      sync.recoveryKey = FAKE_ROTATED_RECOVERY_KEY;
      sync.rotating = !!seed.e2eeOtherMachines;
      sync.lastSyncedMs = Date.now();
      return { recoveryKey: FAKE_ROTATED_RECOVERY_KEY, lockedOut: lockOut, complete: !sync.rotating, status: status() };
    },

    async syncDecrypt() {
      record('syncDecrypt', []);
      await tick();
      if (!sync.signedIn) throw fail('not_signed_in', 'Sign in to a sync server first.');
      if (sync.e2ee === 'off') throw fail('invalid_input', "this account's notes are not end-to-end encrypted: there is nothing to turn off");
      if (sync.e2ee === 'locked' || sync.e2ee === 'lockedOut') {
        throw fail('e2ee_locked', 'this machine does not hold the account key, which reads the encrypted notes before they go back to plaintext: unlock it first');
      }
      if (sync.rotating) throw fail('keys_exist', "a rotation of this account's key is under way: finish it (run it again) before turning encryption off");
      sync.turningOff = !!seed.e2eeOtherMachines;
      if (!sync.turningOff) sync.e2ee = 'off';
      sync.lastSyncedMs = Date.now();
      return { complete: !sync.turningOff, status: status() };
    },

    async listConflicts() {
      record('listConflicts', []);
      await tick();
      return conflicts.map((c) => ({ ...c }));
    },

    async resolveConflict(scope, id, resolution: Resolution) {
      record('resolveConflict', [scope, id, resolution]);
      await tick();
      const i = conflicts.findIndex((c) => c.scope === scope && c.id === id);
      if (i < 0) throw fail('not_found', `There is no conflict for "${id}".`);
      conflicts.splice(i, 1);
      const n = notes.get(key(scope, id));
      const backupsMade: string[] = [];
      let newId: string | null = null;
      if (resolution.keep === 'keep_both') newId = `${id}-cloud`;
      if (n && resolution.keep !== 'keep_local' && resolution.keep !== 'keep_both') {
        backupsMade.push(backup(n, 'conflict-set-aside'));
        if (resolution.keep === 'merged') {
          const m = /^---\n(.*)\n---\n([\s\S]*)$/.exec(resolution.text);
          n.body = m ? m[2] : resolution.text;
        }
        n.updatedAt = Date.now();
        emit({ kind: 'noteChanged', scope, id });
      }
      return { scope, id, newId, backups: backupsMade };
    },

    async overview(): Promise<Overview> {
      record('overview', []);
      await tick();
      const all = [...notes.values()];
      const types: (NoteType | 'untyped')[] = ['user', 'feedback', 'project', 'reference', 'domain', 'untyped'];
      const relevance = Array.from({ length: 10 }, () => 0);
      for (const n of all) {
        const r = Math.min(0.999, Math.max(0, (n.importance ?? 0.5) * Math.max(0.3, 1 - (Date.now() - n.updatedAt) / (365 * DAY))));
        relevance[Math.floor(r * 10)] += 1;
      }
      const fallback = seed.hashFallback ?? false;
      return {
        totalNotes: all.length,
        byScope: scopes.map((s) => ({ scope: s.key, label: s.label, count: all.filter((n) => n.scope === s.key).length })),
        byType: types.map((t) => ({ noteType: t, count: all.filter((n) => (n.noteType ?? 'untyped') === t).length })),
        byTier: [
          { tier: 'working', count: 0 },
          { tier: 'episodic', count: 0 },
          { tier: 'vault', count: all.length },
          { tier: 'archive', count: 0 },
        ],
        relevance,
        brokenNotes: all.filter((n) => n.error).length,
        engine: {
          embedder: fallback ? 'hash' : 'fastembed',
          modelId: fallback ? 'hash-384' : 'intfloat/multilingual-e5-small (int8)',
          fallbackReason: fallback ? 'No embedding model was found in the model folder.' : null,
          fallbackFix: fallback ? 'Put the e5-small-int8 model folder in the model folder set in Settings, then restart Memoria.' : null,
          documents: all.length,
          documentsWithVectors: all.length,
          pendingEmbeddings: 0,
          lastVectorUpdateMs: Date.now() - 60_000,
          modelDir: settings.modelDir,
          capture: settings.conversationCapture,
          conversations: conversations.length,
          messages: conversations.reduce((n, c) => n + c.messages.length, 0),
          rawLog: { bytes: conversations.length ? 4096 + conversations.reduce((n, c) => n + c.messages.reduce((m, x) => m + x.text.length, 0), 0) : 0, maxAgeDays: seed.logMaxAgeDays ?? 0, maxTotalMb: 0 },
          switches: [
            { key: 'sync', on: sync.enabled },
            { key: 'uploadSecrets', on: false },
          ],
        },
      };
    },

    async reviewQueue(): Promise<ReviewQueue> {
      record('reviewQueue', []);
      await tick();
      const all = findings();
      const shown = all.filter((f) => !holds(f));
      return { findings: shown, dismissed: all.length - shown.length, notes: notes.size, unusedDays: 90, vectors: false, modelConfigured: !!seed.chatModel };
    },

    async dismissFinding(findingId) {
      record('dismissFinding', [findingId]);
      await tick();
      const f = findings().find((x) => x.id === findingId);
      if (!f) throw fail('not_found', `There is no finding "${findingId}" among the notes visible here.`);
      const held = Object.fromEntries(f.notes.map((n) => [`${n.scope}/${n.id}`, n.hash]));
      dismissals.set(findingId, held);
      return { findingId, notes: held, dismissedAt: Date.now() };
    },

    async mergePlan(ids, scope, draft) {
      record('mergePlan', [ids, scope, draft]);
      await tick();
      return plan(ids, scope, draft);
    },

    async mergeApply(req) {
      record('mergeApply', [req]);
      await tick();
      const p = plan(req.ids, req.scope, 'manual');
      if (p.planId !== req.planId) {
        throw fail('changed_since', `the notes of merge ${req.planId} changed since it was planned: nothing was merged; plan the merge again to see the current versions`);
      }
      const made: string[] = [];
      const kept = find(p.scope, p.keptId);
      made.push(backup(kept, 'merge'));
      kept.summary = req.summary.trim();
      kept.body = req.body.endsWith('\n') ? req.body : `${req.body}\n`;
      kept.tags = [...p.tags];
      kept.trust = req.trust !== undefined ? (req.trust === 'owner' ? null : req.trust) : labelsOf(p.sources, req.draftedBy).trust;
      kept.updatedAt = Date.now();
      const relinked: string[] = [];
      for (const l of p.relinked) {
        const n = find(p.scope, l.id);
        made.push(backup(n, 'merge'));
        n.body = n.body.replace(/\[\[([^\]|#]+)([|#][^\]]*)?\]\]/g, (m, id: string, rest: string | undefined) => (p.deletedIds.includes(id.trim()) ? `[[${p.keptId}${rest ?? ''}]]` : m));
        n.updatedAt = Date.now();
        relinked.push(n.id);
        emit({ kind: 'noteChanged', scope: p.scope, id: n.id });
      }
      for (const id of p.deletedIds) {
        made.push(backup(find(p.scope, id), 'merge'));
        notes.delete(key(p.scope, id));
        emit({ kind: 'noteRemoved', scope: p.scope, id });
      }
      emit({ kind: 'noteChanged', scope: p.scope, id: p.keptId });
      return { kept: { scope: p.scope, id: p.keptId, path: `${p.keptId}.md` }, deleted: [...p.deletedIds], relinked, notRelinked: [], backups: made };
    },

    async consolidationLast() {
      record('consolidationLast', []);
      await tick();
      const at = lastConsolidation?.at ?? Date.now();
      return { last: lastConsolidation ? structuredClone(lastConsolidation) : null, daily: settings.dailyConsolidation, nextDueAt: at + DAY };
    },

    async consolidationPreview() {
      record('consolidationPreview', []);
      await tick();
      return consolidationPlan();
    },

    async consolidationApply(p: ConsolidationPlan) {
      record('consolidationApply', [p]);
      await tick();
      const at = Date.now();
      const applied: { clusterId: string; into: { scope: ScopeKey; id: string; path: string }; sources: string[] }[] = [];
      const skipped: { clusterId: string; reason: string }[] = [];
      const made: string[] = [];
      for (const c of p.clusters) {
        const changed = c.sources.find((x) => {
          const cur = notes.get(key(c.scope, x.id));
          return !cur || hashOf(cur) !== x.hash;
        });
        if (changed) {
          skipped.push({ clusterId: c.clusterId, reason: `note \`${changed.id}\` changed since the plan` });
          continue;
        }
        const first = find(c.scope, c.sources[0].id);
        const labels = labelsOf(c.sources.map((x) => sourceOf(find(c.scope, x.id))), c.draft.kind);
        const into: FakeNote = { ...first, id: c.intoId, summary: c.draft.summary, body: c.draft.body, tags: [...c.tags], trust: labels.trust, createdAt: at, updatedAt: at, status: null, replacedBy: null };
        notes.set(key(c.scope, into.id), into);
        emit({ kind: 'noteAdded', scope: c.scope, id: into.id });
        for (const x of c.sources) {
          const n = find(c.scope, x.id);
          made.push(backup(n, 'merge'));
          n.status = 'consolidated';
          n.replacedBy = { how: 'consolidated', id: into.id };
          n.updatedAt = at;
          emit({ kind: 'noteChanged', scope: c.scope, id: n.id });
        }
        applied.push({ clusterId: c.clusterId, into: { scope: c.scope, id: into.id, path: `${into.id}.md` }, sources: c.sources.map((x) => x.id) });
      }
      lastConsolidation = {
        at,
        daily: false,
        folded: applied.map((a) => {
          const c = p.clusters.find((x) => x.clusterId === a.clusterId)!;
          return { clusterId: a.clusterId, scope: a.into.scope, intoId: a.into.id, summary: c.draft.summary, newNote: c.newNote, goalId: null, sources: a.sources };
        }),
        goalsClosed: [],
        skipped,
        backups: made.length,
        error: null,
      };
      if (applied.length) emit({ kind: 'consolidated', at, folded: applied.length, notes: applied.reduce((k, a) => k + a.sources.length, 0) });
      return { plan: p, dryRun: false, applied, skipped, backups: made };
    },

    async listPromotions() {
      record('listPromotions', []);
      await tick();
      return structuredClone(promotions);
    },

    async promote(factKey): Promise<Promoted> {
      record('promote', [factKey]);
      await tick();
      const i = promotions.findIndex((p) => p.key === factKey);
      if (i < 0) {
        throw fail('not_found', `no fact ${factKey} ready for promotion here: it is replaced, promoted already, stated in fewer than 3 conversations, or not visible`);
      }
      const [p] = promotions.splice(i, 1);
      // The engine's id: the text's slug, numbered when the scope has it already.
      const base =
        p.text
          .toLowerCase()
          .normalize('NFKD')
          .replace(/[^a-z0-9]+/g, '-')
          .replace(/^-+|-+$/g, '')
          .slice(0, 48)
          .replace(/-+$/, '') || 'note';
      let id = base;
      for (let n = 2; notes.has(key(p.scope, id)); n++) id = `${base}-${n}`;
      const at = Date.now();
      notes.set(key(p.scope, id), {
        scope: p.scope,
        id,
        summary: p.text,
        noteType: null,
        tags: ['promoted'],
        body: `${p.text}.\n\nStated in ${p.conversations.length} conversations: ${p.conversations.join(', ')}.\n`,
        createdAt: at,
        updatedAt: at,
        trust: p.trust,
        importance: 0.5,
      });
      emit({ kind: 'noteAdded', scope: p.scope, id });
      return { scope: p.scope, id, summary: p.text, sources: p.sources.length };
    },

    async importFolder(req) {
      record('importFolder', [req]);
      if (!req.path.trim()) throw fail('invalid_input', 'Choose a folder to import.');
      if (!req.path.startsWith('/') && !/^[A-Za-z]:\\/.test(req.path)) {
        throw fail('invalid_input', `"${req.path}" is not a full folder path.`);
      }
      const total = 4;
      for (let done = 0; done <= total; done++) {
        await tick();
        emit({ kind: 'indexProgress', task: 'import', done, total, current: done < total ? `${req.path}/note-${done}.md` : null, finished: done === total });
      }
      const scope = req.scope ?? 'user';
      const now = Date.now();
      for (let i = 0; i < total; i++) {
        const n: FakeNote = { scope, id: `imported-${i}`, summary: `Imported note ${i + 1}`, noteType: null, tags: ['imported'], body: `From ${req.path}.\n`, createdAt: now, updatedAt: now, trust: 'ingested', importance: 0.5 };
        notes.set(key(scope, n.id), n);
        emit({ kind: 'noteAdded', scope, id: n.id });
      }
      const report: ImportReport = { scope, files: total, added: total, updated: 0, unchanged: 0, flaggedSecrets: 0, skipped: [], keptEdited: [], attachments: 0 };
      return report;
    },

    async getSettings() {
      record('getSettings', []);
      await tick();
      return { ...settings };
    },

    async setSettings(patch: SettingsPatch) {
      record('setSettings', [patch]);
      await tick();
      if (patch.conversationCapture !== undefined && settings.conversationCaptureEnv && patch.conversationCapture !== settings.conversationCapture) {
        throw fail('config', 'MEMORIA_CONVERSATIONS__CAPTURE is set in the environment, and it decides whether conversations are captured: remove it from the environment to change this here');
      }
      settings = { ...settings, ...patch };
      return { ...settings };
    },

    async listConversations() {
      record('listConversations', []);
      await tick();
      return conversations.map((c) => ({ ...c.row })).sort((a, b) => (b.lastAt ?? 0) - (a.lastAt ?? 0));
    },

    async conversationMessages(id, scope = null) {
      record('conversationMessages', [id, scope]);
      await tick();
      return conversation(id, scope).messages.map((m) => ({ ...m }));
    },

    async forgetConversation(id, scope = null) {
      record('forgetConversation', [id, scope]);
      await tick();
      const c = conversation(id, scope);
      conversations.splice(conversations.indexOf(c), 1);
      const derived = c.extract ? (c.extract.summary ? 1 : 0) + c.extract.facts.length : 0;
      return { scope: c.row.scope, conversation: c.row.id, messages: c.messages.length, derived };
    },

    async conversationStats() {
      record('conversationStats', []);
      await tick();
      const texts = conversations.flatMap((c) => c.messages.map((m) => m.text));
      const textBytes = texts.reduce((n, x) => n + new TextEncoder().encode(x).length, 0);
      return { conversations: conversations.length, messages: texts.length, textBytes, fileBytes: 4096 + Math.ceil(textBytes / 2), capture: settings.conversationCapture };
    },

    async conversationExtract(id, scope = null) {
      record('conversationExtract', [id, scope]);
      await tick();
      const c = conversation(id, scope);
      return c.extract ? structuredClone(c.extract) : { summary: null, facts: [], entities: [] };
    },

    async conversationFacts(query) {
      record('conversationFacts', [query]);
      await tick();
      const needle = (query.text ?? '').trim().toLowerCase();
      const all = conversations.flatMap((c) =>
        (c.extract?.facts ?? []).map(
          (f): EpisodicFact => ({
            ...structuredClone(f),
            scope: c.row.scope,
            conversation: c.row.id,
            messages: c.messages
              .filter((m) => f.sources.includes(m.key))
              .map((m) => ({ key: m.key, messageId: m.messageId, seq: m.seq, role: m.role, speaker: m.speaker, at: m.at ?? 0 })),
          }),
        ),
      );
      const matching = all
        .filter((f) => query.replaced || f.validTo === null)
        .filter((f) => !needle || [f.subject, f.attribute, f.value].some((x) => x.toLowerCase().includes(needle)))
        .sort((a, b) => (b.validFrom ?? 0) - (a.validFrom ?? 0));
      return { facts: matching.slice(0, Math.min(query.limit ?? 500, 500)), total: matching.length };
    },

    async listWorking() {
      record('listWorking', []);
      await tick();
      const now = Date.now();
      return working.filter((b) => b.expiresAt > now).map((b) => ({ ...b })).sort((a, b) => b.createdAt - a.createdAt);
    },

    async removeWorking(blockKey) {
      record('removeWorking', [blockKey]);
      await tick();
      const i = working.findIndex((b) => b.key === blockKey && b.expiresAt > Date.now());
      if (i < 0) throw fail('not_found', `no working block ${blockKey} here: it expired or was removed`);
      working.splice(i, 1);
    },

    async captureLedger(limit = 100) {
      record('captureLedger', [limit]);
      await tick();
      return captureRuns.slice(-limit).reverse().map((r) => structuredClone(r));
    },

    async quarantineOverview() {
      record('quarantineOverview', []);
      await tick();
      const found = new Map<string, QuarantineProvider>();
      for (const c of conversations) {
        for (const m of c.messages) {
          if (m.role !== 'assistant' && m.role !== 'tool') continue;
          for (const [kind, name] of [['host', c.row.host], ['model', m.model]] as const) {
            if (!name) continue;
            const p = found.get(`${kind}:${name}`) ?? { kind, name, recallable: 0 };
            if (m.quarantined === null) p.recallable += 1;
            found.set(`${kind}:${name}`, p);
          }
        }
      }
      const providers = [...found.values()].sort((a, b) => a.kind.localeCompare(b.kind) || a.name.localeCompare(b.name));
      return { quarantines: structuredClone(quarantines), providers };
    },

    async quarantinePreview(selection) {
      record('quarantinePreview', [selection]);
      await tick();
      return quarantinePlan(selection).counts;
    },

    async quarantineApply(selection) {
      record('quarantineApply', [selection]);
      await tick();
      const plan = quarantinePlan(selection);
      const c = plan.counts;
      if (c.messages + c.facts + c.summaries + c.notes === 0) return { id: null, counts: c };
      const id = `q${Date.now()}-${quarantines.length + 1}`;
      const mark = `quarantine:${id}`;
      const undo: (() => void)[] = [];
      for (const m of plan.messages) {
        m.quarantined = mark;
        undo.push(() => {
          if (m.quarantined === mark) m.quarantined = null;
        });
      }
      for (const f of plan.facts) {
        const prior = f.trust;
        f.trust = 'quarantined';
        undo.push(() => (f.trust = prior));
      }
      for (const conv of plan.summaries) {
        hiddenSummaries.add(conv);
        undo.push(() => hiddenSummaries.delete(conv));
      }
      undos.set(id, undo);
      quarantines.unshift({ id, createdAt: Date.now(), selection: structuredClone(selection), counts: c, notes: [], releasedAt: null, release: null });
      return { id, counts: c };
    },

    async quarantineRelease(id) {
      record('quarantineRelease', [id]);
      await tick();
      const q = quarantines.find((x) => x.id === id);
      if (!q) throw fail('not_found', `no quarantine ${id}: the history lists the quarantines there are`);
      if (q.releasedAt !== null) throw fail('invalid_input', `quarantine ${id} was released already: nothing to release`);
      for (const u of undos.get(id) ?? []) u();
      q.releasedAt = Date.now();
      q.release = { id, messages: q.counts.messages, derived: q.counts.facts + q.counts.summaries, rederived: 0, notes: 0, renamed: [], missing: [], failed: [] };
      return structuredClone(q.release);
    },

    async onEvent(handler) {
      listeners.add(handler);
      return () => listeners.delete(handler);
    },
  };
  return be;
}
