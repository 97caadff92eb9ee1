// What the publication listener's thread and the main thread say to each other (publication-thread.ts).
import type { HttpReply } from '../../http/types.js';

/** A question to the main thread: one of the publication handlers' calls. */
export type ThreadCall =
  | { op: 'trustBundle' }
  | { op: 'issuerCertificate'; issuerId: string }
  | { op: 'crl'; issuerId: string }
  | { op: 'ocspPost'; issuerId: string; body: Uint8Array }
  | { op: 'ocspGet'; issuerId: string; path: string };

export type FromThread =
  | { id: number; call: ThreadCall }
  | { listening: number }
  | { failed: { message: string; code: string | null } }
  | { closed: true };

export type ToThread =
  /** The answer to call `id`; `reusable`: it may be served again for `secs` while the generation is unchanged. */
  | { id: number; reply: HttpReply; reusable?: { secs: number; generation: number } }
  | { close: true };
