// The MQTT and CoAP rows of the matrix: the other tenant's device (live, with publish and subscribe on its
// own channel) aims at every channel of the target, as the database lists them, over the service's own
// broker and CoAP listeners: publish (MQTT QoS 0 and 1, CoAP POST) on the channel topic, a subtopic, and
// the channel under its own workspace id; subscribe (MQTT filters, exact and wildcard; CoAP observe).
// Refused, nothing of the target delivered to it, nothing stored (the matrix's snapshot), and every answer
// the same for a real channel and a channel id that never existed (the existence-oracle twins). Controls
// keep it from passing vacuously: the attacker's own channel works end to end, and the target's own
// subscriber receives the target's message that the attacker must not.
import { randomUUID } from 'node:crypto';
import coap from 'coap';
import mqtt, { type MqttClient } from 'mqtt';
import type { TestService } from '../../helpers/service.js';
import { sleep, waitUntil } from '../../helpers/wait.js';
import type { World } from './world.js';

interface Answer {
  /** What the caller saw: the broker's code(s), or the CoAP code and diagnostic payload. */
  seen: string;
}

const senml = (n: string) => JSON.stringify([{ bn: 'matrix:', n, v: 1 }]);

/** An MQTT 5 client of one device; resolves on CONNACK. Ended by the caller. */
function mqttClient(port: number, device: { id: string; key: string }, clientId: string): Promise<MqttClient> {
  return new Promise((resolve, reject) => {
    const client = mqtt.connect(`mqtt://127.0.0.1:${port}`, {
      username: device.id, password: device.key, clientId, protocolVersion: 5, reconnectPeriod: 0, connectTimeout: 5000,
    });
    client.once('connect', () => resolve(client));
    client.once('error', (err) => {
      client.end(true);
      reject(err);
    });
  });
}

const end = (c: MqttClient) => new Promise<void>((r) => c.end(true, {}, () => r()));

/** One publish on a fresh connection: the PUBACK reason (QoS 1), or how the connection ended. */
async function mqttPublish(port: number, device: { id: string; key: string }, topic: string, qos: 0 | 1, payload: string): Promise<Answer> {
  const client = await mqttClient(port, device, `matrix-pub-${randomUUID().slice(0, 8)}`);
  try {
    const outcome = await new Promise<string>((resolve) => {
      const timer = setTimeout(() => resolve('no answer in 2 s'), 2000);
      client.once('close', () => resolve('connection closed'));
      client.publish(topic, payload, { qos }, (err, packet) => {
        clearTimeout(timer);
        const reason = (packet as { reasonCode?: number } | undefined)?.reasonCode;
        resolve(err ? `refused ${(err as { code?: number }).code ?? err.message}` : `accepted${reason ? ` ${reason}` : ''}`);
      });
    });
    // QoS 0 has no answer: the connection staying up (or not) a moment later is what the device sees.
    if (qos === 0) await sleep(50);
    return { seen: `${outcome}${client.connected ? '' : ' (disconnected)'}` };
  } finally {
    await end(client);
  }
}

/** SUBACK codes for one filter on a fresh connection (kept open: returned for the delivery check). */
async function mqttSubscribe(port: number, device: { id: string; key: string }, filter: string): Promise<{ answer: Answer; client: MqttClient; got: string[] }> {
  const client = await mqttClient(port, device, `matrix-sub-${randomUUID().slice(0, 8)}`);
  const got: string[] = [];
  client.on('message', (topic, payload) => got.push(`${topic} ${payload.toString()}`));
  const seen = await new Promise<string>((resolve) => {
    const timer = setTimeout(() => resolve('no SUBACK in 2 s'), 2000);
    client.once('close', () => resolve('connection closed'));
    client.subscribe(filter, { qos: 1 }, (err, granted, packet) => {
      clearTimeout(timer);
      const codes = (packet as { granted?: (number | { qos: number })[] } | undefined)?.granted ?? granted?.map((g) => g.qos);
      resolve(codes ? `suback ${codes.map((g) => (typeof g === 'number' ? g : g.qos)).join(',')}` : `refused ${err?.message}`);
    });
  });
  return { answer: { seen }, client, got };
}

function coapAsk(port: number, method: 'POST' | 'GET', path: string, key: string, payload: string, observe = false): Promise<Answer> {
  return new Promise((resolve) => {
    const agent = new coap.Agent({ type: 'udp4' });
    const req = coap.request({ hostname: '127.0.0.1', port, method, pathname: path, query: `auth=${encodeURIComponent(key)}`, observe, agent });
    // The agent closes its socket itself once nothing is pending; closing it twice throws (coap 1.5).
    const close = () => {
      try {
        agent.close();
      } catch {
        // already closed
      }
    };
    const timer = setTimeout(() => {
      close();
      resolve({ seen: 'no answer in 3 s' });
    }, 3000);
    req.on('response', (res: InstanceType<typeof coap.IncomingMessage>) => {
      clearTimeout(timer);
      resolve({ seen: `${res.code} ${res.payload.toString()}` });
      // An observation (granted or not) opens a stream: closed here, which ends it on both sides.
      if (observe) (res as unknown as { close?: () => void }).close?.();
    });
    req.on('error', (err: Error) => {
      clearTimeout(timer);
      resolve({ seen: `error ${err.message}` });
    });
    req.end(method === 'POST' ? payload : undefined);
  });
}

const ACCEPTED = /^(accepted|suback [012](,|$))|^2\.\d\d/;

/** Every channel of the target, attacked over MQTT and CoAP: the problems found and the calls made. */
export async function probeTopics(ts: TestService, world: World, beforeControls: () => Promise<void>): Promise<{ problems: string[]; calls: number; targets: number }> {
  const mqttPort = ts.service.ports.mqtt!;
  const coapPort = ts.service.ports.coap!;
  const tenant = world.target.tenant!;
  const own = { ws: world.attacker.tenant!, channel: world.attacker.channel! };
  const channels = (await ts.service.sql<{ id: string }[]>`
    select id from resources where tenant_id = ${tenant} and kind = 'channel' and deleted_at is null order by id`).map((r) => r.id);
  const attacker = world.attackerDevice;
  const problems: string[] = [];
  let calls = 0;
  const marker = `zz-target-crossing-${randomUUID().slice(0, 8)}`;

  // Publish topics and subscribe filters, generated from each target channel, each with two twins: a
  // channel id that never existed in the target's workspace, and both ids never existing.
  const publishTopics = (ws: string, ch: string) => [`m/${ws}/c/${ch}`, `m/${ws}/c/${ch}/matrix/sub`, `m/${own.ws}/c/${ch}`];
  const filters = (ws: string, ch: string) => [`m/${ws}/c/${ch}`, `m/${ws}/c/${ch}/#`, `m/${ws}/c/${ch}/+`, `m/${own.ws}/c/${ch}/#`];
  const coapPaths = (ws: string, ch: string) => [`/m/${ws}/c/${ch}`, `/m/${ws}/c/${ch}/matrix/sub`, `/m/${own.ws}/c/${ch}`];
  // Filters that name no channel: refused, or at least never a way into the target.
  const broad = ['#', 'm/#', `m/${tenant}/#`, `m/${tenant}/c/+`, `m/+/c/+`, '+/+/+/+', '$SYS/#'];

  const subscriptions: { filter: string; client: MqttClient; got: string[] }[] = [];
  const judge = (where: string, real: Answer, twins: Answer[], qos0 = false) => {
    if (process.env.MATRIX_PRINT_TOPICS) console.error(`${where}: ${real.seen} / ${twins.map((a) => a.seen).join(' / ')}`);
    calls += 1 + twins.length;
    // QoS 0 has no refusal to read: only the connection's fate, compared with the twins'.
    if (!qos0 && ACCEPTED.test(real.seen)) problems.push(`${where}: accepted (${real.seen})`);
    for (const twin of twins) {
      if (twin.seen !== real.seen) problems.push(`${where}: tells an existing channel from a missing one: ${real.seen} <> ${twin.seen}`);
    }
  };
  for (const ch of channels) {
    const sides = [[tenant, ch], [tenant, randomUUID()], [randomUUID(), randomUUID()]] as const;
    const each = <T>(make: (ws: string, ch: string) => T[], i: number) => sides.map(([w, c]) => make(w, c)[i]!);
    for (let i = 0; i < publishTopics(tenant, ch).length; i++) {
      const topics = each(publishTopics, i);
      for (const qos of [0, 1] as const) {
        const [real, ...twins] = await Promise.all(topics.map((topic) => mqttPublish(mqttPort, attacker, topic, qos, senml(marker))));
        judge(`MQTT publish QoS ${qos} ${topics[0]}`, real!, twins, qos === 0);
      }
    }
    for (let i = 0; i < filters(tenant, ch).length; i++) {
      const [real, ...twins] = await Promise.all(each(filters, i).map((filter) => mqttSubscribe(mqttPort, attacker, filter)));
      judge(`MQTT subscribe ${filters(tenant, ch)[i]}`, real!.answer, twins.map((x) => x.answer));
      subscriptions.push({ filter: filters(tenant, ch)[i]!, ...real! });
      await Promise.all(twins.map((x) => end(x.client)));
    }
    for (let i = 0; i < coapPaths(tenant, ch).length; i++) {
      const [real, ...twins] = await Promise.all(each(coapPaths, i).map((path) => coapAsk(coapPort, 'POST', path, attacker.key, senml(marker))));
      judge(`CoAP POST ${coapPaths(tenant, ch)[i]}`, real!, twins);
    }
    const [real, ...twins] = await Promise.all(sides.map(([w, c]) => coapAsk(coapPort, 'GET', `/m/${w}/c/${c}`, attacker.key, '', true)));
    judge(`CoAP observe /m/${tenant}/c/${ch}`, real!, twins);
  }
  for (const filter of broad) {
    const sub = await mqttSubscribe(mqttPort, attacker, filter);
    judge(`MQTT subscribe ${filter}`, sub.answer, []);
    subscriptions.push({ filter, ...sub });
  }

  // Controls: the attacker's own channel works end to end; the target's subscriber receives the target's
  // message (a change the matrix's snapshot is told about first). Then no subscription of the attacker
  // holds anything of the target.
  await beforeControls();
  const ownSub = await mqttSubscribe(mqttPort, attacker, `m/${own.ws}/c/${own.channel}`);
  const targetSub = await mqttSubscribe(mqttPort, world.sensor, `m/${tenant}/c/${world.target.channel}/#`);
  const ownPublished = await mqttPublish(mqttPort, attacker, `m/${own.ws}/c/${own.channel}`, 1, senml('own'));
  const targetPublished = await mqttPublish(mqttPort, { id: world.target.device!, key: world.target.deviceKey! }, `m/${tenant}/c/${world.target.channel}`, 1, senml(marker));
  calls += 4;
  try {
    if (!ownSub.answer.seen.startsWith('suback 1') || !ownPublished.seen.startsWith('accepted')) {
      problems.push(`control: the attacker's own channel refused it (${ownSub.answer.seen}; ${ownPublished.seen})`);
    }
    if (!targetPublished.seen.startsWith('accepted')) problems.push(`control: the target's device could not publish (${targetPublished.seen})`);
    await waitUntil(() => ownSub.got.length > 0 && targetSub.got.length > 0, 5000, 'the controls\' deliveries').catch((err: Error) => problems.push(`control: ${err.message}`));
    await sleep(200);
    for (const s of subscriptions) {
      const crossed = s.got.filter((m) => m.includes(tenant) || m.includes(marker) || channels.some((c) => m.includes(c)));
      if (crossed.length) problems.push(`MQTT subscription ${s.filter}: delivered ${crossed.length} of the target's messages: ${crossed[0]!.slice(0, 160)}`);
    }
    if (targetSub.got.some((m) => m.includes(`"${marker}"`) && !m.startsWith(`m/${tenant}/c/${world.target.channel} `))) {
      problems.push('the target subscriber saw a message on an unexpected topic');
    }
  } finally {
    await Promise.all([...subscriptions.map((s) => end(s.client)), end(ownSub.client), end(targetSub.client)]);
  }
  return { problems, calls, targets: channels.length };
}
