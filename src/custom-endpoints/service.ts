// Managing custom endpoints (SPEC.md "Custom endpoint calls", management operations): platform-admin
// only; every field checked at save with a message naming it; drafts need only parse, an endpoint going
// (or staying) active must also validate against the live schema; disabled endpoints are not editable.
import type { GraphQLError } from 'graphql';
import type { AuditWriter } from '../audit/writer.js';
import type { Principal } from '../auth/principal.js';
import type { Authz } from '../authz/index.js';
import { createAccessGuard } from '../access/guard.js';
import type { Sql } from '../db/client.js';
import { pageOf, type ListResult } from '../db/paging.js';
import { invalidInput, notFound } from '../errors.js';
import * as v from '../validate.js';
import { compileResponse, compileVariables } from './mapping.js';
import { analyseOperation, OPERATION_KINDS } from './operation.js';
import * as q from './queries.js';
import type { RequestSchemas } from './request-schema.js';
import type { Router } from './router.js';

export const METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'] as const;
export const AUTH_MODES = ['caller_context', 'service_context'] as const;
export const STATUSES = ['draft', 'active', 'disabled'] as const;
const KEY = /^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$/;
const MAX_GRAPHQL = 65_536;
const MAX_PATH = 1024;

export interface EndpointServiceDeps {
  sql: Sql;
  authz: Authz;
  audit: AuditWriter;
  lists: { defaultLimit: number; maxLimit: number };
  /** Bounds of the JSON documents it stores and of the JSON filters it takes. */
  documents: v.JsonBounds;
  schemas: RequestSchemas;
  router: Router;
  /** Validation of an operation against the live schema, by the executor /graphql uses. */
  checkGraphql(text: string): readonly GraphQLError[];
}

type Input = Record<string, unknown>;

function checkPath(value: unknown): string {
  if (typeof value !== 'string' || value === '') throw invalidInput('path must be a non-empty string');
  if (!value.startsWith('/api/custom/')) throw invalidInput('path must start with /api/custom/');
  for (const bad of ['//', '..', '?', '#']) if (value.includes(bad)) throw invalidInput(`path must not contain ${bad}`);
  // A route is matched by the path a request names: blanks and control characters could never be asked for.
  if (/[\s\u0000-\u001f\u007f]/.test(value)) throw invalidInput('path must not contain whitespace or control characters');
  if (value.length > MAX_PATH) throw invalidInput(`path must be at most ${MAX_PATH} characters`);
  return value;
}

function checkKey(value: unknown): string {
  if (typeof value !== 'string' || !KEY.test(value)) {
    throw invalidInput("key must be 1-128 letters, digits, '_', '.', ':' or '-', starting with a letter or digit");
  }
  return value;
}

function checkMethod(value: unknown): string {
  // Accepted in any case ('get'), stored as the method a request carries.
  return v.oneOf('method', typeof value === 'string' ? value.toUpperCase() : value, METHODS);
}

export function createEndpointService(deps: EndpointServiceDeps) {
  const { sql, audit, router } = deps;
  const guard = createAccessGuard({ sql, authz: deps.authz });

  /** Every rule of a save, on the endpoint as it would be stored. */
  async function validate(f: q.EndpointFields): Promise<void> {
    if (f.graphql.length > MAX_GRAPHQL) throw invalidInput(`graphql must be at most ${MAX_GRAPHQL} characters`);
    analyseOperation(f.graphql, f.operation_kind);
    if (f.auth_mode === 'service_context') {
      if (!f.service_entity_id) throw invalidInput('serviceEntityId is required when authMode is service_context');
      if (!(await q.entityExists(sql, f.service_entity_id))) throw invalidInput('serviceEntityId does not name an entity');
    } else if (f.service_entity_id) {
      throw invalidInput('serviceEntityId is only for authMode service_context');
    }
    compileVariables(f.variables_mapping);
    compileResponse(f.response_mapping);
    deps.schemas.compile(f.request_schema);
    if (f.status === 'active') checkLive(f.graphql);
  }

  function checkLive(text: string): void {
    const errors = deps.checkGraphql(text);
    if (errors.length > 0) throw invalidInput(`graphql does not validate against the schema: ${errors.map((e) => e.message).join('; ')}`);
  }

  function record(p: Principal, event: string, row: q.EndpointRow, details: Record<string, unknown> = {}): void {
    audit.record({ event, outcome: 'allow', actorEntityId: p.entityId, tenantId: row.tenant_id, targetKind: 'api_endpoint', targetId: row.id, details: { key: row.key, method: row.method, path: row.path, ...details } });
  }

  async function load(id: unknown): Promise<q.EndpointRow> {
    const row = await q.findEndpoint(sql, v.uuid('id', id));
    if (!row) throw notFound('api endpoint');
    return row;
  }

  /** The change is in the database: this instance's table follows before the caller hears back. */
  async function committed(row: q.EndpointRow): Promise<q.EndpointRow> {
    await router.reload(row.id);
    return row;
  }

  return {
    async list(p: Principal, args: Input & { limit?: number | null; offset?: number | null }): Promise<ListResult<q.EndpointRow>> {
      await guard.requirePlatformAdmin(p);
      const tenantId = v.optionalUuid('tenantId', args.tenantId);
      const status = args.status === undefined || args.status === null ? null : v.oneOf('status', args.status, STATUSES);
      return q.listEndpoints(sql, { tenantId, status }, pageOf(args, deps.lists));
    },

    async get(p: Principal, id: unknown): Promise<q.EndpointRow> {
      await guard.requirePlatformAdmin(p);
      return load(id);
    },

    async executions(p: Principal, args: Input & { limit?: number | null; offset?: number | null }): Promise<ListResult<q.ExecutionRow>> {
      await guard.requirePlatformAdmin(p);
      const endpoint = await load(v.uuid('endpointId', args.endpointId));
      return q.listExecutions(sql, endpoint.id, pageOf(args, deps.lists));
    },

    async create(p: Principal, input: Input): Promise<q.EndpointRow> {
      await guard.requirePlatformAdmin(p);
      const tenantId = v.optionalUuid('tenantId', input.tenantId);
      const fields: q.EndpointFields = {
        tenant_id: tenantId,
        key: checkKey(input.key),
        name: v.name('name', input.name),
        description: v.optionalText('description', input.description),
        method: checkMethod(input.method),
        path: checkPath(input.path),
        operation_kind: v.oneOf('operationKind', input.operationKind, OPERATION_KINDS),
        graphql: typeof input.graphql === 'string' ? input.graphql : '',
        auth_mode: input.authMode === undefined || input.authMode === null ? 'caller_context' : v.oneOf('authMode', input.authMode, AUTH_MODES),
        service_entity_id: v.optionalUuid('serviceEntityId', input.serviceEntityId),
        variables_mapping: v.jsonDocument('variablesMapping', input.variablesMapping, deps.documents),
        request_schema: v.jsonDocument('requestSchema', input.requestSchema, deps.documents),
        response_mapping: v.jsonDocument('responseMapping', input.responseMapping, deps.documents),
        // Saved as a draft unless a status is given.
        status: input.status === undefined || input.status === null ? 'draft' : v.oneOf('status', input.status, STATUSES),
      };
      if (tenantId && !(await q.liveTenantExists(sql, tenantId))) throw invalidInput('tenantId does not name a live tenant');
      await validate(fields);
      const row = await committed(await q.insertEndpoint(sql, fields, p.entityId));
      record(p, 'api_endpoint.create', row, { status: row.status });
      return row;
    },

    async update(p: Principal, id: unknown, input: Input): Promise<q.EndpointRow> {
      await guard.requirePlatformAdmin(p);
      const endpointId = v.uuid('id', id);
      const row = await sql.begin(async (tx) => {
        const current = await q.findEndpoint(tx, endpointId, true);
        if (!current) throw notFound('api endpoint');
        if (current.status === 'disabled') throw invalidInput('a disabled endpoint cannot be edited until it is re-enabled (enableApiEndpoint)');
        const has = (k: string) => v.given(input, k);
        const f: q.EndpointFields = {
          tenant_id: current.tenant_id,
          key: has('key') ? checkKey(input.key) : current.key,
          name: has('name') ? v.name('name', input.name) : current.name,
          description: has('description') ? v.optionalText('description', input.description) : current.description,
          method: has('method') ? checkMethod(input.method) : current.method,
          path: has('path') ? checkPath(input.path) : current.path,
          operation_kind: has('operationKind') ? v.oneOf('operationKind', input.operationKind, OPERATION_KINDS) : current.operation_kind,
          graphql: has('graphql') ? (typeof input.graphql === 'string' ? input.graphql : '') : current.graphql,
          auth_mode: has('authMode') ? v.oneOf('authMode', input.authMode, AUTH_MODES) : current.auth_mode,
          service_entity_id: has('serviceEntityId') ? v.optionalUuid('serviceEntityId', input.serviceEntityId) : current.service_entity_id,
          variables_mapping: has('variablesMapping') ? v.jsonDocument('variablesMapping', input.variablesMapping, deps.documents) : current.variables_mapping,
          request_schema: has('requestSchema') ? v.jsonDocument('requestSchema', input.requestSchema, deps.documents) : current.request_schema,
          response_mapping: has('responseMapping') ? v.jsonDocument('responseMapping', input.responseMapping, deps.documents) : current.response_mapping,
          status: has('status') && input.status !== null ? v.oneOf('status', input.status, STATUSES) : current.status,
        };
        // Switching to caller_context drops the stored service entity unless the input names one itself.
        if (f.auth_mode === 'caller_context' && !has('serviceEntityId')) f.service_entity_id = null;
        await validate(f);
        return q.updateEndpoint(tx, endpointId, f, p.entityId);
      });
      await committed(row);
      record(p, 'api_endpoint.update', row, { fields: Object.keys(input).filter((k) => input[k] !== undefined) });
      return row;
    },

    async enable(p: Principal, id: unknown): Promise<q.EndpointRow> {
      await guard.requirePlatformAdmin(p);
      const current = await load(id);
      if (current.status === 'active') return current;
      // The stored operation may predate a schema change: it must validate now, as it will run.
      await validate({ ...current, status: 'active' });
      const row = await committed(await q.setStatus(sql, current.id, 'active', p.entityId));
      record(p, 'api_endpoint.enable', row);
      return row;
    },

    async disable(p: Principal, id: unknown): Promise<q.EndpointRow> {
      await guard.requirePlatformAdmin(p);
      const current = await load(id);
      if (current.status === 'disabled') return current;
      const row = await committed(await q.setStatus(sql, current.id, 'disabled', p.entityId));
      record(p, 'api_endpoint.disable', row);
      return row;
    },
  };
}

export type EndpointService = ReturnType<typeof createEndpointService>;
