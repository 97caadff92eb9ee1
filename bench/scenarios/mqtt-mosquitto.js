// Scenario: the reference for mqtt-publish: the same client load (--connections clients, one QoS 1 PUBLISH
// in flight each, same payload) against the machine's Mosquitto at 127.0.0.1:1883, which stores nothing.
// CPU = the mosquitto process. Skipped (reported as an error) when no Mosquitto listens there.
import { readFileSync, readdirSync } from 'node:fs';
import { driveMqtt } from './mqtt-publish.js';

const HOST_PORT = 1883;

export function mosquittoPid() {
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      if (readFileSync(`/proc/${name}/comm`, 'utf8').trim() === 'mosquitto') return Number(name);
    } catch {
      // exited meanwhile
    }
  }
  return null;
}

/** @param {string} name @param {number} inflight */
export function mosquittoScenario(name, inflight) {
  return {
    name,
    description: `reference: the ${name.replace('mosquitto', 'publish')} load against Mosquitto on 127.0.0.1:1883 (no storage, no auth)`,
    server: 'none',
    async run(/** @type {any} */ ctx) {
      const pid = mosquittoPid();
      if (!pid) {
        console.error('bench: mqtt-mosquitto: no mosquitto process found; skipped');
        return { requests: 0, errors: 1, serverCpuSeconds: {} };
      }
      const topic = `bench/${process.pid}/reference`;
      const clients = Array.from({ length: ctx.connections }, () => ({ topic }));
      return driveMqtt(ctx, { port: HOST_PORT, clients, roots: { mosquitto: pid, generator: process.pid }, includePostgres: false, inflight });
    },
  };
}

export default mosquittoScenario('mqtt-mosquitto', 1);
