// Revocation publication: the trust bundle, each issuer's CRL and OCSP responder, and the coherence that
// keeps their caches true across instances. Built by createPki; its routes are registered on the
// management listener by the composition root.
import type { Sql } from '../../db/client.js';
import type { NotifyHub } from '../../db/notify-hub.js';
import type { HttpServer } from '../../http/server.js';
import type { RateLimitConfig, RateLimiter } from '../../http/rate-limit.js';
import type { Logger } from '../../log.js';
import type { CertificateReads } from '../issuance/certificates.js';
import { createCrls } from './crl.js';
import type { CaKeys } from '../keys/types.js';
import { createOcsp } from './ocsp.js';
import { createPublicationCoherence } from './publication-coherence.js';
import { createPublishingIssuers } from './publication-issuers.js';
import { createPublicationListener, type PublicationListener } from './publication-listener.js';
import { publicationHandlers, registerPublicationRoutes } from './publication-routes.js';
import { createPublicationThread } from './publication-thread.js';
import { CHANGED_TOPIC, type Registry } from '../authorities/registry.js';

/** The bundle also leaves out authorities that expired: re-read at least this often. */
const BUNDLE_TTL_MS = 60_000;

export interface PublicationSettings {
  crlValiditySecs: number;
  ocspValiditySecs: number;
  /** The publication listener on a thread of its own (publication-thread.ts); off: on the main thread. */
  listenerThread: boolean;
}

export function createPublication(deps: {
  sql: Sql; hub: NotifyHub; keys: CaKeys; registry: Registry; certificates: CertificateReads; log: Logger; settings: PublicationSettings;
}) {
  const { sql, hub, keys, log, settings } = deps;
  const coherence = createPublicationCoherence(hub);
  const issuers = createPublishingIssuers(deps.registry);
  const crls = createCrls({ sql, keys, issuers, coherence, log, validitySecs: settings.crlValiditySecs });
  const ocsp = createOcsp({ sql, keys, issuers, coherence, log, validitySecs: settings.ocspValiditySecs });

  let bundle: { pem: Promise<string>; at: number } | null = null;
  const dropBundle = () => {
    bundle = null;
  };
  hub.subscribe(CHANGED_TOPIC, dropBundle);
  hub.onReconnect(dropBundle);

  const publication = {
    coherence,
    issuers,
    crls,
    ocsp,
    /** Trust anchors then intermediates, PEM (see certificates.trustBundle). */
    trustBundle(): Promise<string> {
      if (bundle && Date.now() - bundle.at < BUNDLE_TTL_MS) return bundle.pem;
      const pem = deps.certificates.trustBundle().then((b) => b.pem);
      const entry = { pem, at: Date.now() };
      bundle = entry;
      pem.catch(() => {
        if (bundle === entry) bundle = null;
      });
      return pem;
    },
    registerRoutes(server: HttpServer, limiter: RateLimiter): void {
      registerPublicationRoutes(server, { handlers, limiter });
    },
    /**
     * The same routes on a node:http listener of their own (HTTP/1.0 relying parties such as `openssl ocsp`):
     * on its own thread with a public_routes limiter of its own (rateLimits), or on this one with `limiter`.
     */
    listener(limiter: RateLimiter, rateLimits: RateLimitConfig): PublicationListener {
      if (settings.listenerThread) return createPublicationThread({ handlers, coherence, rateLimits, log });
      return createPublicationListener({ handlers, limiter, log });
    },
  };
  const handlers = publicationHandlers(publication);
  return publication;
}

export type Publication = ReturnType<typeof createPublication>;
