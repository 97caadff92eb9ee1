// Owns the soak's operations: one async function per kind of request, alternating between the two
// instances by sequence number. Each resolves when the service acknowledged (and records what it
// acknowledged: message values, credential ids, serials, for the stored check at the end) or throws an
// Error whose message is the error class counted in the slice ("HTTP 503", "GraphQL CONFLICT", ...).
import { execFile } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { readFileSync, unlinkSync } from 'node:fs';
import { Agent, request as httpsRequest } from 'node:https';
import path from 'node:path';
import { promisify } from 'node:util';
import mqtt from 'mqtt';
import { Agent as UndiciAgent, request } from 'undici';
import { createCoapClient } from './coap-client.js';
import { ocspStatus } from './ocsp-load.js';
import { ISSUE } from './pki-fixture.js';
import { CUSTOM_PATH } from './soak-world.js';

const run = promisify(execFile);
const REQUEST_TIMEOUT_MS = 30_000;
const RENEW = 'mutation ($i: RenewCertificateFromCsrV2Input!) { renewCertificateFromCsrV2(input: $i) { idempotentReplay certificate { credentialId } } }';
const READ = 'query ($t: ID!) { entities(tenantId: $t, limit: 20) { total items { id name status } } }';
const WRITE = 'mutation ($id: ID!, $a: JSON!) { updateEntity(id: $id, input: {attributes: $a}) { id } }';
const record = (/** @type {number} */ seq) => JSON.stringify([{ bn: 'urn:dev:soak:', n: 'seq', v: seq }]);

/** @typedef {{pid: number, ports: Record<string, number>, token: string}} Instance */

/**
 * The acknowledged set: message sequence numbers per protocol, credential ids, EST serials.
 * @typedef {{messages: Record<'http'|'mqtt'|'coap', number[]>, credentials: string[], estSerials: string[]}} Acknowledged
 */

/** An answer's text as an error class: ids and numbers masked, so that one cause counts as one class. */
const errorText = (/** @type {Buffer} */ body) => body.toString().replace(/[0-9a-f]{8}-[0-9a-f-]{27}/g, '<id>').replace(/\d+/g, 'N').slice(0, 90);

/** An HTTP exchange through undici with a deadline; a status other than `expect` throws "HTTP <status>". */
async function call(/** @type {UndiciAgent} */ dispatcher, /** @type {string} */ url, /** @type {any} */ opts, /** @type {number} */ expect) {
  const res = await request(url, { dispatcher, headersTimeout: REQUEST_TIMEOUT_MS, bodyTimeout: REQUEST_TIMEOUT_MS, ...opts });
  const body = Buffer.from(await res.body.arrayBuffer());
  if (res.statusCode !== expect) throw new Error(`HTTP ${res.statusCode} ${errorText(body)}`);
  return body;
}

/** POST /graphql; a GraphQL error throws "GraphQL <code>". */
async function gql(/** @type {UndiciAgent} */ dispatcher, /** @type {Instance} */ inst, /** @type {string} */ query, /** @type {any} */ variables) {
  const body = await call(dispatcher, `http://127.0.0.1:${inst.ports.http}/graphql`, {
    method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${inst.token}` }, body: JSON.stringify({ query, variables }),
  }, 200);
  const out = JSON.parse(body.toString());
  if (out.errors) throw new Error(`GraphQL ${out.errors[0]?.extensions?.code} ${errorText(Buffer.from(String(out.errors[0]?.message)))}`);
  return out.data;
}

/** The first certificate of a certs-only PKCS#7 (an EST answer): ContentInfo → [0] SignedData → [0] certificates. */
function firstCertificate(/** @type {Buffer} */ der) {
  const tlv = (/** @type {number} */ off) => {
    const first = /** @type {number} */ (der[off + 1]);
    if (first < 128) return { start: off + 2, end: off + 2 + first };
    let len = 0;
    for (let i = 0; i < (first & 0x7f); i++) len = len * 256 + /** @type {number} */ (der[off + 2 + i]);
    return { start: off + 2 + (first & 0x7f), end: off + 2 + (first & 0x7f) + len };
  };
  const contentInfo = tlv(0);
  const oid = tlv(contentInfo.start);
  const signedData = tlv(tlv(oid.end).start); // [0] EXPLICIT → SEQUENCE
  let off = signedData.start;
  while (off < signedData.end && der[off] !== 0xa0) off = tlv(off).end; // version, digestAlgorithms, encapContentInfo
  const certs = tlv(off);
  return new X509Certificate(der.subarray(certs.start, tlv(certs.start).end));
}

/**
 * Fresh CSRs for EST (an EST request's idempotency key is its CSR's hash, so each enrollment needs a new
 * one): `openssl req` with the fixture's leaf key, kept `ahead` in advance, made asynchronously.
 */
function csrPool(/** @type {string} */ caDir, ahead = 16) {
  /** @type {Buffer[]} */
  const ready = [];
  let making = 0;
  let n = 0;
  const make = async () => {
    making++;
    const out = path.join(caDir, `soak-est-${n++}.der`);
    try {
      await run('openssl', ['req', '-new', '-key', path.join(caDir, 'leaf.key'), '-subj', '/CN=soak est', '-outform', 'DER', '-out', out]);
      ready.push(readFileSync(out));
      unlinkSync(out);
    } finally {
      making--;
    }
  };
  const fill = () => {
    while (ready.length + making < ahead) make().catch((err) => console.error(`soak: openssl req failed: ${err.message}`));
  };
  fill();
  return {
    take() {
      const csr = ready.shift();
      fill();
      if (!csr) throw new Error('no CSR ready');
      return csr;
    },
    warm: async () => { while (ready.length < ahead) await new Promise((r) => setTimeout(r, 50)); },
  };
}

/**
 * @param {{instances: Instance[], world: any, caDir: string, acknowledged: Acknowledged, listenerCert: string, events: any[]}} opts
 */
export async function createOperations({ instances, world, caDir, acknowledged, listenerCert, events }) {
  // Idle connections are dropped after 4 s, well before uWS closes them (10 s idle): at equal timeouts a
  // request sent on a connection the server is closing at that moment fails with ECONNRESET (seen in the
  // first 30-minute run, twice, away from any backend kill): the generator's race, not the service's.
  const dispatcher = new UndiciAgent({ connections: 32, pipelining: 1, keepAliveTimeout: 4_000, keepAliveMaxTimeout: 4_000 });
  const pick = (/** @type {number} */ seq) => /** @type {Instance} */ (instances[seq % instances.length]);
  const device = (/** @type {number} */ seq) => world.devices[Math.floor(seq / instances.length) % world.devices.length];

  // MQTT: one client per (instance, device), clean session, reconnecting by itself.
  const mqttClients = instances.map((inst, i) => world.devices.map((/** @type {any} */ d, j) => mqtt.connect(`mqtt://127.0.0.1:${inst.ports.mqtt}`, {
    clientId: `soak-${i}-${j}`, username: d.id, password: d.key, reconnectPeriod: 1000, connectTimeout: 10_000, clean: true,
  })));
  await Promise.all(mqttClients.flat().map((c) => new Promise((resolve, reject) => { c.once('connect', resolve); c.once('error', reject); })));
  // After the first CONNACK: every loss of a connection is an event of the run (when, which instance, why).
  let closing = false;
  mqttClients.forEach((list, i) => list.forEach((c) => {
    c.on('close', () => closing || events.push({ at: new Date().toISOString(), what: 'mqtt close', instance: i }));
    c.on('error', (err) => events.push({ at: new Date().toISOString(), what: `mqtt error ${err.message.slice(0, 80)}`, instance: i }));
    c.on('disconnect', (packet) => events.push({ at: new Date().toISOString(), what: `mqtt DISCONNECT ${packet.reasonCode ?? ''}`, instance: i }));
  }));
  const coapClients = instances.map((inst) => createCoapClient(inst.ports.coap));
  const estAgent = new Agent({ keepAlive: false, ca: readFileSync(listenerCert) });
  const csrs = csrPool(caDir);
  await csrs.warm();

  // Renewal chains: one per device, never two renewals of one chain at once (a certificate renews once).
  const chains = world.renewalHeads.map((/** @type {string} */ id) => ({ current: id, busy: false }));

  /** @type {Record<string, (seq: number) => Promise<void>>} */
  const ops = {
    async 'http-publish'(seq) {
      const inst = pick(seq);
      const d = device(seq);
      await call(dispatcher, `http://127.0.0.1:${inst.ports.messaging}/http/m/${world.tenant}/c/${world.channels.http}`, {
        method: 'POST', headers: { 'content-type': 'application/senml+json', authorization: `Client ${d.key}` }, body: record(seq),
      }, 202);
      acknowledged.messages.http.push(seq);
    },
    async 'mqtt-publish'(seq) {
      const client = /** @type {mqtt.MqttClient} */ (mqttClients[seq % instances.length]?.[Math.floor(seq / instances.length) % world.devices.length]);
      if (!client.connected) throw new Error('MQTT not connected');
      await new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error('MQTT PUBACK timeout')), REQUEST_TIMEOUT_MS);
        client.publish(`m/${world.tenant}/c/${world.channels.mqtt}`, record(seq), { qos: 1 }, (err) => {
          clearTimeout(timer);
          if (err) reject(new Error(`MQTT ${err.message.slice(0, 60)}`));
          else resolve(undefined);
        });
      });
      acknowledged.messages.mqtt.push(seq);
    },
    async 'coap-publish'(seq) {
      const d = device(seq);
      const code = await /** @type {any} */ (coapClients[seq % instances.length]).post(['m', world.tenant, 'c', world.channels.coap], `auth=${d.key}`, record(seq));
      if (code !== '2.04') throw new Error(`CoAP ${code}`);
      acknowledged.messages.coap.push(seq);
    },
    async 'authz-check'(seq) {
      const inst = pick(seq);
      const body = await call(dispatcher, `http://127.0.0.1:${inst.ports.http}/authz/check`, {
        method: 'POST', headers: { authorization: `Bearer ${inst.token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ subject_id: device(seq).id, action: 'publish', resource_id: world.channels.http }),
      }, 200);
      if (JSON.parse(body.toString()).allowed !== true) throw new Error('authz denied');
    },
    async 'graphql-read'(seq) {
      const data = await gql(dispatcher, pick(seq), READ, { t: world.tenant });
      if (data.entities.total !== world.devices.length) throw new Error('GraphQL read: wrong total');
    },
    async 'graphql-write'(seq) {
      await gql(dispatcher, pick(seq), WRITE, { id: device(seq).id, a: { soak: seq } });
    },
    async 'custom-endpoint'(seq) {
      const inst = pick(seq);
      const d = device(seq);
      const body = await call(dispatcher, `http://127.0.0.1:${inst.ports.http}${CUSTOM_PATH}?id=${d.id}`, { headers: { authorization: `Bearer ${inst.token}` } }, 200);
      if (JSON.parse(body.toString()).entity?.id !== d.id) throw new Error('custom endpoint: wrong entity');
    },
    async 'cert-issue'(seq) {
      const data = await gql(dispatcher, pick(seq), ISSUE, { i: { entityId: device(seq).id, csrPem: world.csrPem, idempotencyKey: `soak-issue-${seq}` } });
      acknowledged.credentials.push(data.issueCertificateFromCsrV2.certificate.credentialId);
    },
    async 'cert-renew'(seq) {
      const chain = chains.find((/** @type {any} */ c) => !c.busy);
      if (!chain) throw new Error('every renewal chain busy');
      chain.busy = true;
      try {
        const data = await gql(dispatcher, pick(seq), RENEW, { i: { credentialId: chain.current, csrPem: world.csrPem, idempotencyKey: `soak-renew-${seq}` } });
        chain.current = data.renewCertificateFromCsrV2.certificate.credentialId;
        acknowledged.credentials.push(chain.current);
      } finally {
        chain.busy = false;
      }
    },
    async ocsp(seq) {
      const inst = pick(seq);
      const body = await call(dispatcher, `http://127.0.0.1:${inst.ports.http}${world.ocspPath}`, {
        method: 'POST', headers: { 'content-type': 'application/ocsp-request' }, body: world.ocspRequests[seq % world.ocspRequests.length],
      }, 200);
      if (ocspStatus(body) !== 0) throw new Error('OCSP not successful');
    },
    async 'est-simpleenroll'(seq) {
      const inst = pick(seq);
      const d = device(seq);
      const csr = csrs.take().toString('base64');
      const answer = await new Promise((resolve, reject) => {
        const req = httpsRequest({
          host: '127.0.0.1', port: inst.ports.enrollment, method: 'POST', path: '/.well-known/est/simpleenroll', agent: estAgent, timeout: REQUEST_TIMEOUT_MS,
          headers: { 'content-type': 'application/pkcs10', authorization: `Basic ${Buffer.from(`${d.id}:${d.key}`).toString('base64')}`, 'content-length': csr.length },
        }, (res) => {
          /** @type {Buffer[]} */
          const parts = [];
          res.on('data', (c) => parts.push(c));
          res.on('end', () => (res.statusCode === 200 ? resolve(Buffer.concat(parts).toString()) : reject(new Error(`EST HTTP ${res.statusCode}`))));
          res.on('error', reject);
        });
        req.on('timeout', () => req.destroy(new Error('EST timeout')));
        req.on('error', (err) => reject(err.message.startsWith('EST') ? err : new Error(`EST ${/** @type {any} */ (err).code ?? err.message}`)));
        req.end(csr);
      });
      acknowledged.estSerials.push(firstCertificate(Buffer.from(/** @type {string} */ (answer), 'base64')).serialNumber.toLowerCase());
    },
  };

  return {
    ops,
    async close() {
      closing = true;
      await Promise.all(mqttClients.flat().map((c) => new Promise((r) => c.end(false, {}, () => r(undefined)))));
      for (const c of coapClients) c.close();
      estAgent.destroy();
      await dispatcher.close();
    },
  };
}
