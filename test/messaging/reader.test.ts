// Reader paging, ordering, filters and totals; partition upkeep (ahead, default-partition rescue, retention).
import t, { type Test } from 'tap';
import { AUTH_ENV, adminToken } from '../helpers/auth.js';
import { startTestService } from '../helpers/service.js';
import { grant, insertDevice, publish, read, world } from './helpers.js';

const ts = await startTestService(t, { ...AUTH_ENV, SVC_READER_DEFAULT_LIMIT: '5', SVC_READER_MAX_LIMIT: '20', SVC_MESSAGES_RETENTION_DAYS: '3' });
const a = await world(ts, 'ws-read');
const admin = `Bearer ${await adminToken(ts)}`;
const BT = 1_700_000_000;

// 25 records over three packs, interleaving two names; times are not in publish order.
const packs = [
  Array.from({ length: 10 }, (_, i) => ({ n: i % 2 ? 'temp' : 'hum', v: i, t: i * 10, ...(i === 0 ? { bt: BT } : {}) })),
  Array.from({ length: 10 }, (_, i) => ({ n: i % 2 ? 'temp' : 'hum', v: 10 + i, t: 5 + i * 10, ...(i === 0 ? { bt: BT } : {}) })),
  Array.from({ length: 5 }, (_, i) => ({ n: 'temp', v: 20 + i, t: -100 - i, ...(i === 0 ? { bt: BT } : {}) })),
];
for (const p of packs) {
  const res = await publish(ts, a.ws, a.channel, a.publisher.key, p);
  if (res.status !== 202) throw new Error(`setup publish answered ${res.status}: ${await res.text()}`);
}
const allTimes = packs.flatMap((p) => p.map((r) => BT + r.t)).sort((x, y) => y - x);

/** Each query answers 400 with exactly its message, on the given channel. */
async function expectRefused(t: Test, ws: string, channel: string, refused: [query: string, message: string][]) {
  for (const [query, message] of refused) {
    const res = await read(ts, ws, channel, admin, query);
    t.equal(res.status, 400, query);
    t.same(res.body, { error: message }, query);
  }
}

t.test('pages are newest first, default and explicit limits, exact totals', async (t) => {
  const first = await read(ts, a.ws, a.channel, admin);
  t.match(first.body, { offset: 0, limit: 5, format: 'messages', total: 25 });
  t.same(first.body.messages.map((m: any) => m.time), allTimes.slice(0, 5));
  const seen: number[] = [];
  for (let offset = 0; offset < 30; offset += 7) {
    const page = await read(ts, a.ws, a.channel, admin, `offset=${offset}&limit=7`);
    t.equal(page.body.total, 25);
    t.equal(page.body.offset, offset);
    seen.push(...page.body.messages.map((m: any) => m.time));
  }
  t.same(seen, allTimes, 'pages cover every message once, in order');
  t.same((await read(ts, a.ws, a.channel, admin, 'offset=100')).body.messages, []);
});

t.test('filters: name, from, to (inclusive); totals follow the filters', async (t) => {
  const temp = await read(ts, a.ws, a.channel, admin, 'name=temp&limit=20');
  t.equal(temp.body.total, 15);
  t.ok(temp.body.messages.every((m: any) => m.name === 'temp'));
  const window = await read(ts, a.ws, a.channel, admin, `from=${BT}&to=${BT + 45}&limit=20`);
  t.same(window.body.messages.map((m: any) => m.time), allTimes.filter((x) => x >= BT && x <= BT + 45));
  t.equal(window.body.total, 10);
  const both = await read(ts, a.ws, a.channel, admin, `name=temp&to=${BT - 101}`);
  t.same(both.body.messages.map((m: any) => m.value), [21, 22, 23, 24]);
  t.equal(both.body.total, 4);
  t.equal((await read(ts, a.ws, a.channel, admin, `from=${BT + 10}&to=${BT}`)).status, 400);
});

t.test('offset, limit, from and to take decimal notation only; anything else is a 400 naming the parameter', async (t) => {
  await expectRefused(t, a.ws, a.channel, [
    ['limit=0', "'limit' must be an integer from 1 to 20"],
    ['limit=21', "'limit' must be an integer from 1 to 20"],
    ['limit=-1', "'limit' must be an integer from 1 to 20"],
    ['limit=2.5', "'limit' must be an integer from 1 to 20"],
    ['limit=0x10', "'limit' must be an integer from 1 to 20"],
    ['limit=1e1', "'limit' must be an integer from 1 to 20"],
    ['limit=%2010', "'limit' must be an integer from 1 to 20"],
    ['limit=ten', "'limit' must be an integer from 1 to 20"],
    ['offset=-1', "'offset' must be an integer from 0 to 1000000000"],
    ['offset=99999999999999999999', "'offset' must be an integer from 0 to 1000000000"],
    ['from=0x10', "'from' must be a time in seconds"],
    ['from=Infinity', "'from' must be a time in seconds"],
    ['to=1e999', "'to' must be a time in seconds"],
    ['to=%201', "'to' must be a time in seconds"],
  ]);
  // What decimal notation allows: leading zeros, signs, fractions and exponents on times.
  t.equal((await read(ts, a.ws, a.channel, admin, 'limit=020')).body.limit, 20);
  t.equal((await read(ts, a.ws, a.channel, admin, `from=%2B${BT}.0&to=1.7000001e9`)).body.total, 20); // BT to BT + 100
  t.equal((await read(ts, a.ws, a.channel, admin, `from=-1.5e3&to=.5`)).body.total, 0);
});

t.test('filters: subtopic (exact), publisher and protocol; each refused with a 400 naming it when malformed', async (t) => {
  // A channel of its own: the partition test below counts the first channel's rows.
  const b = await world(ts, 'ws-read-filters');
  const other = await insertDevice(ts, b.ws);
  await grant(ts, b.ws, other.id, b.channel, ['publish']);
  const send = async (key: string, pack: unknown, subtopic?: string) => {
    const res = await publish(ts, b.ws, b.channel, key, pack, subtopic ? { subtopic } : {});
    t.equal(res.status, 202, `publish ${subtopic ?? '(no subtopic)'}`);
  };
  await send(b.publisher.key, [{ bn: 'plain:', n: 'a', v: 1, bt: BT }, { n: 'b', v: 2, t: -1 }]);
  await send(b.publisher.key, [{ n: 'room', v: 3, bt: BT + 1 }], 'room.1');
  await send(other.key, [{ n: 'deep', v: 4, bt: BT + 2 }], 'room.1/temp');
  // The MQTT hook's entry point into the same pipeline, as a broker PUBLISH reaches it.
  await ts.service.messaging.publishWithKey(other.key, {
    workspaceId: b.ws, channelId: b.channel, subtopic: null, protocol: 'mqtt',
    payload: JSON.stringify([{ n: 'over.mqtt', v: 5, bt: BT + 3 }]), contentType: 'application/senml+json',
  });
  const names = async (query: string) => {
    const res = await read(ts, b.ws, b.channel, admin, query);
    t.equal(res.status, 200, query);
    return { names: res.body.messages.map((m: any) => m.name), total: res.body.total };
  };
  t.same(await names(''), { names: ['over.mqtt', 'deep', 'room', 'plain:a', 'plain:b'], total: 5 });
  t.same(await names('subtopic=room.1'), { names: ['room'], total: 1 }, 'exact: room.1/temp is not under it');
  t.same(await names('subtopic=room.1%2Ftemp'), { names: ['deep'], total: 1 });
  t.same(await names(`publisher=${other.id}`), { names: ['over.mqtt', 'deep'], total: 2 });
  t.same(await names(`publisher=${other.id.toUpperCase()}`), { names: ['over.mqtt', 'deep'], total: 2 }, 'any case');
  t.same(await names('protocol=mqtt'), { names: ['over.mqtt'], total: 1 });
  t.same(await names('protocol=http&limit=2'), { names: ['deep', 'room'], total: 4 });
  t.same(await names(`protocol=http&publisher=${b.publisher.id}&subtopic=room.1`), { names: ['room'], total: 1 });
  const mqttRow = (await read(ts, b.ws, b.channel, admin, 'protocol=mqtt')).body.messages[0];
  t.match(mqttRow, { protocol: 'mqtt', publisher: other.id, name: 'over.mqtt', value: 5 });

  await expectRefused(t, b.ws, b.channel, [
    ['subtopic=room%201', "'subtopic': subtopic segments are 1-64 letters, digits or _ . : -"],
    ['subtopic=room.1%2F%2Ftemp', "'subtopic': subtopic segments are 1-64 letters, digits or _ . : -"],
    ['publisher=someone', "'publisher' must be a UUID"],
    ['protocol=amqp', "'protocol' must be http, mqtt or coap"],
    ['protocol=HTTP', "'protocol' must be http, mqtt or coap"],
  ]);

  // Filters narrow what a reader may see; they never widen it: a device of another workspace is
  // refused with them exactly as without them, and the first workspace's device cannot read this channel.
  const outsider = await world(ts, 'ws-read-filters-outsider');
  const plain = await read(ts, b.ws, b.channel, `Client ${outsider.publisher.key}`);
  const filtered = await read(ts, b.ws, b.channel, `Client ${outsider.publisher.key}`, `publisher=${other.id}&protocol=mqtt`);
  t.equal(plain.status, 403);
  t.same(filtered, plain);
  const publishOnly = await read(ts, b.ws, b.channel, `Client ${other.key}`, `publisher=${other.id}`);
  t.equal(publishOnly.status, 403, 'publish without subscribe reads nothing, filtered to its own messages or not');
});

t.test('value filters: v with a comparator (eq by default), vb, vs, vd; malformed ones refused naming the parameter', async (t) => {
  const c = await world(ts, 'ws-read-values');
  const res = await publish(ts, c.ws, c.channel, c.publisher.key, [
    { bn: 'n', bt: BT, n: '1', v: 1 }, { n: '2', v: 2, t: 1 }, { n: '3', v: 3, t: 2 }, { n: '4', v: 4, t: 3 },
    { n: 'open', vs: 'open', t: 4 }, { n: 'on', vb: true, t: 5 }, { n: 'off', vb: false, t: 6 }, { n: 'blob', vd: 'AQID', t: 7 },
  ]);
  t.equal(res.status, 202);
  const names = async (query: string) => {
    const page = await read(ts, c.ws, c.channel, admin, query);
    t.equal(page.status, 200, query);
    t.equal(page.body.total, page.body.messages.length, `${query}: total follows the filter`);
    return page.body.messages.map((m: any) => m.name);
  };
  t.same(await names('v=2'), ['n2']);
  t.same(await names('v=2&comparator=eq'), ['n2']);
  t.same(await names('v=2&comparator=lt'), ['n1']);
  t.same(await names('v=2&comparator=le'), ['n2', 'n1']);
  t.same(await names('v=2.5&comparator=gt'), ['n4', 'n3']);
  t.same(await names('v=2&comparator=ge'), ['n4', 'n3', 'n2']);
  t.same(await names('v=-1e3&comparator=gt&name=n1'), ['n1'], 'combines with the other filters');
  t.same(await names('vb=true'), ['non']);
  t.same(await names('vb=false'), ['noff']);
  t.same(await names('vs=open'), ['nopen']);
  t.same(await names('vd=AQID'), ['nblob']);
  t.same(await names("vs=%27%20or%201%3D1%20--"), [], 'a value, never statement text');
  t.same(await names('v=1&vb=true'), [], 'one message holds one kind of value');

  await expectRefused(t, c.ws, c.channel, [
    ['v=abc', "'v' must be a number"],
    ['v=0x10', "'v' must be a number"],
    ['comparator=gt', "'comparator' applies to 'v', which is missing"],
    ['v=1&comparator=ne', "'comparator' must be eq, lt, le, gt or ge"],
    ['v=1&comparator=%3E', "'comparator' must be eq, lt, le, gt or ge"],
    ['vb=yes', "'vb' must be true or false"],
  ]);
});

t.test('partitions: created ahead, a day that landed in DEFAULT moves into its partition, retention drops old days', async (t) => {
  const sql = ts.service.sql;
  const partitions = async () => (await sql<{ name: string }[]>`
    select c.relname as name from pg_inherits i join pg_class c on c.oid = i.inhrelid
    where i.inhparent = 'messages'::regclass order by 1`).map((r) => r.name);
  const day = (offset: number) => new Date(Date.now() + offset * 86_400_000).toISOString().slice(0, 10);
  const name = (offset: number) => `messages_p${day(offset).replaceAll('-', '')}`;
  const initial = await partitions();
  for (let i = 0; i <= 7; i++) t.ok(initial.includes(name(i)), `${name(i)} exists at start`);
  t.ok(initial.includes('messages_default'));
  t.notOk(initial.includes(name(8)));

  // Rows for a day without a partition go to DEFAULT. (The writer stamps received_at with now(): a row of
  // a future day is inserted here by hand, counted the way the writer's statement counts.)
  const ch = a.channel;
  await sql`with stored as (
              insert into messages (received_at, time, workspace_id, channel_id, publisher_id, protocol, name, value)
              values (${`${day(10)} 12:00:00+00`}, 1, ${a.ws}, ${ch}, ${a.publisher.id}, 'http', 'future', 1))
            insert into message_counts (channel_id, day, messages) values (${ch}, ${day(10)}, 1)`;
  const [where] = await sql<{ part: string }[]>`select tableoid::regclass::text as part from messages where name = 'future'`;
  t.equal(where!.part, 'messages_default');
  t.equal((await read(ts, a.ws, ch, admin)).body.total, 26);

  // Maintenance "nine days later" creates days 9..16; day 10's row moves out of DEFAULT.
  t.equal(await ts.service.messaging.runMaintenance(new Date(Date.now() + 9 * 86_400_000)), true);
  const later = await partitions();
  t.ok(later.includes(name(10)) && later.includes(name(16)));
  const [moved] = await sql<{ part: string }[]>`select tableoid::regclass::text as part from messages where name = 'future'`;
  t.equal(moved!.part, name(10), 'moved into its own partition');
  // Retention (3 days) at "day 9": partitions of days 0..5 are gone with their rows and counters.
  for (let i = 0; i <= 5; i++) t.notOk(later.includes(name(i)), `${name(i)} dropped`);
  t.ok(later.includes(name(6)), 'day 6 kept');
  const page = await read(ts, a.ws, ch, admin);
  t.equal(page.body.total, 1, 'only the day-10 message remains, and the total says so');
  t.equal(page.body.messages[0].name, 'future');
});

t.test('a read that outruns SVC_READER_STATEMENT_TIMEOUT_MS is cancelled with a 503 saying so', async (t) => {
  const bounded = await startTestService(t, { ...AUTH_ENV, SVC_READER_STATEMENT_TIMEOUT_MS: '1' });
  const w = await world(bounded, 'ws-read-bounded');
  // 50 000 rows of one channel: counting those a name filter keeps takes far longer than 1 ms (and the
  // insert stays light for the files running beside this one on the same database).
  await bounded.service.sql`
    insert into messages (workspace_id, channel_id, publisher_id, protocol, name, time, value)
    select ${w.ws}, ${w.channel}, ${w.publisher.id}, 'http', 'n' || (i % 7), ${BT} + i, i from generate_series(1, 50000) i`;
  const res = await read(bounded, w.ws, w.channel, `Bearer ${await adminToken(bounded)}`, 'name=n3');
  t.equal(res.status, 503);
  t.same(res.body, { error: 'query cancelled: it ran longer than the statement timeout allows' });
});
