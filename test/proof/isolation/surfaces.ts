// The HTTP and gRPC rows of the matrix: routes as the running listeners registered them
// (service.routes()), gRPC methods as the atom.v1 proto declares them, each called by every caller in
// every own/foreign combination of its fixture (http-fixtures.ts, GRPC below).
import { readFileSync } from 'node:fs';
import { Agent } from 'undici';
import { loadServices, serviceOf, type ServiceName } from '../../../src/grpc/server.js';
import { grpcClient } from '../../grpc/helpers.js';
import type { TestService } from '../../helpers/service.js';
import { HTTP, type HttpRow } from './http-fixtures.js';
import { comparable, hiddenCounts, leaksIn, oracle, variantsOf } from './judge.js';
import type { Caller, World } from './world.js';

export interface Route {
  listener: string;
  method: string;
  route: string;
}

export const routeKey = (r: Route) => `${r.listener} ${r.method} ${r.route}`;

/**
 * The routes that do something: the server also registers a HEAD beside each GET, an ANY beside each
 * pattern (405 for the other methods) and an ANY /* fallback (404); those answer nothing of their own.
 */
export function servedRoutes(all: Route[]): Route[] {
  const methodsOf = new Map<string, Set<string>>();
  for (const r of all) methodsOf.set(`${r.listener} ${r.route}`, (methodsOf.get(`${r.listener} ${r.route}`) ?? new Set()).add(r.method));
  return all.filter((r) => {
    const methods = methodsOf.get(`${r.listener} ${r.route}`)!;
    if (r.method === 'HEAD' && methods.has('GET')) return false;
    if (r.method === 'ANY' && (r.route === '/*' || methods.size > 1)) return false;
    return true;
  });
}

export function routeCoverage(routes: Route[]) {
  const keys = new Set(routes.map(routeKey));
  return {
    missing: [...keys].filter((k) => !HTTP[k]).sort(),
    stale: Object.keys(HTTP).filter((k) => !keys.has(k)).sort(),
  };
}

function authorization(row: HttpRow, caller: Caller, world: World): string | undefined {
  if (row.device && (caller.name === 'device' || caller.name === 'otherAdmin')) {
    const d = caller.name === 'device' ? world.sensor : world.attackerDevice;
    return row.tls ? `Basic ${Buffer.from(`${d.id}:${d.key}`).toString('base64')}` : `Client ${d.key}`;
  }
  return caller.token ? `Bearer ${caller.token}` : undefined;
}

export function httpsAgent(serverCert: string): Agent {
  return new Agent({ connect: { ca: readFileSync(serverCert, 'utf8') } });
}

/** Every caller (and combination) against one route: the problems found. */
export async function probeRoute(ts: TestService, world: World, route: Route, tls: Agent): Promise<{ problems: string[]; calls: number }> {
  const row = HTTP[routeKey(route)]!;
  if (row.none) return { problems: [], calls: 0 };
  const method = route.method === 'ANY' ? 'POST' : route.method;
  const base = route.listener === 'enrollment' ? `https://127.0.0.1:${ts.service.ports.enrollment}` : ts.url(route.listener as 'http');
  const callers = row.public ? world.callers.filter((c) => c.name === 'anonymous' || c.name === 'otherAdmin') : world.callers.filter((c) => !row.skip?.[c.name]);
  const calls: Promise<string[]>[] = [];
  let twins = 0;
  for (const caller of callers) {
    const auth = authorization(row, caller, world);
    const send = (value: unknown) => {
      const { path, body } = value as { path: string; body: unknown };
      const headers: Record<string, string> = {};
      if (auth) headers.authorization = auth;
      let payload: string | undefined;
      if (body !== undefined && method !== 'GET') {
        headers['content-type'] = row.contentType ?? 'application/json';
        payload = typeof body === 'string' ? body : JSON.stringify(body);
      }
      return fetch(`${base}${path}`, { method, headers, body: payload, ...(row.tls ? { dispatcher: tls } : {}) } as RequestInit)
        .then(async (res) => ({ status: res.status, type: res.headers.get('content-type'), text: await res.text() }));
    };
    for (const variant of variantsOf({ path: row.path ?? route.route, body: row.body }, world, caller.name)) {
      const where = `${caller.name} ${variant.label}`;
      const refusedCaller = !row.public && !row.answers?.[caller.name];
      const twin = variant.twin && refusedCaller ? send(variant.twin.value).catch((err: Error) => ({ status: 0, type: null, text: err.message })) : undefined;
      if (twin) twins++;
      calls.push(send(variant.value).then(async (res) => {
        const { text } = res;
        const problems: string[] = [];
        if (twin) {
          const shown = (r: typeof res) => comparable({ status: r.status, type: r.type, body: parsedOrText(r.text) }, variant.twin!.swapped);
          const other = await twin;
          if (other.status >= 500) problems.push(`${where}, never-existing twin: HTTP ${other.status} ${other.text.slice(0, 160)}`);
          problems.push(...oracle(where, shown(res), shown(other)));
        }
        if (res.status >= 500) problems.push(`${where}: HTTP ${res.status} ${text.slice(0, 160)}`);
        if (row.public) return problems;
        const allowed = row.answers?.[caller.name];
        const leaks = leaksIn(text, JSON.stringify(variant.value), world);
        if (res.status < 300) {
          const parsed = parsedOrText(text);
          if (allowed) problems.push(...hiddenCounts(parsed).map((h) => `${where}: ${h}`));
          else if (row.decision && !/"allowed":true/.test(text)) {
            if (leaks.length) problems.push(`${where}: the decision names ${leaks.join(', ')}`);
          } else problems.push(`${where}: answered ${res.status}: ${text.slice(0, 200)}`);
        } else if (leaks.length) {
          problems.push(`${where}: the refusal (${res.status}) names ${leaks.join(', ')}`);
        }
        return problems;
      }, (err: Error) => [`${where}: ${err.message}`]));
    }
  }
  const results = await Promise.all(calls);
  return { problems: results.flat(), calls: calls.length + twins };
}

function parsedOrText(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

// ---- gRPC

export interface GrpcRow {
  args?: Record<string, unknown> | Record<string, unknown>[];
  decision?: true;
  none?: string;
}

/** One row per method of the atom.v1 proto (`Service/Method`). */
export const GRPC: Record<string, GrpcRow> = {
  'AuthzService/Check': { args: { subject_id: '$device', action: 'publish', resource_id: '$channel' }, decision: true },
  'AuthService/Authenticate': { none: "verifies the token it is given and answers that token's own identity" },
  'AuthService/AuthenticateCredential': { args: { identifier: '#alice', secret: '#alicePassword', tenant_id: '$tenant' } },
  'CertificateService/ResolveCertificateV2': {
    args: [{ fingerprint_sha256: '$certificateFingerprint' }, { fingerprint_sha256: '$certificateFingerprint', expected_tenant_id: '$tenant' }],
  },
  'CertificateService/RevokeEntityCertificates': { args: { entity_id: '$device', reason: 'matrix' } },
  'AliasService/ResolveAlias': { args: [{ tenant_alias: '#targetAlias' }, { tenant_id: '$tenant', object_kind: 'resource', object_alias: 'zz-missing' }] },
};

export function grpcMethods(): string[] {
  const services = loadServices();
  const out: string[] = [];
  for (const name of ['AuthzService', 'AuthService', 'CertificateService', 'AliasService'] as ServiceName[]) {
    const ctor = serviceOf(services, name);
    for (const method of Object.keys(ctor.service)) out.push(`${name}/${method}`);
  }
  // Services the proto declares that the list above does not name show up as missing rows.
  const pkg = ((services.atom as Record<string, unknown>).v1 as Record<string, { service?: unknown }>);
  for (const [name, value] of Object.entries(pkg)) {
    if (value && typeof value === 'function' && 'service' in value && !out.some((m) => m.startsWith(`${name}/`))) out.push(`${name}/*`);
  }
  return out;
}

const GRPC_REFUSALS = new Set([3, 5, 7, 16]); // INVALID_ARGUMENT, NOT_FOUND, PERMISSION_DENIED, UNAUTHENTICATED

export async function probeMethod(ts: TestService, world: World, method: string): Promise<{ problems: string[]; calls: number }> {
  const row = GRPC[method]!;
  if (row.none) return { problems: [], calls: 0 };
  const [service, name] = method.split('/') as [ServiceName, string];
  const client = grpcClient(`127.0.0.1:${ts.service.ports.grpc}`);
  const argSets = Array.isArray(row.args) ? row.args : [row.args ?? {}];
  const calls: Promise<string[]>[] = [];
  let twins = 0;
  for (const caller of world.callers) {
    const ask = (value: unknown) => client.call(service, name, value as Record<string, unknown>, caller.token ? { token: caller.token } : {});
    for (const args of argSets) {
      for (const variant of variantsOf(args, world, caller.name)) {
        const where = `${caller.name} ${variant.label}`;
        const twin = variant.twin ? ask(variant.twin.value) : undefined;
        if (twin) twins++;
        calls.push(ask(variant.value).then(async ({ err, res }) => {
          const problems: string[] = [];
          if (twin) {
            const shown = (a: { err?: { code: number; details: string } | null; res?: unknown }) =>
              comparable({ code: a.err?.code, details: a.err?.details, res: a.res }, variant.twin!.swapped);
            const other = await twin;
            if (other.err && !GRPC_REFUSALS.has(other.err.code)) problems.push(`${where}, never-existing twin: status ${other.err.code} ${other.err.details}`);
            problems.push(...oracle(where, shown({ err, res }), shown(other)));
          }
          const leaks = leaksIn(JSON.stringify({ res, message: err?.details }), JSON.stringify(variant.value), world);
          if (err) {
            if (!GRPC_REFUSALS.has(err.code)) problems.push(`${where}: status ${err.code} ${err.details}`);
            if (leaks.length) problems.push(`${where}: the refusal names ${leaks.join(', ')}`);
          } else if (row.decision && res?.allowed === false) {
            if (leaks.length) problems.push(`${where}: the decision names ${leaks.join(', ')}`);
          } else {
            problems.push(`${where}: answered ${JSON.stringify(res).slice(0, 200)}`);
          }
          return problems;
        }));
      }
    }
  }
  try {
    const results = await Promise.all(calls);
    return { problems: results.flat(), calls: calls.length + twins };
  } finally {
    client.close();
  }
}
