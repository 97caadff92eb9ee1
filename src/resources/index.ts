// The resources domain (channels and other protected objects): what other domains and the composition root may use.
export { createResourceService, type ResourceService, type ResourceDeps } from './service.js';
export { resourcesGraphqlModule, toResource } from './resolvers.js';
export type { ResourceRow } from './queries.js';
