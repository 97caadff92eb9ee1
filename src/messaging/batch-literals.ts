// Builds one batch's PostgreSQL array literals directly from stored messages: a few string appends per
// record instead of postgres.js serialising fourteen JS arrays (measured: the larger half of the
// writer's CPU per row).
import type { BatchLiterals } from './queries.js';
import type { StoredMessage } from './types.js';

/** One publish in a batch: the messages of one SenML pack and where they came from (its workspace is the channel's). */
export interface BatchItem {
  workspaceId: string;
  messages: StoredMessage[];
}

const NEEDS_ESCAPE = /["\\]/;
const ESCAPE = /["\\]/g;

/** An array element that may hold anything: always quoted, so 'NULL', commas and braces stay text. */
function quoted(s: string): string {
  return NEEDS_ESCAPE.test(s) ? `"${s.replace(ESCAPE, '\\$&')}"` : `"${s}"`;
}

function textOrNull(s: string | null): string {
  return s === null ? 'NULL' : quoted(s);
}

function numOrNull(n: number | null | undefined): string {
  return n === null || n === undefined ? 'NULL' : String(n);
}

function hasExtra(m: StoredMessage): boolean {
  return m.stringValue !== null || m.boolValue !== null || m.dataValue !== null || m.sum !== null
    || (m.updateTime !== null && m.updateTime !== undefined);
}

function sameSource(a: StoredMessage, b: StoredMessage | undefined): boolean {
  return b !== undefined && a.publisher === b.publisher && a.channel === b.channel && a.protocol === b.protocol && a.subtopic === b.subtopic;
}

export function buildBatch(items: readonly BatchItem[]): BatchLiterals {
  let workspaces = '';
  let channels = '';
  let publishers = '';
  let protocols = '';
  let subtopics = '';
  let publish = '';
  let names = '';
  let units = '';
  let times = '';
  let values = '';
  let extra = false;
  let first = true;
  // Publishes from the same device to the same channel and subtopic share one source entry, so the
  // database parses their ids once per batch rather than once per publish.
  const sources = new Map<string, string>();
  let previous: StoredMessage | undefined;
  let number = '';
  // Rows per channel for message_counts; a batch nearly always holds one or a few channels.
  const perChannel = new Map<string, number>();
  for (let p = 0; p < items.length; p++) {
    const item = items[p] as BatchItem;
    const head = item.messages[0] as StoredMessage;
    // A device publishing again and again to one channel takes the source of the publish before it,
    // without building and hashing a key.
    if (!sameSource(head, previous)) {
      const key = `${head.publisher}${head.channel}${head.protocol}${head.subtopic ?? ''}${head.subtopic === null ? '0' : '1'}`;
      const known = sources.get(key);
      if (known !== undefined) number = known;
      else {
        const sep = sources.size === 0 ? '' : ',';
        number = String(sources.size + 1);
        sources.set(key, number);
        // uuids and protocol names never need quoting.
        workspaces += sep + item.workspaceId;
        channels += sep + head.channel;
        publishers += sep + head.publisher;
        protocols += sep + head.protocol;
        subtopics += sep + textOrNull(head.subtopic);
      }
    }
    previous = head;
    perChannel.set(head.channel, (perChannel.get(head.channel) ?? 0) + item.messages.length);
    for (const m of item.messages) {
      const s = first ? '' : ',';
      first = false;
      publish += s + number;
      // Names are limited to SenML's character set: no quote or backslash can occur.
      names += `${s}"${m.name}"`;
      units += s + textOrNull(m.unit);
      times += s + String(m.time);
      values += s + numOrNull(m.value);
      if (!extra && hasExtra(m)) extra = true;
    }
  }
  return {
    workspaces: `{${workspaces}}`, channels: `{${channels}}`, publishers: `{${publishers}}`, protocols: `{${protocols}}`,
    subtopics: `{${subtopics}}`, publish: `{${publish}}`, names: `{${names}}`, units: `{${units}}`, times: `{${times}}`,
    values: `{${values}}`, extra: extra ? buildExtra(items) : null, counted: countedLiterals(perChannel),
  };
}

function countedLiterals(perChannel: ReadonlyMap<string, number>): BatchLiterals['counted'] {
  let channels = '';
  let messages = '';
  for (const [channel, n] of perChannel) {
    const sep = channels === '' ? '' : ',';
    channels += sep + channel;
    messages += sep + String(n);
  }
  return { channels: `{${channels}}`, messages: `{${messages}}` };
}

/** The rarer columns, built only for batches that need them. */
function buildExtra(items: readonly BatchItem[]): NonNullable<BatchLiterals['extra']> {
  let strings = '';
  let bools = '';
  let data = '';
  let sums = '';
  let updateTimes = '';
  let first = true;
  for (const item of items) {
    for (const m of item.messages) {
      const s = first ? '' : ',';
      first = false;
      strings += s + textOrNull(m.stringValue);
      bools += s + (m.boolValue === null ? 'NULL' : m.boolValue ? 't' : 'f');
      // base64url: no quoting needed, but quoted anyway so an empty string is not read as an empty element.
      data += s + (m.dataValue === null ? 'NULL' : `"${m.dataValue}"`);
      sums += s + numOrNull(m.sum);
      updateTimes += s + numOrNull(m.updateTime);
    }
  }
  return { strings: `{${strings}}`, bools: `{${bools}}`, data: `{${data}}`, sums: `{${sums}}`, updateTimes: `{${updateTimes}}` };
}
