// The messaging domain's public face: the publish pipeline's contract (types) other transports code against.
export type {
  Messaging, Protocol, PublishInput, PublishResult, StoredListener, StoredMessage, StoredSource, WriterStats,
} from './types.js';
export { createMessaging, type MessagingDeps, type MessagingService, type MessagingSettings, type ReadPage, type ReadQuery, type Subject } from './service.js';
export { mediaTypeOf, SENML_JSON } from './media-type.js';
export { parseSenml, SENML_VERSION, toResolvedSenml } from './senml.js';
export { registerPublishRoutes, registerReaderRoutes } from './routes.js';
export { registerLiveRoute } from './live.js';
export { refusalOf, startRevalidation, type Revalidation, type RevalidationOptions } from './revalidation.js';
