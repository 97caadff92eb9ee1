// The CoAP domain's public face: the UDP ingest listener.
export { createCoapServer, type CoapServer } from './server.js';
