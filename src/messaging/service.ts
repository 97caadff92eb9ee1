// The publish pipeline every transport shares: device and channel checks, the cached publish decision,
// SenML resolution, the group-commit writer, post-commit fan-out; and the reader's query.
import postgres from 'postgres';
import { principalOfDevice, type ClientPeer, type DeviceIdentity, type Principal } from '../auth/index.js';
import type { AuthzService } from '../authz/index.js';
import { createGenericPlanPool, reconnectDelaySecs, type Sql } from '../db/client.js';
import { answerTooLarge, AppError, forbidden, invalidInput, unauthenticated } from '../errors.js';
import { missingAnswer } from '../access/guard.js';
import type { Logger } from '../log.js';
import type { BatchItem } from './batch-literals.js';
import { mediaTypeOf, SENML_JSON } from './media-type.js';
import { createPartitionMaintenance, type PartitionSettings } from './partitions.js';
import { selectPage, type MessageRow, type ReadFilter } from './queries.js';
import { parseSenml } from './senml.js';
import { createRelay, type RelayDeps } from './relay.js';
import type { Messaging, PublishInput, PublishResult, StoredListener, StoredMessage, StoredSource } from './types.js';
import { createWriter, type WriterSettings } from './writer.js';

export interface MessagingSettings {
  maxMessageBytes: number;
  maxRecords: number;
  writer: Omit<WriterSettings, 'connectTimeoutSecs'>;
  partitions: PartitionSettings;
  /** answerMaxBytes: the most bytes one page may have (SVC_ANSWER_MAX_BYTES). */
  reader: { defaultLimit: number; maxLimit: number; connections: number; statementTimeoutMs: number; answerMaxBytes: number };
}

export interface MessagingDeps {
  /** The database URL: the writer opens its own connections (default plan mode, prepared insert). */
  url: string;
  sql: Sql;
  auth: { authenticateDeviceKey(key: string, from?: ClientPeer | null): Promise<DeviceIdentity | null>; peekDeviceKey(key: string): DeviceIdentity | undefined };
  authz: Pick<AuthzService, 'decide' | 'engine'>;
  settings: MessagingSettings;
  connectTimeoutSecs: number;
  log: Logger;
  /** With it, messages reach live sockets and CoAP observers held by other instances (relay.ts). */
  hub?: RelayDeps['hub'];
}

export type Subject = { device: DeviceIdentity } | { principal: Principal };

/** A reader page request: the channel comes from the path, the rest from the query (routes.ts readQuery). */
export type ReadQuery = Omit<ReadFilter, 'channelId'>;

export interface ReadPage {
  offset: number;
  limit: number;
  format: 'messages';
  total: number;
  messages: MessageRow[];
}

export interface MessagingService extends Messaging {
  /** Partitions for today and the days ahead exist before the first publish; then the periodic task. */
  start(): Promise<void>;
  read(subject: Subject, workspaceId: string, channelId: string, query: ReadQuery): Promise<ReadPage>;
  /** One partition maintenance pass now (tests; operators wanting it before the next interval). */
  runMaintenance(now?: Date): Promise<boolean>;
  readonly settings: MessagingSettings;
}

function isSenmlJson(contentType: string): boolean {
  return contentType === SENML_JSON || mediaTypeOf(contentType) === SENML_JSON;
}

/** The object is a live channel resource of this workspace. */
function isChannelOf(facts: { tenantId: string | null; type: string | null } | null | undefined, workspaceId: string): boolean {
  return facts != null && facts.tenantId === workspaceId && facts.type === 'resource:channel';
}

function denied(reason: string): AppError {
  // 'forbidden' stays the first part (clients split on ';'); tenant and subject states say why.
  return reason.startsWith('tenant is') || reason.startsWith('subject is') ? forbidden(`forbidden; ${reason}`) : forbidden();
}

export function createMessaging(deps: MessagingDeps): MessagingService {
  const { sql, auth, authz, settings, log } = deps;
  const listeners = new Set<StoredListener>();
  const principals = new WeakMap<DeviceIdentity, Principal>();
  // The publish decision's memo key per device and channel, built once: a held key's identity is one
  // object for as long as it is cached, and only channels it was allowed on are kept (its grants bound them).
  const publishKeys = new WeakMap<DeviceIdentity, Map<string, string>>();
  const counters = { rejected: 0, received: { messages: 0, bytes: 0 } };

  function dispatch(messages: StoredMessage[], source: StoredSource): void {
    for (const l of listeners) {
      try {
        l(messages, source);
      } catch (err) {
        log.error('stored-message listener failed', { err });
      }
    }
  }
  const relay = deps.hub === undefined ? undefined : createRelay({
    hub: deps.hub, log, deliver: dispatch,
    connect: () => postgres(deps.url, {
      max: 1, fetch_types: false, idle_timeout: 60, connect_timeout: deps.connectTimeoutSecs, onnotice: () => undefined,
      backoff: reconnectDelaySecs, connection: { application_name: 'svc-relay' },
    }) as unknown as Sql,
  });
  const writer = createWriter(deps.url, { ...settings.writer, connectTimeoutSecs: deps.connectTimeoutSecs }, log, (jobs: readonly BatchItem[]) => {
    if (listeners.size === 0 && relay === undefined) return;
    for (const job of jobs) {
      const head = job.messages[0] as StoredMessage;
      const source = { workspaceId: job.workspaceId, channelId: head.channel, subtopic: head.subtopic };
      dispatch(job.messages, source);
      relay?.relay(job.messages, source);
    }
  });
  const maintenance = createPartitionMaintenance(sql, settings.partitions, log);
  // The reader's own connections with generic plans forced: a custom plan re-plans the merge across
  // every partition on each page (0.5 ms), and PostgreSQL would keep choosing custom plans by itself,
  // because a generic plan's LIMIT $n is costed as a tenth of the table. The generic plan is the right
  // one for every page (backward index scans on (channel_id, time) merged by time).
  const readerSql = createGenericPlanPool(deps.url, {
    name: 'svc-reader', max: settings.reader.connections, connectTimeoutSecs: deps.connectTimeoutSecs,
    statementTimeoutMs: settings.reader.statementTimeoutMs, fetchTypes: false,
  });

  function principalOf(device: DeviceIdentity): Principal {
    let p = principals.get(device);
    if (p === undefined) principals.set(device, (p = principalOfDevice(device)));
    return p;
  }

  /**
   * The channel must be a live channel resource of this workspace (engine facts: cached, invalidated with
   * it). Anything else answers as guard.missing says: 'channel not found' only to a caller reading the
   * workspace's resources (or every tenant's), 'forbidden' to the rest, who are refused on a real channel
   * they hold no grant on that same way. A device reads no kind as a whole: always 'forbidden'.
   */
  async function requireChannel(p: Principal, workspaceId: string, channelId: string): Promise<void> {
    if (isChannelOf(await authz.engine.objectFacts('resource', channelId), workspaceId)) return;
    throw await missingAnswer(authz, p, 'resource', 'channel', { tenantId: workspaceId });
  }

  async function requireDevice(device: DeviceIdentity, workspaceId: string, action: 'publish' | 'subscribe', channelId: string): Promise<void> {
    if (device.status !== 'active') throw forbidden('forbidden; device is not active');
    if (device.tenantId !== workspaceId) throw forbidden('forbidden; the device does not belong to this workspace');
    await requireChannel(principalOf(device), workspaceId, channelId);
    const d = await authz.decide(principalOf(device), action, { kind: 'resource', id: channelId });
    if (!d.allowed) throw denied(d.reason);
  }

  /**
   * The warm path without a promise: key, channel facts and decision all memoised by the engine. Any
   * miss (or a deny, which may need auditing) goes the awaited way through requireDevice.
   */
  function allowedNow(device: DeviceIdentity, workspaceId: string, channelId: string): boolean {
    if (device.status !== 'active' || device.tenantId !== workspaceId) return false;
    if (!isChannelOf(authz.engine.peekObject('resource', channelId), workspaceId)) return false;
    let keys = publishKeys.get(device);
    const known = keys?.get(channelId);
    const key = known ?? authz.engine.keyOf({ subjectId: device.entityId, action: 'publish', object: { kind: 'resource', id: channelId } });
    const d = authz.engine.peekKey(key);
    if (d === undefined || !d.allowed) return false;
    if (known === undefined) {
      if (keys === undefined) publishKeys.set(device, (keys = new Map()));
      keys.set(channelId, key);
    }
    return true;
  }

  function checkPayload(input: PublishInput): void {
    const payload = input.payload;
    const bytes = typeof payload === 'string' ? Buffer.byteLength(payload) : payload.byteLength;
    if (bytes > settings.maxMessageBytes) {
      throw new AppError('PAYLOAD_TOO_LARGE', `message exceeds the limit of ${settings.maxMessageBytes} bytes`);
    }
    if (input.contentType !== undefined && input.contentType !== null && !isSenmlJson(input.contentType)) {
      throw new AppError('UNSUPPORTED_MEDIA_TYPE', `content type must be ${SENML_JSON}`);
    }
  }

  function resolve(device: DeviceIdentity, input: PublishInput): StoredMessage[] {
    return parseSenml(input.payload, {
      channel: input.channelId, publisher: device.entityId, protocol: input.protocol, subtopic: input.subtopic ?? null,
    }, settings);
  }

  /** Writer failures count as failed in its own stats, not as rejected; what it committed, as acknowledged. */
  function store(workspaceId: string, messages: StoredMessage[]): Promise<PublishResult> {
    return writer.write(workspaceId, messages, { stored: messages.length, messages });
  }

  async function publishChecked(device: DeviceIdentity, input: PublishInput): Promise<PublishResult> {
    let messages: StoredMessage[];
    try {
      await requireDevice(device, input.workspaceId, 'publish', input.channelId);
      messages = resolve(device, input);
    } catch (err) {
      counters.rejected++;
      throw err;
    }
    return store(input.workspaceId, messages);
  }

  function publish(device: DeviceIdentity, input: PublishInput): Promise<PublishResult> {
    let messages: StoredMessage[];
    try {
      checkPayload(input);
      if (!allowedNow(device, input.workspaceId, input.channelId)) return publishChecked(device, input);
      messages = resolve(device, input);
    } catch (err) {
      counters.rejected++;
      return Promise.reject(err);
    }
    return store(input.workspaceId, messages);
  }

  function count(payload: Buffer | string): void {
    counters.received.messages++;
    counters.received.bytes += typeof payload === 'string' ? Buffer.byteLength(payload) : payload.byteLength;
  }

  async function authorizeSubscribe(subject: Subject, workspaceId: string, channelId: string): Promise<void> {
    if ('device' in subject) return requireDevice(subject.device, workspaceId, 'subscribe', channelId);
    await requireChannel(subject.principal, workspaceId, channelId);
    const object = { kind: 'resource' as const, id: channelId };
    // Reading a frozen tenant's data stays allowed (SPEC: frozen data remains readable).
    const read = await authz.decide(subject.principal, 'read', object, { readingFrozenTenant: true });
    if (read.allowed) return;
    const sub = await authz.decide(subject.principal, 'subscribe', object, { readingFrozenTenant: true });
    if (!sub.allowed) throw denied(read.reason);
  }

  return {
    settings,
    async start() {
      await maintenance.run();
      maintenance.start();
      await relay?.start();
    },
    runMaintenance: (now) => maintenance.run(now),
    publishAsDevice(device, input) {
      count(input.payload);
      return publish(device, input);
    },
    publishWithKey(key, input, from) {
      count(input.payload);
      // A key this instance holds verified already answers without a promise step.
      const known = auth.peekDeviceKey(key);
      if (known !== undefined) return publish(known, input);
      return auth.authenticateDeviceKey(key, from).then((device) => {
        if (device !== null) return publish(device, input);
        counters.rejected++;
        throw unauthenticated('invalid device key');
      });
    },
    authorizeSubscribe,
    watch(channelId) {
      return relay?.watch(channelId) ?? (() => undefined);
    },
    onStored(listener) {
      listeners.add(listener);
      return () => {
        listeners.delete(listener);
      };
    },
    batches: writer.batches,
    stats() {
      const w = writer.stats();
      return {
        queued: w.queued, highWater: w.highWater, batches: w.batches, stored: w.stored,
        acknowledged: w.committed, rejected: counters.rejected, failed: w.failed,
        received: { messages: counters.received.messages, bytes: counters.received.bytes },
      };
    },
    async read(subject, workspaceId, channelId, query) {
      await authorizeSubscribe(subject, workspaceId, channelId);
      if (query.from !== undefined && query.to !== undefined && query.from > query.to) throw invalidInput("'from' must not be after 'to'");
      const filter: ReadFilter = { channelId, ...query };
      const page = await selectPage(readerSql, filter, settings.reader.answerMaxBytes);
      if (page.overCap) throw answerTooLarge(settings.reader.answerMaxBytes);
      return { offset: query.offset, limit: query.limit, format: 'messages', total: page.total, messages: page.rows };
    },
    async close() {
      maintenance.close();
      await writer.close();
      await relay?.close();
      listeners.clear();
      await readerSql.end({ timeout: 5 });
    },
  };
}
