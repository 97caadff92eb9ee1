// The CoAP domain's public face: the UDP listener (ingest and observations).
export { createCoapServer, type CoapDeps, type CoapServer } from './server.js';
export { CONFIRMABLE_EVERY, NOTIFICATION_BYTES, packsOf, type ObserveSettings } from './observe.js';
