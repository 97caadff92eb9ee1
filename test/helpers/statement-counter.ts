// A pass-through TCP proxy in front of PostgreSQL that reads the frontend protocol of every connection
// through it: statements executed (with their text), parses, round trips (Sync or simple Query) and
// transactions begun. Tests point the service's DATABASE_URL at it to hold what one request sends to the
// database; every byte is forwarded unchanged to the real server.
import net from 'node:net';

export interface WireTally {
  /** Statements executed (extended-protocol Execute or a simple Query), with their text. */
  statements: string[];
  /** Parse messages: a statement prepared (or an unnamed one parsed again). */
  parses: number;
  /** Sync and simple Query messages: each waits for the server's answer. */
  roundTrips: number;
  /** Statements that begin a transaction. */
  transactions: number;
}

export interface StatementCounter {
  /** DATABASE_URL for the service: the same server, database and user, through the proxy. */
  url: string;
  /** What was sent since the last reset. */
  tally(): WireTally;
  reset(): void;
  close(): Promise<void>;
}

const SSL_REQUEST = 80877103;
const GSSENC_REQUEST = 80877104;

export async function startStatementCounter(databaseUrl: string): Promise<StatementCounter> {
  const target = new URL(databaseUrl);
  let tally: WireTally = { statements: [], parses: 0, roundTrips: 0, transactions: 0 };
  const sockets = new Set<net.Socket>();

  const server = net.createServer((client) => {
    const upstream = net.connect(Number(target.port || 5432), target.hostname);
    sockets.add(client).add(upstream);
    const named = new Map<string, string>(); // prepared statement name -> text
    let bound = '';
    let startup = true;
    let pending: Buffer = Buffer.alloc(0);
    const read = (chunk: Buffer) => {
      pending = pending.length ? Buffer.concat([pending, chunk]) : chunk;
      for (;;) {
        if (startup) {
          if (pending.length < 8) return;
          const length = pending.readInt32BE(0);
          if (pending.length < length) return;
          const code = pending.readInt32BE(4);
          // An SSL/GSS request is answered 'N' and followed by the real startup message.
          if (code !== SSL_REQUEST && code !== GSSENC_REQUEST) startup = false;
          pending = pending.subarray(length);
          continue;
        }
        if (pending.length < 5) return;
        const type = String.fromCharCode(pending[0] as number);
        const length = pending.readInt32BE(1);
        if (pending.length < length + 1) return;
        observe(type, pending.subarray(5, length + 1));
        pending = pending.subarray(length + 1);
      }
    };
    const cstring = (body: Buffer, from: number): [string, number] => {
      const end = body.indexOf(0, from);
      return [body.toString('utf8', from, end), end + 1];
    };
    const executed = (text: string) => {
      tally.statements.push(text.trim());
      if (/^\s*(begin|start\s+transaction)\b/i.test(text)) tally.transactions++;
    };
    const observe = (type: string, body: Buffer) => {
      if (type === 'P') {
        const [name, at] = cstring(body, 0);
        const [text] = cstring(body, at);
        named.set(name, text);
        tally.parses++;
      } else if (type === 'B') {
        const [, at] = cstring(body, 0);
        const [statement] = cstring(body, at);
        bound = named.get(statement) ?? '';
      } else if (type === 'E') {
        executed(bound);
      } else if (type === 'S') {
        tally.roundTrips++;
      } else if (type === 'Q') {
        tally.roundTrips++;
        executed(cstring(body, 0)[0]);
      }
    };
    client.on('data', (chunk: Buffer) => {
      read(chunk);
      upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => client.write(chunk));
    const end = () => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.on('close', end).on('error', end);
    upstream.on('close', end).on('error', end);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const proxied = new URL(databaseUrl);
  proxied.hostname = '127.0.0.1';
  proxied.port = String((server.address() as net.AddressInfo).port);
  return {
    url: proxied.toString(),
    tally: () => tally,
    reset() {
      tally = { statements: [], parses: 0, roundTrips: 0, transactions: 0 };
    },
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
