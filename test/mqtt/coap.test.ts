// CoAP ingest over real UDP with the coap client: path and query parsing, Content-Format handling, and
// the CoAP code for each pipeline outcome (2.04, 4.00, 4.01, 4.03, 4.04, 4.05, 4.13, 4.15, 5.03 + Max-Age).
import dgram from 'node:dgram';
import { generate, parse, type ParsedPacket } from 'coap-packet';
import t, { type Test } from 'tap';
import { forbidden, invalidInput, notFound, payloadTooLarge, unauthenticated, unavailable } from '../../src/errors.js';
import type { PublishInput } from '../../src/messaging/index.js';
import { coapPost, coapServer } from './helpers.js';

const WS = '6f1c9d2e-1111-4a55-9d55-000000000001';
const CH = '6f1c9d2e-2222-4a55-9d55-000000000002';

t.test('CoAP ingest', async (t) => {
  const calls: { key: string; input: PublishInput }[] = [];
  const server = coapServer({
    blocks: { maxMessageBytes: 8192, maxHeldBytes: 16384, timeoutMs: 15_000 },
    messaging: {
      async publishWithKey(key, input) {
        calls.push({ key, input });
        const body = input.payload.toString();
        if (key === 'unknown-key') throw unauthenticated('invalid device key');
        if (key === 'no-grant') throw forbidden();
        if (key === 'busy') throw unavailable('ingest queue full', 2);
        if (input.channelId !== CH) throw notFound('channel');
        if (body === 'big') throw payloadTooLarge(10);
        if (body.length > 2000) return { stored: JSON.parse(body).length, messages: [] };
        if (body !== '[{"n":"t","v":1}]') throw invalidInput("record 0: field 'v' must be a number");
        return { stored: 1, messages: [] };
      },
    },
  });
  const port = await server.listen('127.0.0.1', 0);
  t.teardown(() => server.close(1000));
  const path = `/m/${WS}/c/${CH}`;
  const ok = '[{"n":"t","v":1}]';

  t.match(await coapPost(port, `${path}?auth=good-key`, ok, { 'Content-Format': 'application/senml+json' }), { code: '2.04' });
  t.match(calls.at(-1), { key: 'good-key', input: { workspaceId: WS, channelId: CH, subtopic: null, protocol: 'coap', contentType: 'application/senml+json' } });
  t.match(await coapPost(port, `${path}/kitchen/temp?auth=good-key`, ok, { 'Content-Format': 'application/json' }), { code: '2.04' });
  t.match(calls.at(-1), { input: { subtopic: 'kitchen/temp', contentType: 'application/senml+json' } }, 'JSON (50) read as SenML JSON');
  t.match(await coapPost(port, `${path}?auth=good-key`, ok), { code: '2.04' }, 'no Content-Format: read as SenML JSON');

  const count = calls.length;
  t.match(await coapPost(port, path, ok), { code: '4.01', payload: /auth=/ }, 'no key');
  t.match(await coapPost(port, `${path}?auth=good-key`, ok, { 'Content-Format': 'text/plain;charset=utf-8' }), { code: '4.15' });
  t.match(await coapPost(port, `/m/${WS}/x/${CH}?auth=good-key`, ok), { code: '4.04' }, 'not a channel path');
  t.match(await coapPost(port, `${path}?auth=good-key`, '', {}, 'GET'), { code: '4.05' });
  t.equal(calls.length, count, 'refused before reaching the pipeline');

  t.match(await coapPost(port, `${path}?auth=unknown-key`, ok), { code: '4.01', payload: 'invalid device key' });
  t.match(await coapPost(port, `${path}?auth=no-grant`, ok), { code: '4.03', payload: 'forbidden' });
  t.match(await coapPost(port, `/m/${WS}/c/${WS}?auth=good-key`, ok), { code: '4.04', payload: 'channel not found' });
  t.match(await coapPost(port, `${path}?auth=good-key`, '[{"n":"t","v":"x"}]'), { code: '4.00', payload: /record 0: field 'v'/ });
  t.match(await coapPost(port, `${path}?auth=good-key`, 'big'), { code: '4.13' });
  t.match(await coapPost(port, `${path}?auth=busy`, ok), { code: '5.03', maxAge: 2 }, 'retry hint as Max-Age');
  const large = JSON.stringify(Array.from({ length: 200 }, (_, i) => ({ n: `sensor-${i}`, v: i })));
  // Block1 (RFC 7959) with 1024-byte blocks: the client splits the payload, the server reassembles it.
  t.match(await coapPost(port, `${path}?auth=good-key`, large, { Block1: Buffer.of(0x06) }), { code: '2.04' }, `a ${large.length}-byte pack arrives block-wise`);
  t.equal(calls.at(-1)?.input.payload.length, large.length, 'reassembled whole');
  t.match(await coapPost(port, `${path}?auth=${encodeURIComponent('k+y/=')}`, ok), { code: '2.04' });
  t.equal(calls.at(-1)?.key, 'k+y/=', 'the key is URL-decoded');
});

/**
 * Raw CoAP datagrams from one UDP socket (one client address, as a device's uploads come), each with the
 * first reply to it: the coap client would not send what these tests need.
 */
function rawClient(t: Test, port: number) {
  const sock = dgram.createSocket('udp4');
  t.teardown(() => sock.close());
  let messageId = 0;
  return (packet: Parameters<typeof generate>[0]) => new Promise<ParsedPacket>((resolve) => {
    const id = ++messageId;
    // The reply to this message, not a late separate ACK of an earlier one.
    const onMessage = (m: Buffer) => {
      const reply = parse(m);
      if (reply.messageId !== id) return;
      sock.off('message', onMessage);
      resolve(reply);
    };
    sock.on('message', onMessage);
    sock.send(generate({ ...packet, messageId: id }), port, '127.0.0.1');
  });
}

/** Block1 option value: NUM, M (more), SZX (block size 2^(SZX+4)). */
function block1(num: number, more: boolean, szx: number): Buffer {
  const v = num * 16 + (more ? 8 : 0) + szx;
  return Buffer.from([(v >> 16) & 0xff, (v >> 8) & 0xff, v & 0xff]);
}

t.test('block-wise uploads are bounded before anything is reassembled', async (t) => {
  const published: string[] = [];
  const server = coapServer({
    // Room for four unfinished uploads: each reserves a whole message.
    blocks: { maxMessageBytes: 8192, maxHeldBytes: 4 * 8192, timeoutMs: 60_000 },
    messaging: {
      async publishWithKey(_key, input) {
        published.push(input.payload.toString());
        return { stored: 1, messages: [] };
      },
    },
  });
  const port = await server.listen('127.0.0.1', 0);
  t.teardown(() => server.close(1000));
  const send = rawClient(t, port);
  // Blocks belong together by endpoint and options (RFC 7959 2.4): each transfer has its own subtopic.
  const upload = (transfer: number, num: number, more: boolean, payload: Buffer, extra: { name: 'Size1'; value: Buffer }[] = []) => send({
    token: Buffer.from([transfer >> 8, transfer & 0xff]), code: '0.02', confirmable: true,
    options: [...['m', WS, 'c', CH, `t${transfer}`].map((p) => ({ name: 'Uri-Path' as const, value: Buffer.from(p) })),
      { name: 'Block1', value: block1(num, more, 6) }, { name: 'Uri-Query', value: Buffer.from('auth=k') }, ...extra],
    payload,
  });

  // One 31-byte datagram claiming to be block 2^20 - 1 of 1 KiB blocks: refused, nothing allocated for it.
  const huge = await upload(1, 2 ** 20 - 1, false, Buffer.from('[]'));
  t.equal(huge.code, '4.13');
  t.equal(huge.ack, true, 'piggybacked on the ACK');
  t.equal(huge.payload.toString(), 'message exceeds the limit of 8192 bytes');
  const size1 = huge.options.find((o) => o.name === 'Size1')?.value;
  t.equal(size1?.readUIntBE(0, size1.length), 8192, 'Size1 states the limit');
  const kib = Buffer.alloc(1024, 0x20);
  t.equal((await upload(2, 0, true, kib, [{ name: 'Size1', value: Buffer.from([0x40, 0x00]) }])).code, '4.13', 'a Size1 past the limit is refused at the first block');

  // Four unfinished transfers fill the room; a fifth waits for one to finish, fail or time out.
  for (let transfer = 10; transfer < 14; transfer++) t.equal((await upload(transfer, 0, true, kib)).code, '2.31', `transfer ${transfer} continues`);
  const turnedAway = await upload(14, 0, true, kib);
  t.equal(turnedAway.code, '5.03');
  t.equal(turnedAway.payload.toString(), 'too many block-wise uploads in progress');
  t.equal((await upload(10, 1, true, kib)).code, '2.31', 'a transfer already held goes on');
  t.equal((await upload(10, 8, false, kib)).code, '4.13', 'until a block would carry it past the limit');
  t.equal((await upload(14, 0, true, kib)).code, '2.31', 'which ends it and frees its room');

  // A finished transfer frees what it held: a new one is taken, and a whole pack arrives.
  const pack = Buffer.from(JSON.stringify([{ n: 't', v: 1 }]).padEnd(1024, ' '));
  t.equal((await upload(11, 1, false, pack)).code, '2.04', 'transfer 11 completes');
  t.equal((await upload(15, 0, true, kib)).code, '2.31', 'and a new transfer fits again');
  t.equal(published.length, 1, 'only the completed upload reached the pipeline');
  t.equal(published[0]?.length, 2048);
});

t.test('an upload whose blocks never join up keeps its room until it times out', async (t) => {
  const server = coapServer({
    blocks: { maxMessageBytes: 4096, maxHeldBytes: 3 * 4096, timeoutMs: 60_000 },
    messaging: { async publishWithKey() { return { stored: 1, messages: [] }; } },
  });
  const port = await server.listen('127.0.0.1', 0);
  t.teardown(() => server.close(1000));
  const send = rawClient(t, port);
  const upload = (transfer: number, num: number, more: boolean, payload: Buffer) => send({
    token: Buffer.from([transfer]), code: '0.02', confirmable: true,
    options: [...['m', WS, 'c', CH, `t${transfer}`].map((p) => ({ name: 'Uri-Path' as const, value: Buffer.from(p) })),
      { name: 'Block1', value: block1(num, more, 6) }, { name: 'Uri-Query', value: Buffer.from('auth=k') }],
    payload,
  });
  const kib = Buffer.alloc(1024, 0x20);

  t.equal((await upload(1, 0, true, kib)).code, '2.31');
  t.equal((await upload(2, 0, true, kib)).code, '2.31');
  t.equal((await upload(2, 2, false, kib)).code, '4.08', 'upload 2 ends with block 1 missing: it cannot be joined');
  for (let i = 0; i < 5; i++) t.equal((await upload(3, 0, true, kib)).code, '2.31', 'the same first block sent again is not counted again');
  t.equal((await upload(4, 0, true, kib)).code, '5.03', 'uploads 1 and 2 still hold their room, with upload 3 the room is full');
});
