// The messaging domain's public face: the publish pipeline's contract (types) other transports code against.
export type {
  Messaging, Protocol, PublishInput, PublishResult, StoredListener, StoredMessage, StoredSource, WriterStats,
} from './types.js';
