// The alias domain's public surface: resolving tenant, entity and resource aliases for runtime callers.
export { createAliasService, type AliasService, type AliasRequest, type ResolvedAlias } from './service.js';
export { aliasGrpcService } from './grpc.js';
