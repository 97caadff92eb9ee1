// HTTP publish → reader round trip with RFC 8428 resolution, and every refusal storing nothing.
import { gzipSync } from 'node:zlib';
import t from 'tap';
import { AUTH_ENV, accessTokenFor, adminToken } from '../helpers/auth.js';
import { gql, startTestService } from '../helpers/service.js';
import { countRows, grant, insertChannel, insertDevice, publish, read, world } from './helpers.js';

const ts = await startTestService(t, { ...AUTH_ENV, SVC_MESSAGING_MAX_MESSAGE_BYTES: '4096', SVC_MESSAGING_MAX_RECORDS: '50' });
const a = await world(ts, 'ws-a');
const admin = `Bearer ${await adminToken(ts)}`;

t.test('round trip: bn joining, bt + negative t, unit fallback, base value and sum, bver, value kinds', async (t) => {
  const bt = 1_700_000_000;
  const pack = [
    { bver: 10, bn: 'urn:dev:ow:10e2073a01080063:', bt, bu: 'Cel', n: 'temp', v: 23.5, t: -5 },
    { n: 'temp', v: 24, t: -1 },
    { n: 'hum', u: '%RH', v: 40 },
    { bv: 100, n: 'press', u: 'kPa', v: 1.5, t: 1 },
    { n: 'label', vs: 'kitchen' },
    { n: 'door', vb: true },
    { n: 'blob', vd: 'aGVsbG8' },
    { bs: 10, n: 'energy', u: 'kWh', s: 2.5 },
  ];
  const res = await publish(ts, a.ws, a.channel, a.publisher.key, pack);
  t.equal(res.status, 202);
  t.equal(await res.text(), '');
  const page = await read(ts, a.ws, a.channel, `Client ${a.publisher.key}`, 'limit=100');
  t.equal(page.status, 200);
  t.match(page.body, { offset: 0, limit: 100, format: 'messages', total: 8 });
  const byName = new Map<string, any>((page.body.messages as any[]).map((m) => [`${m.name}@${m.time}`, m]));
  const base = 'urn:dev:ow:10e2073a01080063:';
  const common = { channel: a.channel, publisher: a.publisher.id, protocol: 'http' };
  t.same(byName.get(`${base}temp@${bt - 5}`), { ...common, name: `${base}temp`, unit: 'Cel', time: bt - 5, value: 23.5 });
  t.same(byName.get(`${base}temp@${bt - 1}`), { ...common, name: `${base}temp`, unit: 'Cel', time: bt - 1, value: 24 });
  t.same(byName.get(`${base}hum@${bt}`), { ...common, name: `${base}hum`, unit: '%RH', time: bt, value: 40 });
  t.same(byName.get(`${base}press@${bt + 1}`), { ...common, name: `${base}press`, unit: 'kPa', time: bt + 1, value: 101.5 });
  t.same(byName.get(`${base}label@${bt}`), { ...common, name: `${base}label`, unit: 'Cel', time: bt, value: null, string_value: 'kitchen' });
  t.same(byName.get(`${base}door@${bt}`), { ...common, name: `${base}door`, unit: 'Cel', time: bt, value: null, bool_value: true });
  t.same(byName.get(`${base}blob@${bt}`), { ...common, name: `${base}blob`, unit: 'Cel', time: bt, value: null, data_value: 'aGVsbG8' });
  t.same(byName.get(`${base}energy@${bt}`), { ...common, name: `${base}energy`, unit: 'kWh', time: bt, value: null, sum: 12.5 });
  // Newest first.
  const times = (page.body.messages as any[]).map((m) => m.time);
  t.same(times, [...times].sort((x, y) => y - x));
});

t.test('text survives the batch literals: quotes, backslashes, braces, commas and the word NULL', async (t) => {
  const ch = await insertChannel(ts, a.ws);
  await grant(ts, a.ws, a.publisher.id, ch, ['publish']);
  const tricky = 'he said "hi" \\ {a,b} NULL \u00e9\u4e2d';
  const pack = [
    { bn: 'q:', n: 'a', u: 'NULL', vs: tricky, t: 1_700_000_000 },
    { n: 'b', u: '"x"', vs: 'NULL', t: 1_700_000_001 },
    { n: 'c', u: 'm\\s', vs: '', t: 1_700_000_002 },
    { n: 'd', vd: '', t: 1_700_000_003 },
  ];
  t.equal((await publish(ts, a.ws, ch, a.publisher.key, pack)).status, 202);
  const page = await read(ts, a.ws, ch, admin);
  const by = new Map<string, any>((page.body.messages as any[]).map((m) => [m.name, m]));
  const pick = (name: string) => {
    const m = by.get(name);
    return { unit: m.unit, string_value: m.string_value, data_value: m.data_value };
  };
  t.same(pick('q:a'), { unit: 'NULL', string_value: tricky, data_value: undefined });
  t.same(pick('q:b'), { unit: '"x"', string_value: 'NULL', data_value: undefined });
  t.same(pick('q:c'), { unit: 'm\\s', string_value: '', data_value: undefined });
  t.same(pick('q:d'), { unit: null, string_value: undefined, data_value: '' });
});

t.test('relative times (below 2^28) are taken from the receive time', async (t) => {
  const ch = await insertChannel(ts, a.ws);
  await grant(ts, a.ws, a.publisher.id, ch, ['publish']);
  const before = Date.now() / 1000;
  t.equal((await publish(ts, a.ws, ch, a.publisher.key, [{ n: 'x', v: 1, t: -60 }, { n: 'y', v: 2 }])).status, 202);
  const after = Date.now() / 1000;
  const page = await read(ts, a.ws, ch, admin);
  const x = page.body.messages.find((m: any) => m.name === 'x');
  const y = page.body.messages.find((m: any) => m.name === 'y');
  t.ok(x.time >= before - 61 && x.time <= after - 59, `x.time ${x.time} is about now - 60`);
  t.ok(y.time >= before - 1 && y.time <= after + 1, `y.time ${y.time} is about now`);
});

t.test('subtopics are stored and shown', async (t) => {
  t.equal((await publish(ts, a.ws, a.channel, a.publisher.key, [{ n: 'sub', v: 7 }], { subtopic: 'room1/sensors' })).status, 202);
  const page = await read(ts, a.ws, a.channel, admin, 'name=sub');
  t.equal(page.body.total, 1);
  t.equal(page.body.messages[0].subtopic, 'room1/sensors');
  t.equal((await publish(ts, a.ws, a.channel, a.publisher.key, [{ n: 'sub', v: 7 }], { subtopic: 'bad+wild' })).status, 400);
  const malformed = await publish(ts, a.ws, a.channel, a.publisher.key, [{ n: 'sub', v: 7 }], { subtopic: 'room%zz' });
  t.equal(malformed.status, 400, 'a malformed escape in the subtopic');
  t.same(await malformed.json(), { error: 'malformed percent-encoding in the request path' });
  const badChannel = await publish(ts, a.ws, '%E0%A4%A', a.publisher.key, [{ n: 'sub', v: 7 }]);
  t.equal(badChannel.status, 400, 'and in the channel id');
  t.equal((await read(ts, a.ws, a.channel, admin, 'name=sub')).body.total, 1, 'neither stored anything');
});

t.test('every refusal stores nothing', async (t) => {
  const ch = await insertChannel(ts, a.ws);
  await grant(ts, a.ws, a.publisher.id, ch, ['publish']);
  const other = await world(ts, 'ws-other');
  const noGrant = await insertDevice(ts, a.ws);
  const notChannel = await insertChannel(ts, a.ws, 'dash', 'dashboard');
  const ok = [{ n: 'temp', v: 1 }];
  const cases: [string, () => Promise<Response>, number, RegExp | string][] = [
    ['no Authorization', () => publish(ts, a.ws, ch, null, ok), 401, /Client/],
    ['unknown key', () => publish(ts, a.ws, ch, 'not-a-key', ok), 401, 'invalid device key'],
    ['bearer instead of Client', () => fetch(`${ts.url('messaging')}/http/m/${a.ws}/c/${ch}`, { method: 'POST', headers: { authorization: admin, 'content-type': 'application/senml+json' }, body: '[]' }), 401, /Client/],
    ['wrong content type', () => publish(ts, a.ws, ch, a.publisher.key, ok, { contentType: 'application/json' }), 415, /senml\+json/],
    ['no content type', () => publish(ts, a.ws, ch, a.publisher.key, ok, { contentType: null }), 415, /senml\+json/],
    ['no grant', () => publish(ts, a.ws, ch, noGrant.key, ok), 403, 'forbidden'],
    ['device of another workspace', () => publish(ts, a.ws, ch, other.publisher.key, ok), 403, /forbidden/],
    // A device cannot tell a missing channel from one it holds no grant on (issue 35.1): 'forbidden' alike.
    ['unknown channel', () => publish(ts, a.ws, '00000000-0000-0000-0000-00000000abcd', a.publisher.key, ok), 403, 'forbidden'],
    ['channel of another workspace', () => publish(ts, a.ws, other.channel, a.publisher.key, ok), 403, 'forbidden'],
    ['not a channel', () => publish(ts, a.ws, notChannel, a.publisher.key, ok), 403, 'forbidden'],
    ['not UTF-8', () => fetch(`${ts.url('messaging')}/http/m/${a.ws}/c/${ch}`, { method: 'POST', headers: { authorization: `Client ${a.publisher.key}`, 'content-type': 'application/senml+json' }, body: Buffer.from('[{"n":"temp","vs":"caf\xe9"}]', 'latin1') }), 400, 'payload is not valid UTF-8'],
    ['unpaired surrogate escape', () => publish(ts, a.ws, ch, a.publisher.key, '[{"n":"a","vs":"x\\ud800"}]'), 400, "record 0: field 'vs' holds an unpaired surrogate escape (\\uD800-\\uDFFF), which is not Unicode text"],
    ['malformed JSON', () => publish(ts, a.ws, ch, a.publisher.key, '[{"n":'), 400, 'payload is not valid JSON'],
    ['not an array', () => publish(ts, a.ws, ch, a.publisher.key, { n: 'x', v: 1 }), 400, /JSON array/],
    ['empty pack', () => publish(ts, a.ws, ch, a.publisher.key, []), 400, /at least one/],
    ['v not a number', () => publish(ts, a.ws, ch, a.publisher.key, [{ n: 'a', v: 1 }, { n: 'b', v: 2 }, { n: 'c', v: 'x' }]), 400, "record 2: field 'v' must be a number"],
    ['two value fields', () => publish(ts, a.ws, ch, a.publisher.key, [{ n: 'a', v: 1, vs: 'x' }]), 400, /record 0: has 2 value fields/],
    ['no value', () => publish(ts, a.ws, ch, a.publisher.key, [{ n: 'a', u: 'Cel' }]), 400, /record 0: needs a value/],
    ['no name', () => publish(ts, a.ws, ch, a.publisher.key, [{ v: 1 }]), 400, /record 0: field 'n' is required/],
    ['bad name', () => publish(ts, a.ws, ch, a.publisher.key, [{ n: '-temp', v: 1 }]), 400, /record 0: field 'n' resolves to '-temp'/],
    ['unsupported bver', () => publish(ts, a.ws, ch, a.publisher.key, [{ bver: 11, n: 'a', v: 1 }]), 400, /field 'bver' is 11/],
    ['changing bver', () => publish(ts, a.ws, ch, a.publisher.key, [{ bver: 10, n: 'a', v: 1 }, { bver: 5, n: 'b', v: 1 }]), 400, /record 1: field 'bver' must be the same/],
    ['must-understand field', () => publish(ts, a.ws, ch, a.publisher.key, [{ n: 'a', v: 1, foo_: 1 }]), 400, /field 'foo_' is a must-understand/],
    ['bad base time', () => publish(ts, a.ws, ch, a.publisher.key, [{ bt: '1', n: 'a', v: 1 }]), 400, "record 0: field 'bt' must be a number"],
    ['vd not base64url', () => publish(ts, a.ws, ch, a.publisher.key, [{ n: 'a', vd: 'a+b/' }]), 400, /field 'vd'/],
    ['too many records', () => publish(ts, a.ws, ch, a.publisher.key, Array.from({ length: 51 }, (_, i) => ({ n: `r${i}`, v: i }))), 400, /at most 50/],
    ['body over the limit', () => publish(ts, a.ws, ch, a.publisher.key, [{ n: 'a', vs: 'x'.repeat(5000) }]), 413, /4096/],
    // A coded body would be read as plain text: a gzip body failed as 'not valid JSON', and a plain one
    // declared gzip was stored.
    ['gzip body', () => fetch(`${ts.url('messaging')}/http/m/${a.ws}/c/${ch}`, { method: 'POST', headers: { authorization: `Client ${a.publisher.key}`, 'content-type': 'application/senml+json', 'content-encoding': 'gzip' }, body: gzipSync(JSON.stringify(ok)) }), 415, "content encoding 'gzip' is not supported; send the body uncompressed"],
    ['plain body declared gzip', () => fetch(`${ts.url('messaging')}/http/m/${a.ws}/c/${ch}`, { method: 'POST', headers: { authorization: `Client ${a.publisher.key}`, 'content-type': 'application/senml+json', 'content-encoding': 'gzip' }, body: JSON.stringify(ok) }), 415, /content encoding 'gzip'/],
    ['PUT instead of POST', () => fetch(`${ts.url('messaging')}/http/m/${a.ws}/c/${ch}`, { method: 'PUT', headers: { authorization: `Client ${a.publisher.key}`, 'content-type': 'application/senml+json' }, body: JSON.stringify(ok) }), 405, 'method not allowed: PUT; allowed: POST'],
  ];
  for (const [why, call, status, message] of cases) {
    const res = await call();
    t.equal(res.status, status, why);
    const body = (await res.json()) as { error: string };
    if (typeof message === 'string') t.equal(body.error, message, why);
    else t.match(body.error, message, why);
  }
  t.equal(await countRows(ts, ch), 0, 'nothing stored');
  t.equal(await countRows(ts, notChannel), 0);
  t.equal(await countRows(ts, other.channel), 0);
  t.equal((await publish(ts, a.ws, ch, a.publisher.key, ok)).status, 202, 'and the same device can publish a valid pack');
  t.equal(await countRows(ts, ch), 1);
});

t.test('a disabled device and a frozen workspace are refused', async (t) => {
  const ws = await world(ts, 'ws-states');
  await ts.service.sql`update entities set status = 'inactive' where id = ${ws.publisher.id}`;
  await ts.service.auth.invalidate({ entities: [ws.publisher.id] });
  await ts.service.authz.invalidate({ kind: 'subjects', entityIds: [ws.publisher.id] });
  t.equal((await publish(ts, ws.ws, ws.channel, ws.publisher.key, [{ n: 'a', v: 1 }])).status, 403);
  const dev = await insertDevice(ts, ws.ws);
  await grant(ts, ws.ws, dev.id, ws.channel, ['publish']);
  await ts.service.sql`update tenants set status = 'frozen' where id = ${ws.ws}`;
  await ts.service.authz.invalidate({ kind: 'tenants', tenantIds: [ws.ws] });
  await ts.service.auth.invalidate({ tenants: [ws.ws] });
  const res = await publish(ts, ws.ws, ws.channel, dev.key, [{ n: 'a', v: 1 }]);
  t.equal(res.status, 403);
  t.match(((await res.json()) as any).error, /tenant is frozen/);
  t.equal(await countRows(ts, ws.channel), 0);
});

t.test('reader: bearer with read, device with subscribe; others refused', async (t) => {
  const other = await world(ts, 'ws-reader-other');
  const publishOnly = await insertDevice(ts, a.ws);
  await grant(ts, a.ws, publishOnly.id, a.channel, ['publish']);
  t.equal((await read(ts, a.ws, a.channel, admin)).status, 200, 'platform admin reads');
  const token = await accessTokenFor(ts, await adminToken(ts));
  t.equal((await read(ts, a.ws, a.channel, `Bearer ${token.token}`)).status, 200, 'access token reads');
  t.equal((await read(ts, a.ws, a.channel, `Client ${a.publisher.key}`)).status, 200, 'device with subscribe reads');
  t.equal((await read(ts, a.ws, a.channel, `Client ${publishOnly.key}`)).status, 403, 'publish alone does not read');
  t.equal((await read(ts, a.ws, a.channel, `Client ${other.publisher.key}`)).status, 403, 'a device of another workspace cannot read');
  t.equal((await read(ts, other.ws, a.channel, admin)).status, 404, 'the channel is not in that workspace');
  t.equal((await read(ts, a.ws, a.channel, null)).status, 401);
  t.equal((await read(ts, a.ws, a.channel, 'Client nope')).status, 401);
  t.equal((await read(ts, a.ws, a.channel, 'Bearer nope')).status, 401);
  t.equal((await read(ts, a.ws, a.channel, admin, 'limit=0')).status, 400);
  t.equal((await read(ts, a.ws, a.channel, admin, 'limit=1001')).status, 400);
  t.equal((await read(ts, a.ws, a.channel, admin, 'from=x')).status, 400);
});

t.test('a key known to this instance is refused at the very next publish once revoked', async (t) => {
  const ch = await insertChannel(ts, a.ws);
  const dev = await insertDevice(ts, a.ws);
  await grant(ts, a.ws, dev.id, ch, ['publish']);
  const created = await gql(ts.url(), 'mutation ($id: ID!) { createSharedKey(entityId: $id) { credentialId key } }', { id: dev.id }, admin.slice('Bearer '.length));
  const { credentialId, key } = created.body.data?.createSharedKey as { credentialId: string; key: string };
  const one = [{ n: 'temp', v: 1 }];
  for (let i = 0; i < 3; i++) t.equal((await publish(ts, a.ws, ch, key, one)).status, 202, `publish ${i + 1} (the key is held verified after the first)`);
  const revoked = await gql(ts.url(), 'mutation ($c: ID!) { revokeCredential(credentialId: $c) }', { c: credentialId }, admin.slice('Bearer '.length));
  t.equal(revoked.body.data?.revokeCredential, true);
  const refused = await publish(ts, a.ws, ch, key, one);
  t.equal(refused.status, 401, 'refused at once');
  t.equal(await countRows(ts, ch), 3, 'only the publishes made before the revocation are stored');
});
