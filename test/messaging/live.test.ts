// Live subscriptions over WebSocket: messages arrive after commit; upgrades refused before the socket opens.
import http from 'node:http';
import t from 'tap';
import { WebSocket } from 'undici';
import { ADMIN_SECRET, AUTH_ENV, adminToken, login } from '../helpers/auth.js';
import { gql, startTestService } from '../helpers/service.js';
import { waitUntil } from '../helpers/wait.js';
import { grant, insertDevice, publish, world } from './helpers.js';

// Open sockets are checked again every second here (60 s by default).
const ts = await startTestService(t, { ...AUTH_ENV, SVC_MESSAGING_WS_REVALIDATE_SECS: '1' });
const a = await world(ts, 'ws-live');
const wsUrl = (path: string) => `${ts.url('messaging').replace('http:', 'ws:')}${path}`;

/** Opens a socket and collects frames; resolves once open (or rejects on error). */
function subscribe(url: string, headers?: Record<string, string>) {
  const socket = new WebSocket(url, headers ? { headers } : undefined);
  const frames: any[] = [];
  const waiters: (() => void)[] = [];
  let closed: { code: number; reason: string } | undefined;
  socket.addEventListener('close', (e) => {
    closed = { code: e.code, reason: e.reason };
  });
  socket.addEventListener('message', (e) => {
    frames.push(JSON.parse(String(e.data)));
    for (const w of waiters.splice(0)) w();
  });
  const opened = new Promise<void>((resolve, reject) => {
    socket.addEventListener('open', () => resolve());
    socket.addEventListener('error', () => reject(new Error('socket error')));
  });
  const next = async (count: number, ms = 3000) => {
    const deadline = Date.now() + ms;
    while (frames.length < count && Date.now() < deadline) await new Promise<void>((r) => { waiters.push(r); setTimeout(r, 50); });
    return frames;
  };
  return { socket, opened, next, frames, closed: () => closed };
}

/** The status of a refused upgrade, read with a plain HTTP client. */
function upgradeStatus(path: string, headers: Record<string, string> = {}): Promise<number> {
  const port = Number(new URL(ts.url('messaging')).port);
  return new Promise((resolve, reject) => {
    const req = http.request({
      host: '127.0.0.1', port, path, headers: {
        connection: 'Upgrade', upgrade: 'websocket', 'sec-websocket-version': '13', 'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==', ...headers,
      },
    });
    req.on('upgrade', (res, socket) => {
      socket.destroy();
      resolve(res.statusCode ?? 0);
    });
    req.on('response', (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('error', reject);
    req.end();
  });
}

t.test('a device with subscribe receives what another device publishes, after commit', async (t) => {
  const listener = await insertDevice(ts, a.ws);
  await grant(ts, a.ws, listener.id, a.channel, ['subscribe']);
  const sub = subscribe(wsUrl(`/ws/m/${a.ws}/c/${a.channel}`), { authorization: `Client ${listener.key}` });
  await sub.opened;
  t.teardown(() => sub.socket.close());
  const res = await publish(ts, a.ws, a.channel, a.publisher.key, [{ bn: 'live:', n: 'temp', u: 'Cel', v: 21.5, bt: 1_700_000_000 }, { n: 'flag', vb: true }], { subtopic: 'room1' });
  t.equal(res.status, 202);
  const frames = await sub.next(2);
  t.same(frames, [
    { channel: a.channel, publisher: a.publisher.id, protocol: 'http', name: 'live:temp', unit: 'Cel', time: 1_700_000_000, value: 21.5, subtopic: 'room1' },
    { channel: a.channel, publisher: a.publisher.id, protocol: 'http', name: 'live:flag', unit: null, time: 1_700_000_000, value: null, subtopic: 'room1', bool_value: true },
  ]);
  const stored = await ts.service.sql`select count(*)::int as n from messages where channel_id = ${a.channel} and name like 'live:%'`;
  t.equal(stored[0]!.n, 2, 'what was streamed is stored');
});

t.test('?subtopic= narrows a socket to one subtopic (exact); the channel-wide socket gets each message once', async (t) => {
  const listener = await insertDevice(ts, a.ws);
  await grant(ts, a.ws, listener.id, a.channel, ['subscribe']);
  const auth = { authorization: `Client ${listener.key}` };
  const path = `/ws/m/${a.ws}/c/${a.channel}`;
  const all = subscribe(wsUrl(path), auth);
  const room = subscribe(wsUrl(`${path}?subtopic=room.1`), auth);
  const deep = subscribe(wsUrl(`${path}?subtopic=room.1%2Ftemp`), auth);
  await Promise.all([all.opened, room.opened, deep.opened]);
  t.teardown(() => {
    for (const s of [all, room, deep]) s.socket.close();
  });
  for (const [name, subtopic] of [['none', undefined], ['room', 'room.1'], ['deep', 'room.1/temp'], ['elsewhere', 'room.2']] as const) {
    const res = await publish(ts, a.ws, a.channel, a.publisher.key, [{ n: `sub-${name}`, v: 1 }], subtopic ? { subtopic } : {});
    t.equal(res.status, 202, name);
  }
  t.same((await all.next(4)).map((f) => f.name), ['sub-none', 'sub-room', 'sub-deep', 'sub-elsewhere']);
  t.same((await room.next(1)).map((f) => f.name), ['sub-room']);
  t.same((await deep.next(1)).map((f) => f.name), ['sub-deep']);
  // Nothing more arrives once the last publish's frame reached the channel-wide socket.
  await new Promise((r) => setTimeout(r, 200));
  t.equal(all.frames.length, 4, 'no frame twice');
  t.equal(room.frames.length, 1);
  t.equal(deep.frames.length, 1);

  t.equal(await upgradeStatus(`${path}?subtopic=room%201`, auth), 400, 'a malformed subtopic');
  t.equal(await upgradeStatus(`${path}?subtopic=a%2F%2Fb`, auth), 400, 'an empty segment');
  const noGrant = await insertDevice(ts, a.ws);
  t.equal(await upgradeStatus(`${path}?subtopic=room.1`, { authorization: `Client ${noGrant.key}` }), 403, 'a subtopic needs the channel grant');
  const other = await world(ts, 'ws-live-subtopic-other');
  t.equal(await upgradeStatus(`${path}?subtopic=room.1`, { authorization: `Client ${other.publisher.key}` }), 403, 'another workspace, subtopic or not');
});

t.test('browsers authenticate with ?token= (bearer) or ?key= (device key)', async (t) => {
  const token = await adminToken(ts);
  const byToken = subscribe(wsUrl(`/ws/m/${a.ws}/c/${a.channel}?token=${encodeURIComponent(token)}`));
  const byKey = subscribe(wsUrl(`/ws/m/${a.ws}/c/${a.channel}?key=${encodeURIComponent(a.publisher.key)}`));
  await Promise.all([byToken.opened, byKey.opened]);
  t.teardown(() => {
    byToken.socket.close();
    byKey.socket.close();
  });
  t.equal((await publish(ts, a.ws, a.channel, a.publisher.key, [{ n: 'browser', v: 1 }])).status, 202);
  t.match((await byToken.next(1))[0], { name: 'browser', value: 1 });
  t.match((await byKey.next(1))[0], { name: 'browser', value: 1 });
});

t.test('upgrades are refused before the socket opens', async (t) => {
  const other = await world(ts, 'ws-live-other');
  const noGrant = await insertDevice(ts, a.ws);
  const path = `/ws/m/${a.ws}/c/${a.channel}`;
  t.equal(await upgradeStatus(path), 401, 'no credentials');
  t.equal(await upgradeStatus(path, { authorization: 'Client wrong' }), 401, 'unknown key');
  t.equal(await upgradeStatus(`${path}?token=garbage`), 401, 'bad token');
  t.equal(await upgradeStatus(path, { authorization: `Client ${noGrant.key}` }), 403, 'no subscribe grant');
  t.equal(await upgradeStatus(path, { authorization: `Client ${other.publisher.key}` }), 403, 'device of another workspace');
  t.equal(await upgradeStatus(`/ws/m/${a.ws}/c/${other.channel}`, { authorization: `Bearer ${await adminToken(ts)}` }), 404, 'channel of another workspace');
  t.equal(await upgradeStatus(`/ws/m/${a.ws}/c/%zz`, { authorization: `Client ${a.publisher.key}` }), 400, 'a malformed escape in the path');
  t.equal(await upgradeStatus(`/ws/m/%E0%A4%A/c/${a.channel}`, { authorization: `Client ${a.publisher.key}` }), 400, 'a cut UTF-8 escape');
  t.equal(await upgradeStatus(path, { authorization: `Client ${a.publisher.key}` }), 101, 'and the granted device is upgraded');
  const plain = await fetch(`${ts.url('messaging')}${path}`, { headers: { authorization: `Client ${a.publisher.key}` } });
  t.equal(plain.status, 426, 'a GET without the upgrade headers: Upgrade Required');
  t.equal(plain.headers.get('upgrade'), 'websocket');
  t.match(await plain.json(), { error: /WebSocket endpoint/ });
  t.equal((await fetch(`${ts.url('messaging')}${path}`, { method: 'POST' })).status, 405, 'another method: 405');
});

t.test('an open socket is closed (1008) once its key, session or grant is withdrawn; the others stay', async (t) => {
  const devices = await Promise.all([0, 1, 2].map(() => insertDevice(ts, a.ws)));
  for (const d of devices) await grant(ts, a.ws, d.id, a.channel, ['subscribe']);
  const [kept, ungranted, revoked] = devices as [typeof devices[0], typeof devices[0], typeof devices[0]];
  const session = await login(ts, 'admin', ADMIN_SECRET);
  const path = `/ws/m/${a.ws}/c/${a.channel}`;
  const keptSocket = subscribe(wsUrl(path), { authorization: `Client ${kept.key}` });
  const ungrantedSocket = subscribe(wsUrl(path), { authorization: `Client ${ungranted.key}` });
  const revokedSocket = subscribe(wsUrl(path), { authorization: `Client ${revoked.key}` });
  const sessionSocket = subscribe(wsUrl(`${path}?token=${encodeURIComponent(session.token)}`));
  const all = [keptSocket, ungrantedSocket, revokedSocket, sessionSocket];
  await Promise.all(all.map((s) => s.opened));
  t.teardown(() => {
    for (const s of all) if (!s.closed()) s.socket.close();
  });

  await ts.service.sql`delete from direct_policies where entity_id = ${ungranted.id}`;
  await ts.service.authz.invalidate({ kind: 'subjects', entityIds: [ungranted.id] });
  const [credential] = await ts.service.sql<{ id: string }[]>`select id from credentials where entity_id = ${revoked.id} and kind = 'shared_key'`;
  const revoke = await gql(ts.url(), 'mutation ($c: ID!, $e: ID) { revokeCredential(credentialId: $c, entityId: $e) }', { c: credential!.id, e: revoked.id }, await adminToken(ts));
  t.equal(revoke.body.data?.revokeCredential, true);
  t.equal((await gql(ts.url(), 'mutation { logout }', {}, session.token)).body.data?.logout, true);

  await waitUntil(() => [ungrantedSocket, revokedSocket, sessionSocket].every((s) => s.closed()), 8000, 'the three sockets closed');
  t.same(ungrantedSocket.closed(), { code: 1008, reason: 'forbidden' }, 'a withdrawn grant');
  t.same(revokedSocket.closed(), { code: 1008, reason: 'invalid device key' }, 'a revoked key');
  t.match(sessionSocket.closed(), { code: 1008, reason: 'invalid token' }, 'a session logged out');
  t.equal(keptSocket.closed(), undefined, 'the socket still allowed stays open');
  t.equal((await publish(ts, a.ws, a.channel, a.publisher.key, [{ n: 'after-revalidation', v: 1 }])).status, 202);
  t.match((await keptSocket.next(1)).at(-1), { name: 'after-revalidation' }, 'and still receives');
});

t.test('stopping the service closes open sockets with 1001 (going away)', async (t) => {
  const stopping = await startTestService(t, AUTH_ENV);
  const w = await world(stopping, 'ws-live-stop');
  const url = `${stopping.url('messaging').replace('http:', 'ws:')}/ws/m/${w.ws}/c/${w.channel}`;
  const sub = subscribe(url, { authorization: `Client ${w.publisher.key}` });
  await sub.opened;
  await stopping.service.stop();
  await waitUntil(() => sub.closed() !== undefined, 3000, 'the socket closed');
  t.same(sub.closed(), { code: 1001, reason: 'service stopping' }, 'so the client reconnects elsewhere at once');
});
