// MQTT test fixtures: devices with shared keys (created through GraphQL), connected mqtt.js clients, and
// small waiting helpers; every client is ended at teardown.
import mqtt, { type IClientOptions, type MqttClient } from 'mqtt';
import { adminToken, insertEntity } from '../helpers/auth.js';
import { gql, type TestService } from '../helpers/service.js';

interface Teardown {
  teardown(fn: () => unknown): void;
}

const CREATE_KEY = `mutation ($id: ID!) { createSharedKey(entityId: $id) { credentialId key } }`;

export interface Device {
  id: string;
  key: string;
  credentialId: string;
}

/** A device entity in the tenant with a fresh shared key. */
export async function createDevice(ts: TestService, tenantId: string, name: string): Promise<Device> {
  const id = await insertEntity(ts, { name, kind: 'device', tenantId });
  const res = await gql(ts.url(), CREATE_KEY, { id }, await adminToken(ts));
  const created = res.body.data?.createSharedKey as { key: string; credentialId: string } | undefined;
  if (!created) throw new Error(`createSharedKey failed: ${JSON.stringify(res.body.errors)}`);
  return { id, key: created.key, credentialId: created.credentialId };
}

/** Connects and resolves on CONNACK; rejects with the broker's refusal. */
export function connect(t: Teardown, port: number, options: IClientOptions = {}): Promise<MqttClient> {
  return new Promise((resolve, reject) => {
    const client = mqtt.connect(`mqtt://127.0.0.1:${port}`, { reconnectPeriod: 0, connectTimeout: 5000, ...options });
    t.teardown(() => new Promise<void>((r) => client.end(true, {}, () => r())));
    client.once('connect', () => resolve(client));
    client.once('error', (err) => {
      client.end(true);
      reject(err);
    });
    client.once('close', () => reject(new Error('connection closed before CONNACK')));
  });
}

export function deviceClient(t: Teardown, port: number, device: Device, options: IClientOptions = {}) {
  return connect(t, port, { username: device.id, password: device.key, ...options });
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

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

export async function waitUntil(check: () => boolean | Promise<boolean>, ms = 5000, what = 'condition'): Promise<void> {
  const until = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > until) throw new Error(`${what} not reached in ${ms} ms`);
    await sleep(20);
  }
}

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
