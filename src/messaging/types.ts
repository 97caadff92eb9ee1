// The messaging pipeline's contract with its transports (HTTP here, MQTT and CoAP in their own domains).
import type { ClientPeer, DeviceIdentity, Principal } from '../auth/index.js';
import type { BucketCounts } from '../metrics/buckets.js';

export type Protocol = 'http' | 'mqtt' | 'coap';

/** One resolved SenML record as stored and delivered (RFC 8428 resolved form plus where it came from). */
export interface StoredMessage {
  channel: string;
  publisher: string;
  protocol: Protocol;
  subtopic: string | null;
  /** bn + n */
  name: string;
  /** u, else bu */
  unit: string | null;
  /** Seconds: bt + t, made absolute (relative to the receive time) when below 2^28. */
  time: number;
  /** v + bv */
  value: number | null;
  stringValue: string | null;
  boolValue: boolean | null;
  dataValue: string | null;
  /** s + bs */
  sum: number | null;
  /** ut, when present (seconds). */
  updateTime?: number | null;
}

export interface PublishInput {
  workspaceId: string;
  channelId: string;
  subtopic?: string | null;
  protocol: Protocol;
  payload: Buffer | string;
  contentType?: string | null;
}

export interface PublishResult {
  stored: number;
  messages: StoredMessage[];
}

export interface StoredSource {
  workspaceId: string;
  channelId: string;
  subtopic: string | null;
  /** Committed by another instance and relayed here (relay.ts): for this instance's watchers only. */
  remote?: boolean;
}

export type StoredListener = (messages: StoredMessage[], source: StoredSource) => void;

export interface WriterStats {
  /** Messages waiting for a batch now, and the most ever waiting. */
  queued: number;
  highWater: number;
  /** Batches committed. */
  batches: number;
  /** Messages committed. */
  stored: number;
  /** Publishes answered as stored (after their batch committed). */
  acknowledged: number;
  /** Publishes refused before reaching the writer (auth, authz, validation, queue full). */
  rejected: number;
  /** Publishes whose batch failed (database unavailable): answered 503, nothing acknowledged. */
  failed: number;
  /** Publishes and payload bytes that reached the pipeline. */
  received: { messages: number; bytes: number };
}

/** Rows per committed batch and seconds from a batch's start to its commit (one observation per batch). */
export interface WriterBatches {
  rows: BucketCounts;
  commitSeconds: BucketCounts;
}

export interface Messaging {
  /**
   * Device publish: key already resolved by the caller (HTTP/CoAP pass the raw key, MQTT the identity it
   * authenticated). Checks the device is active and of that workspace, the channel exists in it, publish
   * is allowed (engine, cached); parses and normalises SenML; resolves once the batch holding the
   * messages is committed. Throws AppError: UNAUTHENTICATED 401, FORBIDDEN 403, NOT_FOUND 404,
   * UNSUPPORTED_MEDIA_TYPE 415, INVALID_INPUT 400 naming the record and field, PAYLOAD_TOO_LARGE 413,
   * UNAVAILABLE 503 (queue full or database down, with retryAfterSeconds). Nothing is stored when it throws.
   */
  publishAsDevice(device: DeviceIdentity, input: PublishInput): Promise<PublishResult>;
  /** `from`: the publishing client, whose address a key not cached is throttled by (auth's address throttle). */
  publishWithKey(key: string, input: PublishInput, from?: ClientPeer): Promise<PublishResult>;
  /**
   * May this device (or bearer principal) receive messages of the channel? (subscribe for devices, read
   * or subscribe for principals). Throws like above.
   */
  authorizeSubscribe(subject: { device: DeviceIdentity } | { principal: Principal }, workspaceId: string, channelId: string): Promise<void>;
  /**
   * Every committed message, after commit (live fan-out: WebSocket here, cross-protocol delivery there);
   * also, marked remote, messages other instances committed on a channel watched here.
   */
  onStored(listener: StoredListener): () => void;
  /**
   * This instance holds a subscriber of the channel (a live socket, a CoAP observation) until the returned
   * release is called: other instances relay what they store on it (counted per channel).
   */
  watch(channelId: string): () => void;
  /** Writer counters for the broker stats API. */
  stats(): WriterStats;
  /** Rows per committed batch and commit seconds (metrics). */
  readonly batches: WriterBatches;
  close(): Promise<void>;
}
