// MQTT counters from real broker events: packets and PUBLISHes in and out, socket bytes, connections,
// and refusals by cause. Plain numbers bumped on the hot path; the admin API reads a snapshot.
/** A client's connection as the counters read it: a TCP socket, or the stream of an MQTT WebSocket. */
export interface TrackedConnection {
  readonly bytesRead: number;
  readonly bytesWritten: number;
  once(event: 'close', listener: () => void): unknown;
}

export interface MqttErrors {
  /** Malformed packets, unsupported protocol versions, connections that never sent CONNECT. */
  protocol: number;
  /** CONNECTs refused: unknown, revoked or mismatched key, inactive device. */
  auth: number;
  /** PUBLISH or SUBSCRIBE refused by authorization (or on a topic outside m/<ws>/c/<ch>). */
  authz: number;
  /** Well-formed packets the broker refused: invalid SenML payload, wildcard in a PUBLISH, too many levels. */
  packet: number;
}

export interface MqttCounters {
  connectionsTotal: number;
  disconnections: number;
  /** Control packets of every type, like Mosquitto's $SYS messages/received and messages/sent. */
  packetsReceived: number;
  packetsSent: number;
  publishReceived: number;
  publishSent: number;
  errors: MqttErrors;
}

export interface MqttMetrics {
  readonly counters: MqttCounters;
  trackSocket(socket: TrackedConnection): void;
  /** A packet parsed from a client; counts the reply the broker owes for it too. */
  packetIn(packet: { cmd: string; qos?: number }): void;
  /** A packet the broker wrote that packetIn could not foresee (CONNACK, PUBACK/PUBREC, PUBLISH). */
  packetOut(publish: boolean): void;
  bytes(): { received: number; sent: number };
}

// Replies owed for a received packet, written by aedes without an event we could count.
const REPLY: Record<string, number> = { pingreq: 1, subscribe: 1, unsubscribe: 1, pubrel: 1, pubrec: 1 };

export function createMqttMetrics(): MqttMetrics {
  const counters: MqttCounters = {
    connectionsTotal: 0, disconnections: 0, packetsReceived: 0, packetsSent: 0, publishReceived: 0, publishSent: 0,
    errors: { protocol: 0, auth: 0, authz: 0, packet: 0 },
  };
  // Bytes come from the sockets themselves: live ones are read at snapshot time, closed ones folded in.
  const live = new Set<TrackedConnection>();
  let closedIn = 0;
  let closedOut = 0;
  return {
    counters,
    trackSocket(socket) {
      live.add(socket);
      socket.once('close', () => {
        live.delete(socket);
        closedIn += socket.bytesRead;
        closedOut += socket.bytesWritten;
      });
    },
    packetIn(packet) {
      counters.packetsReceived++;
      if (packet.cmd === 'publish') counters.publishReceived++;
      const reply = REPLY[packet.cmd];
      if (reply) counters.packetsSent += reply;
    },
    packetOut(publish) {
      counters.packetsSent++;
      if (publish) counters.publishSent++;
    },
    bytes() {
      let received = closedIn;
      let sent = closedOut;
      for (const s of live) {
        received += s.bytesRead;
        sent += s.bytesWritten;
      }
      return { received, sent };
    },
  };
}
