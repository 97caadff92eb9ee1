// The reusable per-IP limiter (src/http/rate-limit.ts): windows, IPv6 prefix aggregation, trusted proxies.
import t from 'tap';
import { createRateLimiter } from '../../src/http/rate-limit.js';

const limiter = (over: Partial<Parameters<typeof createRateLimiter>[0]> = {}) => createRateLimiter({
  enabled: true, ipv6PrefixLen: 64, trustedProxyCidrs: [], policies: { auth_routes: { max: 2, windowSecs: 60 } }, ...over,
});

t.test('fixed window per category and address', async (t) => {
  const l = limiter();
  t.equal(l.hit('auth_routes', '10.0.0.1', {}), 0);
  t.equal(l.hit('auth_routes', '10.0.0.1', {}), 0);
  const wait = l.hit('auth_routes', '10.0.0.1', {});
  t.ok(wait >= 59 && wait <= 60, `retry after ${wait}s`);
  t.equal(l.hit('auth_routes', '10.0.0.2', {}), 0, 'another address has its own bucket');
  t.equal(l.hit('graphql', '10.0.0.1', {}), 0, 'a category without a policy is not limited');
  t.equal(limiter({ enabled: false }).hit('auth_routes', '10.0.0.1', {}), 0);
});

t.test('IPv6 addresses aggregate by prefix; IPv4-mapped addresses count as IPv4', async (t) => {
  const l = limiter();
  t.equal(l.addressKey('2001:db8:1:2:aaaa::1'), l.addressKey('2001:0db8:0001:0002:ffff:ffff:ffff:ffff'));
  t.not(l.addressKey('2001:db8:1:2::1'), l.addressKey('2001:db8:1:3::1'));
  t.equal(l.addressKey('2001:db8:1:2::1'), '2001:db8:1:2:0:0:0:0/64');
  t.equal(l.addressKey('::ffff:192.0.2.7'), '192.0.2.7');
  t.equal(l.addressKey('0000:0000:0000:0000:0000:ffff:c000:0207'), '192.0.2.7', 'uWS long form');
  l.hit('auth_routes', '2001:db8:1:2::1', {});
  l.hit('auth_routes', '2001:db8:1:2::2', {});
  t.ok(l.hit('auth_routes', '2001:db8:1:2:ffff::9', {}) > 0, 'the /64 shares one bucket');
  t.equal(limiter({ ipv6PrefixLen: 128 }).addressKey('2001:db8::1'), '2001:db8:0:0:0:0:0:1/128');
});

t.test('X-Forwarded-For is honoured only from trusted proxies', async (t) => {
  const l = limiter({ trustedProxyCidrs: ['10.0.0.0/8', 'fd00::/8'] });
  t.equal(l.clientIp('10.1.2.3', { 'x-forwarded-for': '203.0.113.9, 10.9.9.9' }), '203.0.113.9');
  t.equal(l.clientIp('198.51.100.1', { 'x-forwarded-for': '203.0.113.9' }), '198.51.100.1', 'an untrusted peer cannot claim another address');
  t.equal(l.clientIp('fd00::1', { 'x-forwarded-for': '2001:db8::5' }), '2001:db8::5');
  t.equal(l.clientIp('10.1.2.3', { 'x-forwarded-for': 'garbage' }), '10.1.2.3');
  t.equal(l.clientIp('10.1.2.3', {}), '10.1.2.3');
});

t.test('a category that is not limited gets its handler unwrapped; a limited one still answers 429', async (t) => {
  const handler = () => ({ status: 200 });
  t.equal(limiter({ enabled: false }).wrap('auth_routes', handler), handler, 'limits off: no wrapper, no address read');
  t.same([limiter().limits('auth_routes'), limiter().limits('graphql'), limiter({ enabled: false }).limits('auth_routes')], [true, false, false], 'limits() says which');
  t.equal(limiter().wrap('graphql', handler), handler, 'no policy for the category: no wrapper');
  const wrapped = limiter().wrap('auth_routes', handler);
  t.not(wrapped, handler);
  const req = { ip: '0000:0000:0000:0000:0000:ffff:c000:0207', headers: {} } as never;
  t.equal((await wrapped(req)).status, 200);
  t.equal((await wrapped(req)).status, 200);
  t.equal((await wrapped(req)).status, 429, 'the third request of the window is refused');
});

t.test('a peer\'s bucket address is remembered, and agrees with the one X-Forwarded-For paths compute', async (t) => {
  const l = limiter({ trustedProxyCidrs: ['10.0.0.0/8'] });
  // Through a trusted proxy and directly from the same client: one bucket.
  t.equal(l.hit('auth_routes', '10.0.0.1', { 'x-forwarded-for': '::ffff:192.0.2.7' }), 0);
  t.equal(l.hit('auth_routes', '192.0.2.7', {}), 0);
  t.ok(l.hit('auth_routes', '0000:0000:0000:0000:0000:ffff:c000:0207', {}) > 0, 'the uWS long form of the same address, third hit');
  // IPv6 peers aggregate by prefix when the address comes from the memo too.
  t.equal(l.hit('auth_routes', '2001:db8:1:2::1', {}), 0);
  t.equal(l.hit('auth_routes', '2001:db8:1:2::1', {}), 0);
  t.ok(l.hit('auth_routes', '2001:db8:1:2::2', {}) > 0, 'the /64 still shares one bucket');
});
