// The MQTT broker's own counters (src/mqtt/metrics.ts), also behind the broker admin API.
import type { Registry } from 'prom-client';
import type { MqttBroker } from '../mqtt/index.js';
import { one, scrapedCounter, scrapedGauge } from './scraped.js';

export function mqttMetrics(registry: Registry, mqtt: MqttBroker): void {
  const c = mqtt.counters;
  scrapedGauge(registry, 'svc_mqtt_connections', 'MQTT clients connected now (TCP, TLS and WebSocket)', () => one(c.connectionsTotal - c.disconnections));
  scrapedCounter(registry, 'svc_mqtt_connections_total', 'MQTT client connections accepted since the start', () => one(c.connectionsTotal));
  scrapedCounter(registry, 'svc_mqtt_packets_total', 'MQTT control packets, by direction (received, sent)', () => [
    { labels: { direction: 'received' }, value: c.packetsReceived }, { labels: { direction: 'sent' }, value: c.packetsSent },
  ]);
  scrapedCounter(registry, 'svc_mqtt_messages_total', 'MQTT PUBLISH packets, by direction (received from clients, sent to subscribers)', () => [
    { labels: { direction: 'received' }, value: c.publishReceived }, { labels: { direction: 'sent' }, value: c.publishSent },
  ]);
  scrapedCounter(registry, 'svc_mqtt_bytes_total', 'MQTT socket bytes, by direction', () => {
    const b = mqtt.bytes();
    return [{ labels: { direction: 'received' }, value: b.received }, { labels: { direction: 'sent' }, value: b.sent }];
  });
  scrapedCounter(registry, 'svc_mqtt_errors_total', 'MQTT refusals, by cause (protocol, auth, authz, packet)', () => [
    { labels: { cause: 'protocol' }, value: c.errors.protocol }, { labels: { cause: 'auth' }, value: c.errors.auth },
    { labels: { cause: 'authz' }, value: c.errors.authz }, { labels: { cause: 'packet' }, value: c.errors.packet },
  ]);
}
