// Certificates and keys a TLS listener is configured with, read once at start; a file that cannot be read
// stops the start with a message naming the listener, the file and why.
import { readFileSync } from 'node:fs';

/** `what` names it in the error: 'gRPC key', 'MQTT TLS certificate'. */
export function readPemFile(file: string, what: string): Buffer {
  try {
    return readFileSync(file);
  } catch (err) {
    throw new Error(`${what} ${file} cannot be read: ${(err as Error).message}`);
  }
}
