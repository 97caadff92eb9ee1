// One batch's array literals: publishes share a source entry per device, channel, protocol and subtopic,
// whether they follow each other or not, and each row points at its own source; rows are counted per channel.
import t from 'tap';
import { buildBatch, type BatchItem } from '../../src/messaging/batch-literals.js';
import type { StoredMessage } from '../../src/messaging/types.js';

const WS = '00000000-0000-4000-8000-000000000001';
const [A, B] = ['00000000-0000-4000-8000-0000000000a1', '00000000-0000-4000-8000-0000000000b1'];
const [CH1, CH2] = ['00000000-0000-4000-8000-0000000000c1', '00000000-0000-4000-8000-0000000000c2'];

function item(publisher: string, channel: string, name: string, subtopic: string | null = null, records = 1): BatchItem {
  const messages: StoredMessage[] = Array.from({ length: records }, (_, i) => ({
    channel, publisher, protocol: 'http', subtopic, name: `${name}${i}`, unit: null, time: 1_700_000_000 + i, value: i,
    stringValue: null, boolValue: null, dataValue: null, sum: null,
  }));
  return { workspaceId: WS, messages };
}

t.test('sources are shared by equal publishes, in a row or apart', async (t) => {
  // A->CH1 twice in a row, B->CH1, A->CH1 again, A->CH2, A->CH1 with a subtopic, then A->CH1 with 2 records.
  const b = buildBatch([item(A, CH1, 'a'), item(A, CH1, 'b'), item(B, CH1, 'c'), item(A, CH1, 'd'), item(A, CH2, 'e'),
    item(A, CH1, 'f', 'x'), item(A, CH1, 'g', null, 2)]);
  t.equal(b.publish, '{1,1,2,1,3,4,1,1}');
  t.equal(b.publishers, `{${A},${B},${A},${A}}`);
  t.equal(b.channels, `{${CH1},${CH1},${CH2},${CH1}}`);
  t.equal(b.subtopics, '{NULL,NULL,NULL,"x"}');
  t.equal(b.workspaces, `{${WS},${WS},${WS},${WS}}`);
  t.equal(b.names, '{"a0","b0","c0","d0","e0","f0","g0","g1"}');
  t.equal(b.times, '{1700000000,1700000000,1700000000,1700000000,1700000000,1700000000,1700000000,1700000001}');
  t.equal(b.extra, null);
  // Counters per channel, whatever the sources: CH1 has 7 rows (the 2-record publish counts 2), CH2 one.
  t.same(b.counted, { channels: `{${CH1},${CH2}}`, messages: '{7,1}' });
});

t.test('a subtopic named like the absence of one is a source of its own', async (t) => {
  const b = buildBatch([item(A, CH1, 'a', null), item(A, CH1, 'b', ''), item(A, CH1, 'c', null)]);
  t.equal(b.publish, '{1,2,1}');
  t.equal(b.subtopics, '{NULL,""}');
});
