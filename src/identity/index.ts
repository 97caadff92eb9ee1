// The identity domain (entities, ownerships): what other domains and the composition root may use.
export { createIdentityService, ENTITY_KINDS, ENTITY_STATUSES, AUTHENTICATED_USERS_GROUP, type IdentityService, type EntityCertificateHooks } from './service.js';
export { identityGraphqlModule, toEntity } from './resolvers.js';
export { entityColumns, type EntityRow } from './queries.js';
