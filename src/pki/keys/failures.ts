// How a CA key task's failure reads to callers: the one place worker failure codes become AppErrors.
import { AppError, unavailable } from '../../errors.js';
import type { KeyFailure } from './tasks.js';

/** `importing`: an INVALID_KEY then blames the caller's PEM; when signing it means a damaged stored reference. */
export function keyError(f: KeyFailure, importing = false): AppError {
  switch (f.code) {
    case 'INVALID_KEY':
      return importing ? new AppError('INVALID_INPUT', `private key: ${f.message}`) : new AppError('INTERNAL', `CA key reference unusable: ${f.message}`);
    case 'UNSUPPORTED':
      return new AppError('INVALID_INPUT', f.message);
    default:
      // Configuration or token trouble: the operation cannot be done now, whoever asked.
      return unavailable(f.message);
  }
}

/** Failures that say the token is misbehaving, which the circuit breaker counts. */
export function countsAgainstToken(f: KeyFailure): boolean {
  return f.code === 'TIMEOUT' || f.code === 'TOKEN_ERROR' || f.code === 'OPEN_FAILED';
}

/** Uint8Array from a worker → Buffer without a copy. */
export function asBuffer(u: Uint8Array): Buffer {
  return Buffer.from(u.buffer, u.byteOffset, u.byteLength);
}
