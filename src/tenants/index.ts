// The tenants domain: workspaces, their lifecycle, memberships and invitations.
export { createTenantsService, TENANT_STATUSES, type TenantsService, type TenantCertificateHooks } from './service.js';
export { createMembersService, type MembersService } from './members-service.js';
export { tenantsGraphqlModule, toTenant } from './resolvers.js';
