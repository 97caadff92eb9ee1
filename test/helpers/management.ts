// Management API fixtures built through the public GraphQL API: users with tokens, tenants they own.
import { adminToken, tokenFor } from './auth.js';
import { gql, type TestService } from './service.js';

/** Runs a GraphQL operation and returns data, failing loudly with the server's errors. */
export async function ok(ts: TestService, token: string, query: string, variables?: Record<string, unknown>) {
  const res = await gql(ts.url(), query, variables, token);
  if (res.body.errors) throw new Error(`GraphQL errors: ${JSON.stringify(res.body.errors)}`);
  return res.body.data as Record<string, any>;
}

/** The error list of an operation expected to fail (data may be partial). */
export async function fails(ts: TestService, token: string | undefined, query: string, variables?: Record<string, unknown>) {
  const res = await gql(ts.url(), query, variables, token);
  if (!res.body.errors) throw new Error(`expected errors, got ${JSON.stringify(res.body.data)}`);
  return res.body.errors as { message: string; extensions: { code: string } }[];
}

/** A global human created by the administrator, with a session token. */
export async function createUser(ts: TestService, name: string): Promise<{ id: string; token: string }> {
  const data = await ok(ts, await adminToken(ts), `mutation ($i: CreateEntityInput!) { createEntity(input: $i) { id } }`,
    { i: { kind: 'human', name } });
  const id = data.createEntity.id as string;
  return { id, token: await tokenFor(ts, id) };
}

/** A tenant created by `token`'s caller, who becomes its tenant admin. */
export async function createTenant(ts: TestService, token: string, name: string, alias?: string): Promise<string> {
  const data = await ok(ts, token, `mutation ($i: CreateTenantInput!) { createTenant(input: $i) { id } }`, { i: { name, alias } });
  return data.createTenant.id as string;
}

export async function createEntity(ts: TestService, token: string, input: Record<string, unknown>): Promise<string> {
  const data = await ok(ts, token, `mutation ($i: CreateEntityInput!) { createEntity(input: $i) { id } }`, { i: input });
  return data.createEntity.id as string;
}

/**
 * The tenant-isolation world most management tests start from: the platform administrator, Alice
 * administering Acme, Bob administering Globex, and Dave, a human with no tenant.
 */
export async function twoTenants(ts: TestService) {
  const admin = await adminToken(ts);
  const alice = await createUser(ts, 'alice');
  const bob = await createUser(ts, 'bob');
  const dave = await createUser(ts, 'dave');
  const acme = await createTenant(ts, alice.token, 'Acme', 'acme');
  const globex = await createTenant(ts, bob.token, 'Globex', 'globex');
  return { admin, alice, bob, dave, acme, globex };
}
