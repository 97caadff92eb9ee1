// Block-wise CoAP uploads as real clients send them (issue 22 point 5): blocks matched by endpoint and
// request options, not by token (RFC 7959 2.4), so libcoap's coap-client, which sends every block with a
// new token, uploads a pack of several KiB; a retransmitted block is answered again and not stored twice;
// an upload that stalls lets its room go after SVC_COAP_BLOCK_TIMEOUT_SECS.
import { execFile } from 'node:child_process';
import dgram from 'node:dgram';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { generate, parse, type ParsedPacket } from 'coap-packet';
import t, { type Test } from 'tap';
import type { PublishInput } from '../../src/messaging/index.js';
import { insertTenant, startAuthService } from '../helpers/auth.js';
import { countRows, grant, insertChannel, insertDevice, read } from '../messaging/helpers.js';
import { BROKER_ENV, coapServer, waitUntil } from './helpers.js';

const run = promisify(execFile);
const WS = '6f1c9d2e-1111-4a55-9d55-000000000001';
const CH = '6f1c9d2e-2222-4a55-9d55-000000000002';
const uriPath = (...segments: string[]) => segments.map((p) => ({ name: 'Uri-Path' as const, value: Buffer.from(p) }));

/** Block1 option value: NUM, M (more), SZX (block size 2^(SZX+4)). */
function block1(num: number, more: boolean, szx = 6): Buffer {
  const v = num * 16 + (more ? 8 : 0) + szx;
  return Buffer.from([(v >> 16) & 0xff, (v >> 8) & 0xff, v & 0xff]);
}

/** Raw CoAP from one UDP socket (one client endpoint); resolves with the reply to each message id. */
function rawClient(t: Test, port: number) {
  const sock = dgram.createSocket('udp4');
  t.teardown(() => sock.close());
  let messageId = 0;
  const send = (packet: Parameters<typeof generate>[0], id = ++messageId) => new Promise<ParsedPacket>((resolve) => {
    const onMessage = (m: Buffer) => {
      const reply = parse(m);
      if (reply.messageId !== id) return;
      sock.off('message', onMessage);
      resolve(reply);
    };
    sock.on('message', onMessage);
    sock.send(generate({ ...packet, messageId: id }), port, '127.0.0.1');
  });
  return { send, lastId: () => messageId };
}

t.test('blocks are matched by endpoint and options, whatever their tokens', async (t) => {
  const published: PublishInput[] = [];
  const server = coapServer({
    blocks: { maxMessageBytes: 8192, maxHeldBytes: 2 * 8192, timeoutMs: 60_000 },
    messaging: { async publishWithKey(_key, input) { published.push(input); return { stored: 1, messages: [] }; } },
  });
  const port = await server.listen('127.0.0.1', 0);
  t.teardown(() => server.close(1000));
  const { send } = rawClient(t, port);
  const body = Buffer.from(JSON.stringify(Array.from({ length: 60 }, (_, i) => ({ n: `s${i}`, v: i }))).padEnd(2600, ' '));
  t.ok(body.length > 2048 && body.length <= 3072, `a ${body.length}-byte pack: three 1 KiB blocks`);
  const blockOf = (n: number) => body.subarray(n * 1024, (n + 1) * 1024);
  const post = (token: number, num: number, more: boolean, payload: Buffer, subtopic = 'a', id?: number) => send({
    token: Buffer.from([token]), code: '0.02', confirmable: true, payload,
    options: [...uriPath('m', WS, 'c', CH, subtopic), { name: 'Block1', value: block1(num, more) }, { name: 'Uri-Query', value: Buffer.from('auth=k') }],
  }, id);

  const first = await post(1, 0, true, blockOf(0));
  t.match(first, { code: '2.31', ack: true }, 'block 0: continue');
  t.same(first.options.find((o) => o.name === 'Block1')?.value, block1(0, true), 'the Block1 option is echoed');
  t.equal((await post(2, 1, true, blockOf(1))).code, '2.31', 'block 1 under a new token joins the same body');
  t.equal((await post(2, 1, true, blockOf(1))).code, '2.31', 'block 1 sent again is answered again');
  const last = await post(3, 2, false, blockOf(2), 'a', 100);
  t.equal(last.code, '2.04', 'the last block, a third token: the whole body is published');
  t.equal(published.length, 1);
  t.equal(published[0]?.payload.toString(), body.toString(), 'reassembled exactly, the repeated block once');
  t.equal(published[0]?.subtopic, 'a');
  t.equal((await post(3, 2, false, blockOf(2), 'a', 100)).code, '2.04', 'the last block retransmitted gets the same answer');
  t.equal(published.length, 1, 'and is not published again');

  // Two bodies under different options (subtopics) from one endpoint stay apart, interleaved.
  t.equal((await post(4, 0, true, blockOf(0), 'x')).code, '2.31');
  t.equal((await post(5, 0, true, blockOf(0), 'y')).code, '2.31');
  t.equal((await post(6, 1, true, blockOf(1), 'x')).code, '2.31');
  t.equal((await post(7, 1, true, blockOf(1), 'y')).code, '2.31');
  t.equal((await post(8, 2, false, blockOf(2), 'y')).code, '2.04');
  t.equal((await post(9, 2, false, blockOf(2), 'x')).code, '2.04');
  t.same(published.slice(1).map((p) => [p.subtopic, p.payload.length]), [['y', body.length], ['x', body.length]]);

  // What cannot be joined is told, not guessed at.
  t.match(await post(10, 1, true, blockOf(1), 'z'), { code: '4.08', payload: Buffer.from('Block1 block 1 has no preceding blocks') });
  t.equal((await post(11, 0, true, blockOf(0), 'z')).code, '2.31');
  t.match(await post(12, 2, true, Buffer.alloc(1024, 0x20), 'z'), { code: '4.08' }, 'a gap: block 1 is missing');
  t.match(await post(13, 1, true, Buffer.alloc(10), 'z'), { code: '4.00' }, 'a block shorter than its size before the last');
  t.equal((await post(14, 0, true, blockOf(0), 'z')).code, '2.31', 'a first block starts the body afresh');
  t.equal(published.length, 3, 'nothing incomplete was published');
  t.equal((await post(15, 1, false, Buffer.from(' '), 'z')).code, '2.04', 'the restarted body completes');
  t.same(published.slice(3).map((p) => [p.subtopic, p.payload.length]), [['z', 1025]], 'with the blocks of the restart only');
});

t.test('an upload that stalls lets its room go after the block timeout', async (t) => {
  const server = coapServer({
    // Room for one unfinished upload.
    blocks: { maxMessageBytes: 4096, maxHeldBytes: 4096, timeoutMs: 300 },
    messaging: { async publishWithKey() { return { stored: 1, messages: [] }; } },
  });
  const port = await server.listen('127.0.0.1', 0);
  t.teardown(() => server.close(1000));
  const kib = Buffer.alloc(1024, 0x20);
  const stalled = rawClient(t, port);
  const other = rawClient(t, port);
  const first = (client: ReturnType<typeof rawClient>) => client.send({
    token: Buffer.from([1]), code: '0.02', confirmable: true, payload: kib,
    options: [...uriPath('m', WS, 'c', CH), { name: 'Block1', value: block1(0, true) }, { name: 'Uri-Query', value: Buffer.from('auth=k') }],
  });
  t.equal((await first(stalled)).code, '2.31', 'an upload begins, and its client goes silent');
  const turnedAway = await first(other);
  t.match(turnedAway, { code: '5.03', payload: Buffer.from('too many block-wise uploads in progress') }, 'the room is full');
  const started = Date.now();
  await waitUntil(async () => (await first(other)).code === '2.31', 10_000, 'a new upload is taken');
  t.ok(Date.now() - started < 5000, `the stalled upload's room was free again after ${Date.now() - started} ms`);
});

t.test("libcoap's coap-client uploads a pack of several KiB block-wise, a new token per block", async (t) => {
  const ts = await startAuthService(t, BROKER_ENV);
  const ws = await insertTenant(ts, 'libcoap');
  const ch = await insertChannel(ts, ws, 'bulk');
  const device = await insertDevice(ts, ws, 'libcoap-device');
  await grant(ts, ws, device.id, ch, ['publish', 'subscribe']);
  const dir = await mkdtemp(path.join(tmpdir(), 'coap-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const pack = JSON.stringify(Array.from({ length: 120 }, (_, i) => ({ bn: 'urn:dev:libcoap:', n: `sensor-${i}`, u: 'Cel', v: i })));
  t.ok(pack.length > 4096, `a ${pack.length}-byte pack`);
  const file = path.join(dir, 'pack.json');
  await writeFile(file, pack);
  const uri = `coap://127.0.0.1:${ts.service.ports.coap}/m/${ws}/c/${ch}?auth=${encodeURIComponent(device.key)}`;
  for (const size of ['1024', '256']) {
    const before = await countRows(ts, ch);
    // -b: the block size; -t 110: application/senml+json; -B: give up after 20 s; -v 7: log each PDU.
    const { stdout, stderr } = await run('coap-client-openssl', ['-m', 'post', '-b', size, '-t', '110', '-B', '20', '-v', '7', '-f', file, uri],
      { timeout: 30_000, maxBuffer: 64 * 1024 * 1024 });
    const log = `${stdout}\n${stderr}`;
    // Each PDU it sends is logged as 'v:1 t:CON c:POST i:<message id> {<token>} [ options ]'.
    const tokens = new Set([...log.matchAll(/t:CON c:POST i:[0-9a-f]+ \{([0-9a-f]*)\}/g)].map((m) => m[1]));
    t.ok(tokens.size > 1, `${size}-byte blocks: libcoap used ${tokens.size} tokens for its blocks`);
    t.match(log, / c:2\.04 /, 'and got 2.04 Changed');
    // Only the PDU lines' codes (' c:4.08'): a bare /5\.00/ also matched timestamps such as 11:49:55.003.
    t.notMatch(log, / c:[45]\.\d\d /, 'no error code on the way');
    t.equal(await countRows(ts, ch), before + 120, 'every record stored, once');
  }
  const page = await read(ts, ws, ch, `Client ${device.key}`, 'name=urn:dev:libcoap:sensor-119&limit=10');
  t.same(page.body.messages.map((m: { value: number }) => m.value), [119, 119], 'the last record of each upload, whole');
});
