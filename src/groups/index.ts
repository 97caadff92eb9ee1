// The groups domain (object and principal groups, membership): what other domains and the composition root may use.
export { createGroupService, GROUP_TYPES, GROUP_STATUSES, type GroupService, type GroupDeps } from './service.js';
export { createMembershipService, type MembershipService, type MembershipDeps } from './membership.js';
export { groupsGraphqlModule, toGroup } from './resolvers.js';
export { findGroup, type GroupRow } from './queries.js';
