// The roles domain (roles, their blocks, role assignments): what other domains and the composition root use.
export { createRoleService, derivedKindOf, type RoleService, type RoleDeps } from './service.js';
export { createAssignmentService, type AssignmentService } from './assignments.js';
export { rolesGraphqlModule, toRole, toAssignment } from './resolvers.js';
export { assignRole, assignRoleToEntity, grantableRole, type AssignRole, type AssignRoleTo, type Assigned } from './assign.js';
export { deleteEntityGrantsInTenant } from './assignment-queries.js';
