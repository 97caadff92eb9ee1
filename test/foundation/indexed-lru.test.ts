// The LRU behind the auth and authz caches: entries are dropped by the ids they were built from, and
// the index follows the entries through replacement, eviction, expiry and clearing.
import t from 'tap';
import { createIndexedLru } from '../../src/indexed-lru.js';

interface Entry {
  refs: string[];
  left?: boolean;
}

const entry = (...refs: string[]): Entry => ({ refs });

t.test('drop finds entries by key and by every id they were built from', async (t) => {
  const { cache, drop } = createIndexedLru<Entry>({ max: 10, refsOf: (e) => e.refs });
  cache.set('k1', entry('device-1', 'tenant-a'));
  cache.set('k2', entry('device-2', 'tenant-a'));
  cache.set('k3', entry('device-3', 'tenant-b'));
  t.same(drop(['nothing']), []);
  t.equal(drop(['device-1']).length, 1);
  t.same([...cache.keys()].sort(), ['k2', 'k3']);
  t.equal(drop(['tenant-a', 'k3']).length, 2, 'an id and a key together');
  t.equal(cache.size, 0);
});

t.test('the index follows replacement, eviction, expiry and clearing', async (t) => {
  const left: Entry[] = [];
  const lru = createIndexedLru<Entry>({ max: 2, ttl: 60_000, refsOf: (e) => e.refs, onLeave: (e) => left.push(e) });
  const { cache, drop } = lru;
  const first = entry('old-credential', 'device-1');
  cache.set('k1', first);
  cache.set('k1', entry('new-credential', 'device-1'));
  t.same(left, [first], 'the replaced value left');
  t.same(drop(['old-credential']), [], 'its ids no longer find the key');
  t.equal(drop(['new-credential']).length, 1);

  // Churn through a cache of two: only what is held stays indexed.
  for (let i = 0; i < 1000; i++) cache.set(`k${i}`, entry(`credential-${i}`, `device-${i}`));
  t.equal(cache.size, 2);
  t.equal(lru.indexedIds, 6, 'two entries: their keys and two ids each');
  t.same(drop(['credential-0']), [], 'an evicted entry is not found');

  cache.clear();
  t.equal(lru.indexedIds, 0, 'cleared with the cache');
  t.equal(left.length, 1 + 1 + 998 + 2, 'every departure reported once');
});

t.test('an expired entry leaves the index when the cache notices it', async (t) => {
  let now = 1_000_000;
  const lru = createIndexedLru<Entry>({ max: 10, ttl: 1000, ttlResolution: 0, perf: { now: () => now }, refsOf: (e) => e.refs });
  lru.cache.set('k', entry('credential'));
  now += 2000;
  t.equal(lru.cache.get('k'), undefined);
  t.equal(lru.indexedIds, 0);
});
