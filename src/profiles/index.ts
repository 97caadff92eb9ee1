// The profiles domain (device types): what the composition root and the identity domain use.
export { createProfilesService, DEFAULT_DEVICE_TYPES, type ProfilesService, type Binding } from './service.js';
export { profilesGraphqlModule } from './resolvers.js';
