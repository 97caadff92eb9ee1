// Per-IP fixed-window request limits by category (config.rateLimits), with IPv6 prefix aggregation and
// X-Forwarded-For honoured only from trusted proxies. In-process: each instance limits its own share.
import { isIP } from 'node:net';
import { rateLimited } from '../errors.js';
import { errorReply, type HttpHandler, type HttpReply, type HttpRequest } from './types.js';

export interface RateLimitConfig {
  enabled: boolean;
  ipv6PrefixLen: number;
  trustedProxyCidrs: string[];
  policies: Record<string, { max: number; windowSecs: number }>;
}

export interface RateLimiter {
  /** The client address as the limits see it: the peer, or the forwarded one behind a trusted proxy. */
  clientIp(ip: string, headers: Record<string, string>): string;
  /** The bucket key of an address: IPv4 as is, IPv6 reduced to its configured prefix. */
  addressKey(ip: string): string;
  /** Counts one request; returns the seconds to wait when over the limit, else 0. */
  hit(category: string, ip: string, headers: Record<string, string>): number;
  /** Whether requests of `category` are limited at all (limits on and a policy for it): fixed for the process. */
  limits(category: string): boolean;
  /**
   * Wraps a handler: 429 {"error":"rate limit exceeded"} + Retry-After when over the limit. A category
   * that is not limited (limits off, or no policy) gets the handler itself: no wrapper, no address read.
   */
  wrap(category: string, handler: HttpHandler): HttpHandler;
}

const MAX_BUCKETS = 100_000;

/** IPv6 text (any form, with or without zone or embedded IPv4) → 16 bytes; null when not IPv6. */
function parseIpv6(text: string): Buffer | null {
  let s = text.replace(/^\[|\]$/g, '').split('%')[0] as string;
  if (isIP(s) !== 6) return null;
  const v4 = /(\d+\.\d+\.\d+\.\d+)$/.exec(s);
  if (v4) {
    const [a, b, c, d] = (v4[1] as string).split('.').map(Number) as [number, number, number, number];
    s = s.slice(0, -(v4[1] as string).length) + `${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, tail] = s.includes('::') ? (s.split('::') as [string, string]) : [s, undefined];
  const h = head ? head.split(':') : [];
  const t = tail !== undefined && tail !== '' ? tail.split(':') : [];
  const groups = tail === undefined ? h : [...h, ...Array(8 - h.length - t.length).fill('0'), ...t];
  const out = Buffer.alloc(16);
  groups.forEach((g, i) => out.writeUInt16BE(parseInt(g || '0', 16), i * 2));
  return out;
}

function parseIpv4(text: string): number | null {
  if (isIP(text) !== 4) return null;
  return text.split('.').reduce((acc, part) => acc * 256 + Number(part), 0);
}

/** An IPv4-mapped IPv6 address (::ffff:a.b.c.d, as dual-stack sockets report IPv4 peers) as IPv4 text. */
function normalise(ip: string): string {
  const v6 = parseIpv6(ip);
  if (v6 && v6.subarray(0, 10).every((b) => b === 0) && v6[10] === 0xff && v6[11] === 0xff) {
    return `${v6[12]}.${v6[13]}.${v6[14]}.${v6[15]}`;
  }
  return ip;
}

function maskedIpv6(bytes: Buffer, prefix: number): string {
  const out = Buffer.from(bytes);
  for (let bit = prefix; bit < 128; bit++) out[bit >> 3] = (out[bit >> 3] as number) & ~(0x80 >> (bit & 7));
  const groups: string[] = [];
  for (let i = 0; i < 16; i += 2) groups.push(out.readUInt16BE(i).toString(16));
  return `${groups.join(':')}/${prefix}`;
}

type Cidr = { v: 4; base: number; mask: number } | { v: 6; base: Buffer; prefix: number };

function parseCidr(text: string): Cidr | null {
  const [addr, len] = text.split('/') as [string, string | undefined];
  const v4 = parseIpv4(addr);
  if (v4 !== null) {
    const bits = len === undefined ? 32 : Number(len);
    if (!(bits >= 0 && bits <= 32)) return null;
    const mask = bits === 0 ? 0 : (0xffffffff << (32 - bits)) >>> 0;
    return { v: 4, base: (v4 & mask) >>> 0, mask };
  }
  const v6 = parseIpv6(addr);
  if (!v6) return null;
  const prefix = len === undefined ? 128 : Number(len);
  return prefix >= 0 && prefix <= 128 ? { v: 6, base: v6, prefix } : null;
}

function inCidr(ip: string, cidr: Cidr): boolean {
  if (cidr.v === 4) {
    const v4 = parseIpv4(ip);
    return v4 !== null && ((v4 & cidr.mask) >>> 0) === cidr.base;
  }
  const v6 = parseIpv6(ip);
  return v6 !== null && maskedIpv6(v6, cidr.prefix) === maskedIpv6(cidr.base, cidr.prefix);
}

export function createRateLimiter(config: RateLimitConfig): RateLimiter {
  const proxies = config.trustedProxyCidrs.map(parseCidr).filter((c): c is Cidr => c !== null);
  const buckets = new Map<string, { count: number; resetAt: number }>();
  // Peer address as uWS gives it → its bucket address: parsed once per peer, not once per request.
  // Bounded like the buckets (emptied when full), so a flood from many addresses cannot grow it.
  const peerKeys = new Map<string, string>();
  let lastSweep = 0;

  const trusted = (ip: string) => proxies.some((c) => inCidr(ip, c));

  function sweep(now: number): void {
    if (buckets.size < MAX_BUCKETS && now - lastSweep < 60_000) return;
    lastSweep = now;
    for (const [k, b] of buckets) if (b.resetAt <= now) buckets.delete(k);
    // Still full after dropping closed windows: forget the oldest buckets rather than grow without bound.
    if (buckets.size >= MAX_BUCKETS) {
      let excess = buckets.size - MAX_BUCKETS / 2;
      for (const k of buckets.keys()) {
        if (excess-- <= 0) break;
        buckets.delete(k);
      }
    }
  }

  /** The bucket address of a peer that forwards nobody (without X-Forwarded-For, clientIp is the peer). */
  function peerKey(ip: string): string {
    let key = peerKeys.get(ip);
    if (key === undefined) {
      if (peerKeys.size >= MAX_BUCKETS) peerKeys.clear();
      key = limiter.addressKey(ip);
      peerKeys.set(ip, key);
    }
    return key;
  }

  const limiter: RateLimiter = {
    clientIp(ip, headers) {
      let client = normalise(ip);
      const forwarded = headers['x-forwarded-for'];
      if (!forwarded || !trusted(client)) return client;
      // Walk from the nearest hop back; the first address not ours is the client.
      const hops = forwarded.split(',').map((h) => normalise(h.trim())).filter((h) => isIP(h.replace(/^\[|\]$/g, '')) !== 0);
      for (let i = hops.length - 1; i >= 0; i--) {
        client = hops[i] as string;
        if (!trusted(client)) break;
      }
      return client;
    },
    addressKey(ip) {
      const n = normalise(ip);
      const v6 = parseIpv6(n);
      return v6 ? maskedIpv6(v6, config.ipv6PrefixLen) : n;
    },
    hit(category, ip, headers) {
      if (!config.enabled) return 0;
      const policy = config.policies[category];
      if (!policy) return 0;
      const now = Date.now();
      sweep(now);
      const key = `${category}|${headers['x-forwarded-for'] ? limiter.addressKey(limiter.clientIp(ip, headers)) : peerKey(ip)}`;
      let bucket = buckets.get(key);
      if (!bucket || bucket.resetAt <= now) {
        bucket = { count: 0, resetAt: now + policy.windowSecs * 1000 };
        buckets.set(key, bucket);
      }
      bucket.count++;
      return bucket.count > policy.max ? Math.max(1, Math.ceil((bucket.resetAt - now) / 1000)) : 0;
    },
    limits(category) {
      return config.enabled && config.policies[category] !== undefined;
    },
    wrap(category, handler) {
      if (!limiter.limits(category)) return handler;
      return (req: HttpRequest): HttpReply | Promise<HttpReply> => {
        const wait = limiter.hit(category, req.ip, req.headers);
        return wait > 0 ? errorReply(rateLimited(wait)) : handler(req);
      };
    },
  };
  return limiter;
}
