// Publish topics and subscription filters of the messaging domain; the subtopic rule is the HTTP one.
import t from 'tap';
import { filterMatches, parsePublishTopic, parseSubscribeFilter } from '../../src/mqtt/topics.js';

const WS = '6a1e3b52-47b1-4ad6-9a8e-6a3cf1b0c001';
const CH = '6a1e3b52-47b1-4ad6-9a8e-6a3cf1b0c002';
const base = `m/${WS}/c/${CH}`;

t.test('publish topics: the channel, then a subtopic under the same rule as HTTP', async (t) => {
  t.same(parsePublishTopic(base), { workspaceId: WS, channelId: CH, subtopic: null });
  t.same(parsePublishTopic(`${base}/room-1/temp_a:b.c`), { workspaceId: WS, channelId: CH, subtopic: 'room-1/temp_a:b.c' });
  t.same(parsePublishTopic(`${base}/${Array(16).fill('s').join('/')}`)?.subtopic, Array(16).fill('s').join('/'), '16 segments');
  for (const [why, topic] of [
    ['17 segments', `${base}/${Array(17).fill('s').join('/')}`],
    ['an empty segment', `${base}/a//b`],
    ['a trailing slash', `${base}/`],
    ['a NUL', `${base}/a\u0000b`],
    ['a space', `${base}/room 1`],
    ['a 65-character segment', `${base}/${'x'.repeat(65)}`],
    ['non-ASCII', `${base}/küche`],
    ['not a channel topic', `m/${WS}/x/${CH}`],
    ['no UUID', `m/abc/c/${CH}`],
  ]) t.equal(parsePublishTopic(topic as string), null, why as string);
});

t.test('subscription filters: wildcards only after the channel', async (t) => {
  t.same(parseSubscribeFilter(`${base}/#`), { workspaceId: WS, channelId: CH, subtopic: '#' });
  t.same(parseSubscribeFilter(`${base}/+/temp`), { workspaceId: WS, channelId: CH, subtopic: '+/temp' });
  t.equal(parseSubscribeFilter(`m/+/c/${CH}`), null);
  t.equal(parseSubscribeFilter(`m/${WS}/c/#`), null);
  t.equal(parseSubscribeFilter(`${base}/#/x`), null);
});

t.test('filter matching, as MQTT defines it', async (t) => {
  for (const [filter, topic, expected] of [
    [base, base, true],
    [base, `${base}/a`, false],
    [`${base}/#`, base, true],
    [`${base}/#`, `${base}/a/b`, true],
    [`${base}/+`, `${base}/a`, true],
    [`${base}/+`, `${base}/a/b`, false],
    [`${base}/+`, base, false],
    [`${base}/+/temp`, `${base}/room/temp`, true],
    [`${base}/+/temp`, `${base}/room/hum`, false],
    [`${base}/a`, `${base}/b`, false],
  ] as const) {
    t.equal(filterMatches(filter, topic), expected, `${filter.slice(base.length) || '(channel)'} ${expected ? 'matches' : 'does not match'} ${topic.slice(base.length) || '(channel)'}`);
  }
});
