// What frames and codes a request's body, vetted before anything reads it: uWS takes the first of two
// Content-Length headers and undoes only the chunked transfer coding, so a request it would read one way
// and a proxy in front another is refused here.
import { unsupportedContentEncoding, unsupportedTransferCoding } from '../errors.js';
import type { UwsRequest } from './uws.js';
import { errorReply, type HttpReply } from './types.js';

/** Sent with a 415 for a coded body (RFC 9110 12.5.3): the one coding every body route reads. */
const IDENTITY_ONLY = Object.freeze({ 'accept-encoding': 'identity' });

/**
 * 'cut': two Content-Length values differ. uWS frames the body by the first, a proxy in front may have
 * forwarded by the last, and the bytes past the first would be parsed and served as a request of their
 * own (smuggling). uWS goes on parsing a connection's buffer even after a reply that closes it, so the 400
 * RFC 9112 6.3 asks for cannot be sent safely: the caller closes the connection at once, unanswered.
 */
export type Framing = HttpReply | 'cut' | undefined;

const CONTENT_LENGTH = Buffer.from('content-length');

/**
 * Some Content-Length differs from the first: the request is to be cut (see Framing). For routes that
 * read no body: uWS frames one by its first length all the same. Most such requests have no length, and
 * are told by one header lookup.
 */
export function lengthsConflict(req: UwsRequest): boolean {
  if (req.getHeader(CONTENT_LENGTH) === '') return false;
  let first: string | undefined;
  let conflict = false;
  req.forEach((key, value) => {
    if (key !== 'content-length') return;
    const declared = value.trim();
    if (first === undefined) first = declared;
    else if (declared !== first) conflict = true;
  });
  return conflict;
}

/**
 * A request with a body has every header read in one pass (uWS hands a route's headers only one by one,
 * first value only): the route's own into `headers` (the first of each), and what frames and codes the
 * body. Returns the reply refusing a body this listener would misread, 'cut', or undefined when it is fine.
 */
export function readBodyHeaders(req: UwsRequest, wanted: ReadonlySet<string> | null, headers: Record<string, string>): Framing {
  let length: string | undefined;
  let verdict: Framing;
  req.forEach((key, value) => {
    if ((wanted === null || wanted.has(key)) && headers[key] === undefined) headers[key] = value;
    if (verdict !== undefined) return;
    if (key === 'content-length') {
      const declared = value.trim();
      if (length !== undefined && declared !== length) verdict = 'cut';
      length = declared;
    } else if (key === 'transfer-encoding' && value.trim().toLowerCase() !== 'chunked') {
      // uWS de-chunks 'gzip, chunked' and leaves the gzip: a coding it cannot undo (RFC 9112 6.1: 501).
      verdict = errorReply(unsupportedTransferCoding(value));
    } else if (key === 'content-encoding' && value.trim().toLowerCase() !== 'identity') {
      // Read as it came, a coded body (gzip...) would be misread as plain text.
      verdict = errorReply(unsupportedContentEncoding(value), IDENTITY_ONLY);
    }
  });
  return verdict;
}
