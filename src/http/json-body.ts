// JSON request bodies of the REST routes: the content type, the bytes as UTF-8 text, one JSON object.
import { AppError, invalidInput } from '../errors.js';
import { utf8Text, wellFormedJson } from '../validate.js';
import type { HttpRequest } from './types.js';

/** The body as text, once its Content-Type says JSON (or says nothing) and its bytes are UTF-8. */
export function jsonText(req: HttpRequest): string {
  const type = req.headers['content-type'];
  if (type !== undefined && !type.toLowerCase().startsWith('application/json')) {
    throw new AppError('UNSUPPORTED_MEDIA_TYPE', 'Content-Type must be application/json');
  }
  return utf8Text(req.body, 'request body');
}

/** The text as one JSON object, every string in it Unicode text; 400 otherwise. */
export function jsonObject(text: string): Record<string, unknown> {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw invalidInput('request body must be a JSON object');
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw invalidInput('request body must be a JSON object');
  wellFormedJson(text, body, 'request body');
  return body as Record<string, unknown>;
}
