// Scenario: ingest-http-1's load against the ingest floor with the database taken out
// (FLOOR_REPLY_AFTER_MS): uWS reads the body, JSON.parse, and each publish is answered 1 ms after the
// batch it joined formed, about what a commit takes. No target: it prices what uWS and the event loop
// cost for a publish answered from a later turn (the body callback, the abort handler, the corked reply,
// the wake-ups of a loop that waits), against the bare GET answered at once.
import { randomUUID } from 'node:crypto';
import floor from './ingest-floor.js';

export default {
  ...floor,
  name: 'ingest-reply-only',
  description: 'ingest-http-1 load on the floor without a database: body read and parsed, 202 one ms later (no storage)',
  env: { FLOOR_REPLY_AFTER_MS: '1' },
  setup: () => ({ channelId: randomUUID() }),
  teardown: undefined,
};
