// The one error catalogue: a closed set of kinds, their HTTP status and GraphQL code, and the single
// translation point from database and unknown errors to what a client may see.

export const ERROR_KINDS = {
  INVALID_INPUT: { status: 400, graphqlCode: 'BAD_REQUEST', retryable: false },
  UNAUTHENTICATED: { status: 401, graphqlCode: 'UNAUTHENTICATED', retryable: false },
  FORBIDDEN: { status: 403, graphqlCode: 'FORBIDDEN', retryable: false },
  NOT_FOUND: { status: 404, graphqlCode: 'NOT_FOUND', retryable: false },
  METHOD_NOT_ALLOWED: { status: 405, graphqlCode: 'BAD_REQUEST', retryable: false },
  CONFLICT: { status: 409, graphqlCode: 'CONFLICT', retryable: false },
  PAYLOAD_TOO_LARGE: { status: 413, graphqlCode: 'PAYLOAD_TOO_LARGE', retryable: false },
  UNSUPPORTED_MEDIA_TYPE: { status: 415, graphqlCode: 'BAD_REQUEST', retryable: false },
  NOT_IMPLEMENTED: { status: 501, graphqlCode: 'BAD_REQUEST', retryable: false },
  RATE_LIMITED: { status: 429, graphqlCode: 'RATE_LIMITED', retryable: true },
  UNAVAILABLE: { status: 503, graphqlCode: 'SERVICE_UNAVAILABLE', retryable: true },
  INTERNAL: { status: 500, graphqlCode: 'INTERNAL', retryable: false },
} as const;

export type ErrorKind = keyof typeof ERROR_KINDS;

export interface AppErrorOptions {
  /** Stable machine code; defaults to the kind's GraphQL code. */
  code?: string;
  details?: Record<string, unknown>;
  retryAfterSeconds?: number;
  cause?: unknown;
}

export class AppError extends Error {
  readonly kind: ErrorKind;
  readonly code: string;
  readonly details: Record<string, unknown> | undefined;
  readonly retryAfterSeconds: number | undefined;

  constructor(kind: ErrorKind, message: string, options: AppErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'AppError';
    this.kind = kind;
    this.code = options.code ?? ERROR_KINDS[kind].graphqlCode;
    this.details = options.details;
    this.retryAfterSeconds = options.retryAfterSeconds;
  }

  get status(): number {
    return ERROR_KINDS[this.kind].status;
  }

  get retryable(): boolean {
    return ERROR_KINDS[this.kind].retryable;
  }
}

/** Matches on the code field, never instanceof, so errors survive module and realm boundaries. */
export function isAppError(err: unknown): err is AppError {
  return typeof err === 'object' && err !== null && (err as { name?: unknown }).name === 'AppError'
    && typeof (err as { kind?: unknown }).kind === 'string' && (err as { kind: string }).kind in ERROR_KINDS;
}

export const invalidInput = (message: string, details?: Record<string, unknown>) =>
  new AppError('INVALID_INPUT', message, { details });
export const unauthenticated = (message = 'missing authentication') => new AppError('UNAUTHENTICATED', message);
// The admin UI splits messages on ';' and looks for the literal part 'forbidden': keep it exact.
export const forbidden = (message = 'forbidden') => new AppError('FORBIDDEN', message);
export const notFound = (what: string) => new AppError('NOT_FOUND', `${what} not found`);
export const conflict = (message: string) => new AppError('CONFLICT', message);
export const payloadTooLarge = (limit: number) =>
  new AppError('PAYLOAD_TOO_LARGE', `request body exceeds the limit of ${limit} bytes`);
/** An answer (GraphQL, custom endpoint, reader page) larger than SVC_ANSWER_MAX_BYTES: the client asks for less. */
export const answerTooLarge = (limit: number) =>
  new AppError('INVALID_INPUT', `answer exceeds the limit of ${limit} bytes; ask for fewer items or fields`);
/** The coding is echoed cut short: it is the client's text, and a header can be long. */
export const unsupportedContentEncoding = (coding: string) =>
  new AppError('UNSUPPORTED_MEDIA_TYPE', `content encoding '${coding.slice(0, 40)}' is not supported; send the body uncompressed`);
export const unsupportedTransferCoding = (coding: string) =>
  new AppError('NOT_IMPLEMENTED', `transfer coding '${coding.slice(0, 40)}' is not supported; send the body chunked or with a Content-Length`);
export const rateLimited = (retryAfterSeconds: number, message = 'rate limit exceeded') =>
  new AppError('RATE_LIMITED', message, { retryAfterSeconds });
export const unavailable = (message: string, retryAfterSeconds?: number) =>
  new AppError('UNAVAILABLE', message, { retryAfterSeconds });
export const internal = (cause?: unknown) => new AppError('INTERNAL', 'internal error', { cause });

/**
 * Messages for named constraints (`<table>__<cols>`), so a unique or check violation reads as the rule
 * it enforces. Constraints not listed fall back to the generic message of their SQLSTATE.
 */
const CONSTRAINT_MESSAGES: Record<string, string> = {
  tenants__name_live: 'a tenant with this name already exists',
  tenants__alias_live: 'a tenant with this alias already exists',
  tenant_invitations__tenant_user_pending: 'this user already has a pending invitation to this tenant',
  tenant_invitations__tenant_email_pending: 'this email already has a pending invitation to this tenant',
  entities__tenant_name_live: 'an entity with this name already exists in this tenant',
  entities__tenant_external_id_live: 'an entity with this externalId already exists in this workspace',
  entities__tenant_alias_live: 'an entity with this alias already exists in this tenant',
  entity_emails__email: 'this email is already registered',
  resources__tenant_alias_live: 'a resource with this alias already exists in this tenant',
  groups__tenant_name_live: 'a group with this name already exists in this tenant',
  groups_pkey: 'a group with this id already exists',
  roles__tenant_name_live: 'a role with this name already exists in this tenant',
  actions__name: 'an action with this name already exists',
  actions__name_format: "action name must be lowercase words joined by '.' or '_', at most 64 characters (global verbs only, never object-specific)",
  role_assignments__subject_role: 'this subject already holds this role in this tenant',
  direct_policies__subject_block: 'this subject already holds this permission block as a direct policy',
  action_assignment_rules__key: 'this guardrail rule already exists',
  action_assignment_rules__absolute_global_only: 'isAbsolute is only for global rules (tenantId null)',
  action_applicability__type_matches_kind: 'objectType must be <objectKind>:<sub-kind>',
  action_applicability__action_kind_type: 'this applicability entry already exists',
  permission_blocks__group_scope_needs_tenant: 'object-group scopes must belong to a tenant',
  credentials__shared_key_not_human: 'invalid value: shared keys are for non-human entities',
  credentials__shared_key_hash: 'this shared key is already in use',
  profiles__tenant_kind_key_live: 'a profile with this key already exists in this tenant',
  entities__profile: 'profileId does not name a profile',
  entities__profile_version: 'profileVersionId does not name a profile version',
  profile_versions__profile_version: 'this profile version already exists',
  api_endpoints__method_path_active: 'an active endpoint already serves this method and path',
  api_endpoints__tenant_key: 'an endpoint with this key already exists',
};

const CONNECTION_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'CONNECTION_CLOSED',
  'CONNECTION_ENDED', 'CONNECTION_DESTROYED', 'CONNECT_TIMEOUT', 'ENOTFOUND', 'EAI_AGAIN']);

interface DbErrorLike {
  code?: string;
  constraint_name?: string;
  constraint?: string;
  severity?: string;
  message?: string;
}

function isDbError(err: unknown): err is DbErrorLike {
  return typeof err === 'object' && err !== null && typeof (err as DbErrorLike).code === 'string';
}

/** The single translation point: anything thrown anywhere becomes an AppError a client may see. */
export function toAppError(err: unknown): AppError {
  if (isAppError(err)) return err;
  if (isDbError(err)) {
    const code = err.code as string;
    const constraint = err.constraint_name ?? err.constraint;
    const named = constraint ? CONSTRAINT_MESSAGES[constraint] : undefined;
    if (code === '23505') return new AppError('CONFLICT', named ?? 'already exists', { cause: err });
    if (code === '23503') return new AppError('INVALID_INPUT', named ?? 'invalid reference', { cause: err });
    if (code === '23514' || code === '23P01') return new AppError('INVALID_INPUT', named ?? 'invalid value', { cause: err });
    if (code === '23502') return new AppError('INVALID_INPUT', 'missing required value', { cause: err });
    if (code === '22P02' || code === '22007' || code === '22008' || code === '22003') {
      return new AppError('INVALID_INPUT', 'invalid value', { cause: err });
    }
    // A JS string reaches PostgreSQL as valid UTF-8 except for NUL, which text (22021) and jsonb (22P05,
    // a \u0000 escape) cannot hold.
    if (code === '22021' || code === '22P05') return new AppError('INVALID_INPUT', 'text must not contain NUL characters', { cause: err });
    if (code === '22001') return new AppError('INVALID_INPUT', 'value too long', { cause: err });
    if (code === '40001' || code === '40P01' || code === '55P03') {
      return new AppError('UNAVAILABLE', 'concurrent update, retry', { cause: err, retryAfterSeconds: 1 });
    }
    // query_canceled: a statement timeout (the reader's bounds each page), or a cancel request (an
    // operator's, or one meant for an abandoned custom endpoint call's statement that reached the next).
    if (code === '57014') {
      if (/statement timeout/.test(err.message ?? '')) {
        return new AppError('UNAVAILABLE', 'query cancelled: it ran longer than the statement timeout allows', { cause: err });
      }
      return new AppError('UNAVAILABLE', 'query cancelled before it finished; retry', { cause: err, retryAfterSeconds: 1 });
    }
    if (CONNECTION_CODES.has(code) || code.startsWith('08') || code === '57P01' || code === '57P03') {
      return new AppError('UNAVAILABLE', 'database unavailable', { cause: err, retryAfterSeconds: 1 });
    }
    if (err.severity !== undefined) return new AppError('INTERNAL', 'database error', { cause: err });
  }
  return internal(err);
}

/**
 * A database error about the rows a statement carried, not the database: SQLSTATE classes 22 (data
 * exception) and 23 (integrity). Writing them again fails again; the writers isolate such rows instead.
 */
export function isDataError(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && (code.startsWith('22') || code.startsWith('23'));
}

/**
 * Failures that say nothing about the caller (the database away, overload, a bug): a decision that
 * failed this way is not a refusal, and asking again later may succeed.
 */
export function isTransient(err: AppError): boolean {
  return err.kind === 'UNAVAILABLE' || err.kind === 'RATE_LIMITED' || err.kind === 'INTERNAL';
}

/** Errors the edge must log with their stack: everything that is not a deliberate client answer. */
export function isUnexpected(err: AppError): boolean {
  return err.kind === 'INTERNAL';
}

/** The HTTP body of an error: `{ error }`, as every REST route answers. */
export function httpErrorBody(err: AppError): { error: string } {
  return { error: err.message };
}

export function graphqlExtensions(err: AppError, requestId: string) {
  const ext: Record<string, unknown> = { code: err.code, retryable: err.retryable, requestId };
  if (err.kind === 'RATE_LIMITED' && err.retryAfterSeconds !== undefined) ext.retryAfterSeconds = err.retryAfterSeconds;
  if (err.details) Object.assign(ext, { details: err.details });
  return ext;
}
