// The contract between the certificate authority and the places its keys live. Authorities, issuance,
// CRLs and OCSP see only these types; private key material never leaves a backend (a worker thread's
// memory or the PKCS#11 token), the way step-ca keeps its KMS implementations behind one interface.

/** Key algorithms an authority or a leaf may use (profiles name them). */
export type KeyAlgorithm = 'ecdsa-p256' | 'ecdsa-p384' | 'rsa-2048' | 'rsa-3072' | 'rsa-4096' | 'ed25519';

export const KEY_ALGORITHMS: readonly KeyAlgorithm[] = ['ecdsa-p256', 'ecdsa-p384', 'rsa-2048', 'rsa-3072', 'rsa-4096', 'ed25519'];

/** Where an authority's private key lives; stored per authority and never changed after provisioning. */
export type KeyBackendKind = 'encrypted_database' | 'pkcs11';

/**
 * What the database keeps for an authority's key (a jsonb column): enough to find or unwrap the key,
 * never the key in the clear. Buffers travel as base64 strings so the value is plain JSON.
 */
export type StoredKeyRef =
  | {
      backend: 'encrypted_database';
      algorithm: KeyAlgorithm;
      /** SVC_PKI_CA_KEY_ENCRYPTION_KEY_ID at the time of wrapping; start refuses ids it does not know. */
      kekId: string;
      /** The key's own AES-256 data key, sealed (AES-256-GCM) under the key-encryption key; base64. */
      wrappedDataKey: string;
      /** PKCS#8 DER of the private key, sealed under the data key; base64. */
      encryptedKey: string;
    }
  | {
      backend: 'pkcs11';
      algorithm: KeyAlgorithm;
      /** The token the key was generated on (SVC_PKI_PKCS11_TOKEN_LABEL then). */
      tokenLabel: string;
      /** CKA_ID of the private key object, hex. */
      keyId: string;
      /** CKA_LABEL, for operators reading the token with pkcs11-tool or softhsm2-util. */
      label: string;
    };

/** A newly generated or imported key: its public half as SubjectPublicKeyInfo DER, and its reference. */
export interface GeneratedKey {
  spki: Buffer;
  ref: StoredKeyRef;
}

/**
 * The keys of the certificate authority, over both backends. One instance per service, built in the
 * composition root; signing runs in the worker pool and concurrent calls are gathered into one task.
 */
export interface CaKeys {
  /** Generates an authority key in the given backend (on the token for pkcs11, non-extractable). */
  generate(backend: KeyBackendKind, algorithm: KeyAlgorithm, label: string): Promise<GeneratedKey>;
  /**
   * Takes a private key read from configuration (the platform intermediate: PEM, PKCS#8 or SEC1) into
   * the encrypted_database backend. The same key imported twice yields an equivalent reference.
   */
  importPrivateKey(pem: string): Promise<GeneratedKey>;
  /**
   * Signs `data` (a certificate, CRL or OCSP to-be-signed structure, DER) with the referenced key and
   * returns the signature as X.509 carries it: DER ECDSA-Sig-Value for ECDSA (SHA-256 for P-256, SHA-384
   * for P-384), PKCS#1 v1.5 with SHA-256 for RSA, raw for Ed25519. Calls arriving together share one
   * worker task. Fails with UNAVAILABLE when the PKCS#11 breaker is open or the token does not answer
   * in time, with RATE_LIMITED when too many operations are in flight.
   */
  sign(ref: StoredKeyRef, data: Buffer): Promise<Buffer>;
  /**
   * Signs on the calling thread, for answers whose cost is one signature (OCSP nonce answers): a worker
   * task costs more than the signature at the low concurrency such clients bring. Only where the backend
   * allows it: an encrypted_database key is unwrapped in this thread as in the workers (the key-encryption
   * key is in this process either way). Null when it does not (PKCS#11: the token's sessions live in the
   * workers) or the key cannot be used; the caller then goes through sign(), which names the problem.
   */
  signInProcess(ref: StoredKeyRef, data: Buffer): Buffer | null;
  /** Throws naming `owner` when the reference cannot be used by this configuration (unknown kekId, other token). */
  check(ref: StoredKeyRef, owner: string): void;
  /** For health and the authority records: backend state (breaker open or closed, token label). */
  describe(): Record<string, unknown>;
  close(): Promise<void>;
}
