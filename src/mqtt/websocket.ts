// MQTT over WebSocket (MQTT 5.0 and 3.1.1, section 6): browsers and gateways that can only speak HTTP
// reach the broker at /mqtt on the messaging listener, subprotocol "mqtt". The socket becomes a duplex
// stream that the broker takes like a TCP connection, so authentication, authorization, limits, sessions
// and counters are the broker's own. MQTT bytes travel in binary frames (a packet may span frames, a
// frame may hold several); any other data frame closes the connection, as the specification requires.
import { Duplex } from 'node:stream';
import type { HttpServer } from '../http/server.js';
import type { UwsWebSocket } from '../http/uws.js';
import { json } from '../http/types.js';
import type { Logger } from '../log.js';
import type { MqttBroker, MqttConnection } from './broker.js';

export const MQTT_WS_PATH = '/mqtt';
/** Subprotocols MQTT clients offer: "mqtt" (3.1.1 and 5), "mqttv3.1" (3.1). */
const SUBPROTOCOLS = ['mqtt', 'mqttv3.1'];
/** Bytes queued for a slow client before the broker's writes wait for the socket to drain. */
const HIGH_WATER_BYTES = 256 * 1024;
/** WebSocket close codes (RFC 6455 7.4.1). */
const UNSUPPORTED_DATA = 1003;
const GOING_AWAY = 1001;

interface SocketData {
  subprotocol: string;
  stream?: WebSocketStream;
}

/** The broker's side of one MQTT WebSocket. */
export class WebSocketStream extends Duplex implements MqttConnection {
  bytesRead = 0;
  bytesWritten = 0;
  /** The socket is gone: nothing more may be written to it. */
  socketClosed = false;
  private waitingForDrain: (() => void) | undefined;

  constructor(private readonly socket: UwsWebSocket<SocketData>) {
    super();
  }

  /** The client's address, as a net.Socket has it (the CONNECT hook throttles failed keys by it). */
  get remoteAddress(): string {
    // A closed uWS socket must not be touched.
    return this.socketClosed ? '' : Buffer.from(this.socket.getRemoteAddressAsText()).toString();
  }

  override _read(): void {
    // Frames are pushed as they arrive (received); uWS has no pause for one socket.
  }

  received(frame: ArrayBuffer): void {
    this.bytesRead += frame.byteLength;
    // uWS reuses the frame's memory after the callback: copy it.
    this.push(Buffer.from(new Uint8Array(frame)));
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, done: (err?: Error) => void): void {
    if (this.socketClosed) return done(new Error('websocket closed'));
    this.bytesWritten += chunk.byteLength;
    this.socket.send(chunk, true);
    if (this.socket.getBufferedAmount() > HIGH_WATER_BYTES) this.waitingForDrain = done;
    else done();
  }

  drained(): void {
    const done = this.waitingForDrain;
    this.waitingForDrain = undefined;
    done?.();
  }

  /** The socket closed (by the client, uWS, or us; uWS's close handler, once): the broker sees the end. */
  socketEnded(): void {
    this.socketClosed = true;
    this.drained();
    this.push(null);
    this.destroy();
  }

  override _destroy(err: Error | null, done: (err: Error | null) => void): void {
    // The broker closed the connection: close the socket too.
    if (!this.socketClosed) {
      this.socketClosed = true;
      this.socket.end(GOING_AWAY);
    }
    done(err);
  }
}

export function registerMqttWebSocket(server: HttpServer, broker: MqttBroker, opts: { maxPacketBytes: number; log: Logger }): void {
  // uWS hands a GET without the upgrade headers on to the routes: it answers 426 (RFC 9110 15.5.22).
  server.route('GET', MQTT_WS_PATH, () => json(426, {
    error: 'this is an MQTT over WebSocket endpoint: upgrade with subprotocol mqtt',
  }, { upgrade: 'websocket' }));
  server.app.ws<SocketData>(MQTT_WS_PATH, {
    // A frame carries at most one packet's worth; the broker bounds packets itself (maximumPacketSize).
    maxPayloadLength: opts.maxPacketBytes,
    // MQTT keeps the connection alive itself (PINGREQ within the keep-alive the client chose).
    idleTimeout: 0,
    sendPingsAutomatically: false,
    maxBackpressure: 0,
    upgrade(res, req, context) {
      const offered = req.getHeader('sec-websocket-protocol').split(',').map((p) => p.trim());
      const subprotocol = SUBPROTOCOLS.find((p) => offered.includes(p));
      if (subprotocol === undefined) {
        res.cork(() => {
          res.writeStatus('400 Bad Request').writeHeader('content-type', 'application/json')
            .end(JSON.stringify({ error: "missing WebSocket subprotocol: offer 'mqtt'" }));
        });
        return;
      }
      res.upgrade<SocketData>({ subprotocol }, req.getHeader('sec-websocket-key'), subprotocol, req.getHeader('sec-websocket-extensions'), context);
    },
    open(socket) {
      const data = socket.getUserData();
      const stream = new WebSocketStream(socket);
      data.stream = stream;
      if (!broker.accept(stream)) socket.end(GOING_AWAY, 'service stopping');
    },
    message(socket, frame, isBinary) {
      const stream = socket.getUserData().stream;
      if (stream === undefined || stream.socketClosed) return;
      if (!isBinary) {
        opts.log.debug('mqtt websocket closed: a text frame', {});
        // uWS runs the close handler, which ends the stream.
        socket.end(UNSUPPORTED_DATA, 'MQTT travels in binary frames');
        return;
      }
      stream.received(frame);
    },
    drain(socket) {
      socket.getUserData().stream?.drained();
    },
    close(socket) {
      socket.getUserData().stream?.socketEnded();
    },
  });
}
