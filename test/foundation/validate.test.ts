// Shared input checks that guard what reaches PostgreSQL as text.
import t from 'tap';
import { utf8Text, wellFormedJson } from '../../src/validate.js';

t.test('utf8Text refuses bytes that are not UTF-8', async (t) => {
  t.equal(utf8Text(Buffer.from('café'), 'body'), 'café');
  t.throws(() => utf8Text(Buffer.from([0x63, 0x61, 0x66, 0xe9]), 'body'), { kind: 'INVALID_INPUT', message: 'body is not valid UTF-8' });
  t.throws(() => utf8Text(Buffer.from([0xed, 0xa0, 0x80]), 'body'), { kind: 'INVALID_INPUT', message: 'body is not valid UTF-8' }, 'a surrogate encoded as UTF-8 bytes');
});

t.test('wellFormedJson finds an unpaired surrogate in any string or key, at any depth', async (t) => {
  const check = (text: string) => () => wellFormedJson(text, JSON.parse(text), 'body');
  t.doesNotThrow(check('{"a":["x","\\ud83d\\ude00"]}'), 'a pair is text');
  t.doesNotThrow(check('{"a":"\\u00e9\\u0041"}'), 'other escapes are not looked at');
  const refused = { kind: 'INVALID_INPUT', message: 'body holds an unpaired surrogate escape (\\uD800-\\uDFFF), which is not Unicode text' };
  t.throws(check('{"a":[1,{"b":"x\\udfff"}]}'), refused, 'a trailing half alone');
  t.throws(check('{"\\ud800":1}'), refused, 'in a key');
  // Deeper than the call stack goes: walked without recursion, refused rather than a RangeError.
  const deep = `${'['.repeat(200_000)}"\\ud800"${']'.repeat(200_000)}`;
  let value: unknown = '\ud800';
  for (let i = 0; i < 200_000; i++) value = [value];
  t.throws(() => wellFormedJson(deep, value, 'body'), refused);
});
