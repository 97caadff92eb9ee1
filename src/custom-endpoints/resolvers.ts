// GraphQL of custom endpoint management: rows to the ApiEndpoint and ApiEndpointExecution types.
import { iso } from '../graphql/mapping.js';
import { authed, type Args } from '../graphql/resolve.js';
import { readSdl, type GraphqlModule } from '../graphql/schema.js';
import type { EndpointRow, ExecutionRow } from './queries.js';
import type { EndpointService } from './service.js';

const toEndpoint = (r: EndpointRow) => ({
  id: r.id, tenantId: r.tenant_id, key: r.key, name: r.name, description: r.description, method: r.method, path: r.path,
  operationKind: r.operation_kind, graphql: r.graphql, authMode: r.auth_mode, serviceEntityId: r.service_entity_id,
  variablesMapping: r.variables_mapping, requestSchema: r.request_schema, responseMapping: r.response_mapping, status: r.status,
  createdBy: r.created_by, updatedBy: r.updated_by, createdAt: iso(r.created_at), updatedAt: iso(r.updated_at),
});

const toExecution = (r: ExecutionRow) => ({
  id: r.id, endpointId: r.endpoint_id, callerEntityId: r.caller_entity_id, status: r.status, requestSummary: r.request_summary,
  responseSummary: r.response_summary, error: r.error, createdAt: iso(r.created_at),
});

export function customEndpointsGraphqlModule(service: EndpointService): GraphqlModule {
  return {
    name: 'custom-endpoints',
    sdl: readSdl('custom-endpoints'),
    resolvers: {
      Query: {
        apiEndpoints: authed(async (p, a) => {
          const page = await service.list(p, a);
          return { total: page.total, items: page.items.map(toEndpoint) };
        }),
        apiEndpoint: authed(async (p, a) => toEndpoint(await service.get(p, a.id))),
        apiEndpointExecutions: authed(async (p, a) => {
          const page = await service.executions(p, a);
          return { total: page.total, items: page.items.map(toExecution) };
        }),
      },
      Mutation: {
        createApiEndpoint: authed(async (p, a) => toEndpoint(await service.create(p, a.input as Args))),
        updateApiEndpoint: authed(async (p, a) => toEndpoint(await service.update(p, a.id, a.input as Args))),
        enableApiEndpoint: authed(async (p, a) => toEndpoint(await service.enable(p, a.id))),
        disableApiEndpoint: authed(async (p, a) => toEndpoint(await service.disable(p, a.id))),
      },
    },
  };
}
