// The plain-data shapes the CA key worker tasks (workers/ca-keys*.ts) take and answer, shared by both sides.
import type { KeyAlgorithm, KeyBackendKind, StoredKeyRef } from './types.js';

/** Given to every worker thread (piscina workerData.caKeys): what it needs to open the backends. */
export interface CaKeysWorkerData {
  /** SVC_PKI_CA_KEY_ENCRYPTION_KEY, base64; null when not configured. */
  kek: string | null;
  kekId: string;
  /** Null unless module path, token label and PIN are all configured. */
  pkcs11: { modulePath: string; tokenLabel: string; userPin: string } | null;
}

/** Failure codes of one item. The breaker counts TIMEOUT, TOKEN_ERROR and OPEN_FAILED (the token misbehaving). */
export type KeyFailureCode =
  | 'NOT_CONFIGURED' // the backend is not configured in this worker
  | 'UNKNOWN_KEK' // the ref was wrapped under a key-encryption key id this configuration does not have
  | 'UNWRAP_FAILED' // the ref does not decrypt under the configured key (tampered, or a different key under the same id)
  | 'INVALID_KEY' // an import that is not a usable private key
  | 'OPEN_FAILED' // module, token or PIN refused
  | 'KEY_NOT_FOUND' // no private key with the ref's CKA_ID on the token
  | 'UNSUPPORTED' // the token lacks the mechanism
  | 'TIMEOUT' // the token did not answer within the operation timeout
  | 'SKIPPED' // not attempted, or its answer lost: the token could not be opened, or an item of the same task hung
  | 'TOKEN_ERROR'; // a CKR_* failure (after retries when transient)

export type KeyFailure = { ok: false; code: KeyFailureCode; message: string };
export type ItemResult = { ok: true; sig: Uint8Array } | KeyFailure;

export interface SignTaskInput {
  /** The distinct keys of the batch; items point into it. */
  keys: StoredKeyRef[];
  items: { k: number; data: Uint8Array }[];
  timeoutMs: number;
  maxRetries: number;
  /**
   * PKCS#11 only, shared with the main thread's watchdog: [0] counts token attempts begun (it stops moving
   * while a call hangs), [1] is the index of the item in progress.
   */
  progress?: SharedArrayBuffer;
}
export type SignTaskOutput = { ok: true; results: ItemResult[] } | KeyFailure;

export interface GenerateTaskInput {
  backend: KeyBackendKind;
  algorithm: KeyAlgorithm;
  label: string;
  timeoutMs: number;
  maxRetries: number;
}
export type KeyTaskOutput = { ok: true; spki: Uint8Array; ref: StoredKeyRef } | KeyFailure;

export type OpenTaskOutput = { ok: true; tokenLabel: string; eddsa: boolean } | KeyFailure;
