// The broker statistics object of SPEC.md, assembled from this service's real counters: the MQTT broker's
// snapshot, the ingest writer's stats, and zeros for AMQP, which this service does not serve.
import type { WriterStats } from '../messaging/index.js';
import type { MqttSnapshot } from '../mqtt/index.js';

const zeroConnections = () => ({ current: 0, total: 0, disconnections: 0 });

/** Every AMQP field SPEC.md lists, all zero: no AMQP listener exists here. */
export function amqpZeros() {
  return {
    connections: zeroConnections(),
    messages: { received: 0, sent: 0 },
    bytes: { received: 0, sent: 0 },
    channels: 0,
    consumers: 0,
    errors: { protocol: 0 },
    local_principals: {
      active_connections: 0,
      publish_timeouts: 0,
      publish_rejections: 0,
      authentication: { success: 0, failure: 0 },
      authorization: { publish_denied: 0, subscribe_denied: 0, operation_denied: 0 },
      reloads: { success: 0, failure: 0, forced_disconnects: 0 },
    },
  };
}

/**
 * The ingest writer seen as the broker's queue (README "Broker statistics"): pending = publishes waiting
 * for a batch; ack = publishes acknowledged after commit, nack = publishes whose batch failed (answered
 * 503, to be retried), reject = publishes refused before the queue (auth, authz, validation, queue full);
 * capture_failures = nack (the store refused the write). Nothing is dropped unanswered (capture_dropped),
 * dead-lettered (dlq), claimed or stolen by consumer groups (claims, steals): those stay zero.
 */
export function queueStats(w: WriterStats) {
  return {
    capture_failures: w.failed,
    capture_dropped: 0,
    claims: { attempts: 0, successes: 0, failures: 0 },
    steals: { attempts: 0, successes: 0, failures: 0 },
    acknowledgments: { ack: w.acknowledged, nack: w.failed, reject: w.rejected, dlq: 0 },
    pending: { current: w.queued, high_water: w.highWater },
  };
}

/** Totals are MQTT plus AMQP (zero), as SPEC.md's by_protocol split implies. */
export function buildStats(mqtt: MqttSnapshot, writer: WriterStats, uptimeSeconds: number) {
  const amqp = amqpZeros();
  return {
    uptime_seconds: uptimeSeconds,
    connections: {
      current: mqtt.connections.current + amqp.connections.current,
      total: mqtt.connections.total + amqp.connections.total,
      disconnections: mqtt.connections.disconnections + amqp.connections.disconnections,
    },
    messages: { received: mqtt.messages.received + amqp.messages.received, sent: mqtt.messages.sent + amqp.messages.sent },
    bytes: { received: mqtt.bytes.received + amqp.bytes.received, sent: mqtt.bytes.sent + amqp.bytes.sent },
    errors: { protocol: mqtt.errors.protocol + amqp.errors.protocol },
    by_protocol: {
      mqtt: {
        connections: mqtt.connections,
        messages: mqtt.messages,
        bytes: mqtt.bytes,
        subscriptions: mqtt.subscriptions,
        errors: mqtt.errors,
      },
      amqp,
    },
    queues: queueStats(writer),
  };
}

export type BrokerStats = ReturnType<typeof buildStats>;
