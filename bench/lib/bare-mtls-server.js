// The peer of the enrollment benchmark: a bare node:https server with the same TLS settings as the
// enrollment listener (client certificate requested and verified against the given CA bundle, session
// tickets off, connection closed after each answer unless keep-alive), answering 200 after reading the
// body. Run as a child: `node bare-mtls-server.js <cert> <key> <ca> <keepAlive>`; prints its port.
import { constants } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:https';

const [cert, key, ca, keepAlive] = process.argv.slice(2);
const server = createServer({
  cert: readFileSync(/** @type {string} */ (cert)), key: readFileSync(/** @type {string} */ (key)), ca: readFileSync(/** @type {string} */ (ca)),
  requestCert: true, rejectUnauthorized: false, secureOptions: constants.SSL_OP_NO_TICKET, minVersion: 'TLSv1.2',
}, (req, res) => {
  req.resume();
  req.on('end', () => {
    const peer = /** @type {import('node:tls').TLSSocket} */ (req.socket);
    res.statusCode = peer.authorized ? 200 : 401;
    if (keepAlive !== 'true') res.setHeader('connection', 'close');
    res.end('{}');
  });
});
server.listen(0, '127.0.0.1', () => {
  const address = /** @type {import('node:net').AddressInfo} */ (server.address());
  console.log(JSON.stringify({ msg: 'listening', listener: 'bare', port: address.port }));
  console.log(JSON.stringify({ msg: 'ready' }));
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
process.on('disconnect', () => process.exit(0));
