// Run a mocha/chai spec with stubs: parse() returns a probe; expect(probe).equals / deep.equals records [input, expected, hasUndefined].
const fs = require('fs');
let src = fs.readFileSync(process.argv[2], 'utf8');
src = src.replace(/^import .*$/mg, '')
  .replace(/let (\w+): [^\n=]+$/mg, 'let $1')
  .replace(/\((\w+): string, (\w+): boolean\)/g, '($1, $2)')
  .replace(/ as any/g, '').replace(/(\w)!\)/g, '$1)').replace(/(let|const) (\w+): [^=\n]+=/g, '$1 $2 =');
const out = [];
function hasUndef(v) { if (v === undefined) return true; if (v && typeof v === 'object') return Object.values(v).some(hasUndef); return false; }
function P(t) { this.__in = t; }
const parse = (t) => new P(t);
parse.onExtraToken = () => {}; parse.lastParseReminding = '';
const setErrorLogger = () => {};
function expect(x) {
  const rec = (y) => { if (x instanceof P && typeof x.__in === 'string') out.push([x.__in, y === undefined ? null : y, hasUndef(y), y === undefined]); };
  const chain = { equals: rec, equal: rec, eq: rec };
  chain.deep = chain; chain.to = chain; chain.be = chain; chain.is = chain;
  Object.defineProperty(chain, 'undefined', { get() { return undefined; } });
  Object.defineProperty(chain, 'null', { get() { return undefined; } });
  Object.defineProperty(chain, 'true', { get() { return undefined; } });
  chain.throws = () => {}; chain.string = () => {}; chain.have = { lengthOf() {} };
  return chain;
}
const sinon = { fake: () => { const f = () => {}; f.called = true; f.firstCall = { firstArg: '' }; return f; }, spy: () => () => {}, restore() {} };
const describe = (n, f) => f(); const context = describe;
const it = (n, f) => { try { f(); } catch (e) { process.stderr.write('skip ' + n + ': ' + e.message + '\n'); } };
const beforeEach = () => {}, afterEach = () => {};
eval(src);
process.stdout.write(JSON.stringify(out));
