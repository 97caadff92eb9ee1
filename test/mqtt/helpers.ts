// MQTT and CoAP client fixtures: connected mqtt.js clients (ended at teardown), CoAP requests and
// observations, and small waiting helpers. Devices, channels and grants: ../messaging/helpers.ts.
import net from 'node:net';
import coap from 'coap';
import mqtt, { type IClientOptions, type MqttClient } from 'mqtt';
import { createCoapServer, type CoapDeps } from '../../src/coap/index.js';
import { adminToken, insertEntity } from '../helpers/auth.js';
import { gql, testLogger, type TestService } from '../helpers/service.js';
import { sleep, waitUntil } from '../helpers/wait.js';

interface Teardown {
  teardown(fn: () => unknown): void;
}

/**
 * Connects and resolves on CONNACK; rejects with the broker's refusal. A port is the TCP listener; a URL
 * names another transport (ws://…/mqtt).
 */
export function connect(t: Teardown, at: number | string, options: IClientOptions = {}): Promise<MqttClient> {
  return new Promise((resolve, reject) => {
    const url = typeof at === 'number' ? `mqtt://127.0.0.1:${at}` : at;
    const client = mqtt.connect(url, { reconnectPeriod: 0, connectTimeout: 5000, ...options });
    t.teardown(() => new Promise<void>((r) => client.end(true, {}, () => r())));
    client.once('connect', () => resolve(client));
    client.once('error', (err) => {
      client.end(true);
      reject(err);
    });
    client.once('close', () => reject(new Error('connection closed before CONNACK')));
  });
}

export function deviceClient(t: Teardown, at: number | string, device: { id: string; key: string }, options: IClientOptions = {}) {
  return connect(t, at, { username: device.id, password: device.key, ...options });
}

/** Collects messages arriving on a client. */
export function inbox(client: MqttClient) {
  const messages: { topic: string; payload: string; retain: boolean; qos: number }[] = [];
  client.on('message', (topic, payload, packet) => messages.push({ topic, payload: payload.toString(), retain: packet.retain, qos: packet.qos }));
  return {
    messages,
    async waitFor(count: number, ms = 5000) {
      const until = Date.now() + ms;
      while (messages.length < count) {
        if (Date.now() > until) throw new Error(`expected ${count} messages, got ${messages.length}`);
        await sleep(10);
      }
      return messages;
    },
  };
}

export { sleep, waitUntil };

export function publish(client: MqttClient, topic: string, payload: string, options: { qos?: 0 | 1 | 2; retain?: boolean } = {}) {
  return new Promise<void>((resolve, reject) => client.publish(topic, payload, { qos: 1, ...options }, (err) => (err ? reject(err) : resolve())));
}

/** SUBACK granted QoS per filter (128 = refused). */
export function subscribe(client: MqttClient, topic: string | string[], qos: 0 | 1 | 2 = 1) {
  // mqtt.js reports a refused filter as an error with the SUBACK packet: read the codes from the packet.
  return new Promise<number[]>((resolve, reject) => client.subscribe(topic, { qos }, (err, _granted, packet) => {
    const codes = (packet as { granted?: number[] } | undefined)?.granted;
    if (!codes) return reject(err ?? new Error('no SUBACK'));
    resolve(codes.map((g) => (typeof g === 'number' ? g : (g as { qos: number }).qos)));
  }));
}

/** Messages of a channel through the reader listener, read with a device key. */
export async function readMessages(ts: TestService, workspaceId: string, channelId: string, key: string, query = 'limit=100') {
  const res = await fetch(`${ts.url('reader')}/${workspaceId}/channels/${channelId}/messages?${query}`, { headers: { authorization: `Client ${key}` } });
  const body = await res.json() as { total: number; messages: { protocol: string; name: string; value: number; publisher: string }[] };
  if (res.status !== 200) throw new Error(`reader answered ${res.status}: ${JSON.stringify(body)}`);
  return body;
}

/** Everything a test needs to run the broker on port 0 (CoAP too) with fast node heartbeats. */
export const BROKER_ENV: Record<string, string> = {
  SVC_MQTT_ADDR: '127.0.0.1:0',
  SVC_COAP_ADDR: '127.0.0.1:0',
  SVC_NODE_HEARTBEAT_MS: '200',
  SVC_NODE_STALE_MS: '1000',
};

/** One CoAP request over UDP; resolves with the response code, diagnostic payload and Max-Age. */
export function coapPost(port: number, path: string, payload: string, options: Record<string, unknown> = {}, method = 'POST') {
  return new Promise<{ code: string; payload: string; maxAge: unknown }>((resolve, reject) => {
    const [pathname, query] = path.split('?');
    const req = coap.request({ hostname: '127.0.0.1', port, method: method as 'POST', pathname, query, options: options as never });
    req.on('response', (res: InstanceType<typeof coap.IncomingMessage>) => {
      resolve({ code: res.code, payload: res.payload.toString(), maxAge: res.headers['Max-Age'] });
    });
    req.on('error', reject);
    req.end(payload);
  });
}

type CoapMessaging = CoapDeps['messaging'];

/**
 * A CoAP server on its own, in front of the pipeline parts a test gives; the rest refuse (publish), allow
 * (subscribe) or never fire (stored messages). Observation limits default wide, revalidation off.
 */
export function coapServer(options: { messaging?: Partial<CoapMessaging> } & Partial<Omit<CoapDeps, 'messaging'>>) {
  const messaging: CoapMessaging = {
    publishWithKey: () => Promise.reject(new Error('no publish in this test')),
    authorizeSubscribe: () => Promise.resolve(),
    onStored: () => () => undefined,
    watch: () => () => undefined,
    ...options.messaging,
  };
  return createCoapServer({
    log: testLogger(),
    blocks: { maxMessageBytes: 8192, maxHeldBytes: 16384, timeoutMs: 15_000 },
    observe: { maxObservations: 1000, maxPerDevice: 100, revalidateSecs: 0 },
    authenticateDeviceKey: () => Promise.resolve(null),
    ...options,
    messaging,
  });
}

/**
 * A CoAP observation with the coap client (GET with Observe: 0): resolves with the registration's code;
 * on 2.05 every notification's payload is collected. Closed at teardown without the client's eager
 * deregistration, which sends its GET after the agent closed its socket (coap 1.5); the service ends the
 * observation when a notification meets the closed client, or at shutdown.
 */
export function coapObserve(t: Teardown, port: number, path: string) {
  return new Promise<{ code: string; payloads: string[]; waitFor(count: number, ms?: number): Promise<string[]> }>((resolve, reject) => {
    const [pathname, query] = path.split('?');
    // An agent of its own: closing an observation closes its agent's socket for good (coap 1.5).
    const agent = new coap.Agent({ type: 'udp4' });
    const req = coap.request({ hostname: '127.0.0.1', port, method: 'GET', pathname, query, observe: true, agent });
    req.on('response', (res: InstanceType<typeof coap.ObserveReadStream>) => {
      const payloads: string[] = [];
      if (res.code === '2.05') res.on('data', (chunk: Buffer) => payloads.push(chunk.toString()));
      // A refusal opens a stream too (the client waits for notifications that never come).
      t.teardown(() => res.close());
      resolve({
        code: res.code, payloads,
        waitFor: (count, ms = 5000) => waitUntil(() => payloads.length >= count, ms, `${count} notifications`).then(() => payloads),
      });
    });
    req.on('error', reject);
    req.end();
  });
}

/**
 * One raw TCP session with the MQTT listener: writes `chunks` `gapMs` apart, then leaves `lingerMs` for the
 * server to answer or close; resolves when the socket is gone, whatever the server did with the bytes.
 */
export function rawMqttSession(port: number, chunks: Buffer[], { gapMs = 2, lingerMs = 100 } = {}): Promise<void> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    let settled = false;
    const done = () => {
      if (settled) return;
      settled = true;
      socket.destroy();
      resolve();
    };
    socket.on('error', done);
    socket.on('close', done);
    socket.on('data', () => undefined);
    socket.once('connect', async () => {
      for (const chunk of chunks) {
        if (socket.destroyed) return;
        socket.write(chunk);
        await new Promise((r) => setTimeout(r, gapMs));
      }
      setTimeout(done, lingerMs);
    });
  });
}
