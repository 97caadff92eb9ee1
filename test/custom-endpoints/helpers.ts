// Fixtures of the custom endpoint tests: endpoints saved through the management API, calls over HTTP, and
// the execution records of an endpoint once the log has written them.
import { adminToken } from '../helpers/auth.js';
import { gql, type TestService } from '../helpers/service.js';

export const ENDPOINT_FIELDS = 'id tenantId key name description method path operationKind graphql authMode serviceEntityId variablesMapping requestSchema responseMapping status createdBy updatedBy createdAt updatedAt';
export const CREATE = `mutation ($i: CreateApiEndpointInput!) { createApiEndpoint(input: $i) { ${ENDPOINT_FIELDS} } }`;
export const UPDATE = `mutation ($id: ID!, $i: UpdateApiEndpointInput!) { updateApiEndpoint(id: $id, input: $i) { ${ENDPOINT_FIELDS} } }`;
export const ENABLE = `mutation ($id: ID!) { enableApiEndpoint(id: $id) { id status } }`;
export const DISABLE = `mutation ($id: ID!) { disableApiEndpoint(id: $id) { id status } }`;

let counter = 0;

/** A valid endpoint input; `over` replaces fields (undefined removes one). */
export function endpointInput(over: Record<string, unknown> = {}): Record<string, unknown> {
  counter++;
  const input: Record<string, unknown> = {
    key: `endpoint_${counter}`,
    name: `Endpoint ${counter}`,
    method: 'GET',
    path: `/api/custom/e${counter}`,
    operationKind: 'query',
    graphql: 'query { health }',
    ...over,
  };
  for (const k of Object.keys(input)) if (input[k] === undefined) delete input[k];
  return input;
}

/** Creates an endpoint as the administrator (active unless a status is given); returns the record. */
export async function createEndpoint(ts: TestService, over: Record<string, unknown> = {}, token?: string): Promise<Record<string, any>> {
  const res = await gql(ts.url(), CREATE, { i: endpointInput({ status: 'active', ...over }) }, token ?? (await adminToken(ts)));
  if (res.body.errors) throw new Error(`createApiEndpoint failed: ${JSON.stringify(res.body.errors)}`);
  return res.body.data!.createApiEndpoint;
}

/** The first error message of a management operation expected to fail. */
export async function refusal(ts: TestService, query: string, variables: Record<string, unknown>, token?: string): Promise<{ message: string; code: string }> {
  const res = await gql(ts.url(), query, variables, token ?? (await adminToken(ts)));
  if (!res.body.errors) throw new Error(`expected a refusal, got ${JSON.stringify(res.body.data)}`);
  return { message: res.body.errors[0].message, code: res.body.errors[0].extensions?.code };
}

export interface CallOptions {
  method?: string;
  token?: string | null;
  authorization?: string;
  body?: unknown;
  rawBody?: string | Buffer;
  headers?: Record<string, string>;
  query?: string;
}

/** Calls a custom endpoint over HTTP; the body parsed when it is JSON. */
export async function callEndpoint(ts: TestService, path: string, o: CallOptions = {}): Promise<{ status: number; body: any }> {
  const headers: Record<string, string> = { ...o.headers };
  if (o.authorization !== undefined) headers.authorization = o.authorization;
  else if (o.token) headers.authorization = `Bearer ${o.token}`;
  let body: string | Buffer | undefined;
  if (o.rawBody !== undefined) body = o.rawBody;
  else if (o.body !== undefined) {
    body = JSON.stringify(o.body);
    headers['content-type'] ??= 'application/json';
  }
  const res = await fetch(`${ts.url()}${path}${o.query ? `?${o.query}` : ''}`, { method: o.method ?? 'GET', headers, body });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    // not JSON: kept as text
  }
  return { status: res.status, body: parsed };
}

/** The execution records of an endpoint (newest first), read once the log has written what it holds. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function executionsOf(ts: TestService, endpointId: string): Promise<any[]> {
  await ts.service.customEndpoints.executions.flush();
  const res = await gql(ts.url(), `query ($id: ID!) { apiEndpointExecutions(endpointId: $id, limit: 100) { total items { id endpointId callerEntityId status requestSummary responseSummary error createdAt } } }`,
    { id: endpointId }, await adminToken(ts));
  if (res.body.errors) throw new Error(`apiEndpointExecutions failed: ${JSON.stringify(res.body.errors)}`);
  return res.body.data!.apiEndpointExecutions.items;
}
