// Starts the service in-process on a fresh database with every listener on port 0; stops it at teardown.
import { createLogger, type Logger } from '../../src/log.js';
import type { Mailer, MailMessage } from '../../src/auth/index.js';
import { startService, type Service } from '../../src/main.js';
import { createTestDatabase, type TestDatabase } from './database.js';
import { scanLog, scanning } from './secret-scan.js';

interface Teardown {
  teardown(fn: () => unknown): void;
}

export const QUIET_LISTENERS = {
  SVC_HTTP_ADDR: '127.0.0.1:0',
  SVC_MESSAGING_ADDR: '127.0.0.1:0',
  SVC_READER_ADDR: '127.0.0.1:0',
  SVC_BROKER_ADMIN_ADDR: '127.0.0.1:0',
  SVC_MQTT_ADDR: 'off',
  SVC_COAP_ADDR: 'off',
  SVC_GRPC_ADDR: 'off',
  // On by default; on port 0 here, and the certificate URLs follow its bound port (no base URL set).
  SVC_PKI_PUBLICATION_ADDR: '127.0.0.1:0',
};

export function testLogger(): Logger {
  return createLogger((process.env.SVC_TEST_LOG_LEVEL as 'debug') ?? 'silent');
}

export interface TestService {
  service: Service;
  db: TestDatabase;
  url(listener?: keyof Service['ports']): string;
}

export async function startTestService(
  t: Teardown,
  env: Record<string, string> = {},
  db?: TestDatabase,
  options: { mailer?: Mailer; log?: Logger } = {},
): Promise<TestService> {
  const database = db ?? (await createTestDatabase());
  // In a scanned run (test/helpers/secret-scan.ts) the log is kept at debug level and searched at the stop.
  const lines: string[] = [];
  const log = options.log ?? (scanning ? createLogger('debug', (line) => { lines.push(line); }) : testLogger());
  const service = await startService({
    ...QUIET_LISTENERS,
    SVC_RATE_LIMIT_ENABLED: 'false',
    ...env,
    DATABASE_URL: database.url,
  }, { ...options, log });
  t.teardown(async () => {
    await service.stop();
    if (!options.log) await scanLog(lines);
    if (!db) await database.drop();
  });
  return {
    service,
    db: database,
    url(listener = 'http') {
      const port = service.ports[listener];
      if (port === undefined) throw new Error(`listener ${listener} is not running`);
      return `http://127.0.0.1:${port}`;
    },
  };
}

/** A debug-level logger keeping every entry (parsed), for tests that assert what is logged and how. */
export function capturingLogger(): { log: Logger; entries: Record<string, any>[] } {
  const entries: Record<string, any>[] = [];
  return { entries, log: createLogger('debug', (line) => { entries.push(JSON.parse(line)); }) };
}

/** POST /graphql and return the parsed body. */
export async function gql(base: string, query: string, variables?: Record<string, unknown>, token?: string) {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (token) headers.authorization = `Bearer ${token}`;
  const res = await fetch(`${base}/graphql`, { method: 'POST', headers, body: JSON.stringify({ query, variables }) });
  return { status: res.status, body: (await res.json()) as { data?: Record<string, any>; errors?: any[] } };
}

/** A mailer that keeps what it was asked to send, for tests that follow emailed links. */
export function capturingMailer(): Mailer & { sent: MailMessage[] } {
  const sent: MailMessage[] = [];
  return { sent, async send(message) { sent.push(message); } };
}
