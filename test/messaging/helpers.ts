// Messaging fixtures: workspaces, channels, devices with shared keys and grants written as SQL, plus
// publish/read helpers over the real listeners.
import { randomBytes } from 'node:crypto';
import type postgres from 'postgres';
import { adminToken, insertEntity, insertTenant } from '../helpers/auth.js';
import { gql, type TestService } from '../helpers/service.js';

export const SENML = 'application/senml+json';

export interface Device {
  id: string;
  key: string;
  credentialId: string;
}

export async function insertChannel(ts: TestService, tenantId: string, name = `ch-${randomBytes(3).toString('hex')}`, kind = 'channel'): Promise<string> {
  const [row] = await ts.service.sql<{ id: string }[]>`insert into resources (kind, name, tenant_id) values (${kind}, ${name}, ${tenantId}) returning id`;
  return row!.id;
}

/** A device in `tenantId` with a shared key created through GraphQL (createSharedKey). */
export async function insertDevice(ts: TestService, tenantId: string, name = `dev-${randomBytes(3).toString('hex')}`): Promise<Device> {
  const id = await insertEntity(ts, { name, kind: 'device', tenantId });
  const res = await gql(ts.url(), `mutation ($id: ID!) { createSharedKey(entityId: $id) { credentialId key } }`, { id }, await adminToken(ts));
  const created = res.body.data?.createSharedKey as { key: string; credentialId: string } | undefined;
  if (!created) throw new Error(`createSharedKey failed: ${JSON.stringify(res.body.errors)}`);
  return { id, key: created.key, credentialId: created.credentialId };
}

/** A direct policy: one allow block on the channel object with the given actions. */
export async function grant(ts: TestService, tenantId: string, entityId: string, channelId: string, actions: string[]): Promise<void> {
  const sql = ts.service.sql;
  const [block] = await sql<{ id: string }[]>`
    insert into permission_blocks (tenant_id, scope_mode, object_kind, object_id, effect)
    values (${tenantId}, 'object', 'resource', ${channelId}, 'allow') returning id`;
  await sql`insert into permission_block_actions (block_id, action_id) select ${block!.id}, id from actions where name in ${sql(actions)}`;
  await sql`insert into direct_policies (tenant_id, subject_kind, entity_id, block_id) values (${tenantId}, 'entity', ${entityId}, ${block!.id})`;
  await ts.service.authz.invalidate({ kind: 'subjects', entityIds: [entityId] });
}

export interface World {
  ws: string;
  channel: string;
  publisher: Device;
}

/** A workspace with one channel and one device allowed to publish and subscribe on it. */
export async function world(ts: TestService, name = `ws-${randomBytes(3).toString('hex')}`): Promise<World> {
  const ws = await insertTenant(ts, name);
  const channel = await insertChannel(ts, ws);
  const publisher = await insertDevice(ts, ws);
  await grant(ts, ws, publisher.id, channel, ['publish', 'subscribe']);
  return { ws, channel, publisher };
}

export interface TwoWorkspaces {
  ws: string;
  channel: string;
  /** May publish and subscribe on `channel`. */
  publisher: Device;
  /** May subscribe on `channel` only. */
  subscriber: Device;
  otherWs: string;
  otherChannel: string;
  /** Of the other workspace: may publish and subscribe on `otherChannel`, nothing in `ws`. */
  foreign: Device;
}

/** The world of the protocol tests: grants in one workspace, and another workspace's device to keep out. */
export async function twoWorkspaces(ts: TestService, prefix: string): Promise<TwoWorkspaces> {
  const [ws, otherWs] = await Promise.all([insertTenant(ts, `${prefix}-ws`), insertTenant(ts, `${prefix}-other`)]);
  const [channel, otherChannel] = await Promise.all([insertChannel(ts, ws), insertChannel(ts, otherWs)]);
  const [publisher, subscriber, foreign] = await Promise.all([insertDevice(ts, ws), insertDevice(ts, ws), insertDevice(ts, otherWs)]);
  await grant(ts, ws, publisher.id, channel, ['publish', 'subscribe']);
  await grant(ts, ws, subscriber.id, channel, ['subscribe']);
  await grant(ts, otherWs, foreign.id, otherChannel, ['publish', 'subscribe']);
  return { ws, channel, publisher, subscriber, otherWs, otherChannel, foreign };
}

export function publish(ts: TestService, ws: string, channel: string, key: string | null, body: unknown, options: { contentType?: string | null; subtopic?: string } = {}) {
  const headers: Record<string, string> = {};
  if (key !== null) headers.authorization = `Client ${key}`;
  const ct = options.contentType === undefined ? SENML : options.contentType;
  if (ct !== null) headers['content-type'] = ct;
  const path = `/http/m/${ws}/c/${channel}${options.subtopic ? `/${options.subtopic}` : ''}`;
  return fetch(`${ts.url('messaging')}${path}`, { method: 'POST', headers, body: typeof body === 'string' ? body : JSON.stringify(body) });
}

export async function read(ts: TestService, ws: string, channel: string, authorization: string | null, query = '') {
  const headers: Record<string, string> = {};
  if (authorization !== null) headers.authorization = authorization;
  const res = await fetch(`${ts.url('reader')}/${ws}/channels/${channel}/messages${query ? `?${query}` : ''}`, { headers });
  return { status: res.status, body: (await res.json()) as any };
}

export async function countRows(ts: TestService, channel?: string): Promise<number> {
  const sql = ts.service.sql;
  const [row] = channel === undefined
    ? await sql<{ n: number }[]>`select count(*)::int as n from messages`
    : await sql<{ n: number }[]>`select count(*)::int as n from messages where channel_id = ${channel}`;
  return row!.n;
}

/**
 * Holds the messages table in an exclusive lock (a slow database: every batch waits behind it) until the
 * returned release is called; release resolves once the lock is gone.
 */
export async function lockMessages(sql: Pick<postgres.Sql, 'begin'>): Promise<() => Promise<void>> {
  let unlock!: () => void;
  let locked!: () => void;
  const isLocked = new Promise<void>((r) => { locked = r; });
  const held = sql.begin(async (tx) => {
    await tx`lock table messages in access exclusive mode`;
    locked();
    await new Promise<void>((r) => { unlock = r; });
  });
  await isLocked;
  return async () => {
    unlock();
    await held;
  };
}
