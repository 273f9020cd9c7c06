import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { CanvasParams, CanvasTracker, isCanvasParams, previewApplies, previewLabel } from '../../src/canvas';

const base = { uri: 'file:///a.py', version: 3, requestId: 7, position: { line: 1, character: 4 } };
const msg = (o: Partial<CanvasParams>): CanvasParams =>
  ({ ...base, text: '', kind: 'draft', canvasIndex: 0, step: 0, final: false, ...o }) as CanvasParams;

describe('CanvasTracker', () => {
  it('shows the newest draft, then the committed text, and clears on final', () => {
    const t = new CanvasTracker();
    assert.equal(t.update(msg({ text: 'ret', step: 1 }))?.text, 'ret');
    assert.equal(t.update(msg({ text: 'return x', step: 2 }))?.text, 'return x');
    assert.equal(t.update(msg({ text: 'return x + y', kind: 'committed', step: 4 }))?.text, 'return x + y');
    assert.equal(t.update(msg({ text: 'return x + y', kind: 'committed', canvasIndex: 1, final: true })), undefined);
    assert.equal(t.size, 0);
  });

  it('drops a late draft of an already committed canvas and out-of-order steps', () => {
    const t = new CanvasTracker();
    t.update(msg({ text: 'abc', kind: 'committed' }));
    assert.equal(t.update(msg({ text: 'zz', step: 9 }))?.text, 'abc');
    assert.equal(t.update(msg({ text: 'abc d', canvasIndex: 1, step: 2 }))?.text, 'abc d');
    assert.equal(t.update(msg({ text: 'abc', canvasIndex: 1, step: 1 }))?.text, 'abc d');
  });

  it('a new request on the same document replaces the old one; other candidates are not previewed', () => {
    const t = new CanvasTracker();
    t.update(msg({ text: 'old' }));
    assert.equal(t.update(msg({ requestId: 8, text: 'new' }))?.text, 'new');
    assert.equal(t.size, 1);
    assert.equal(t.update(msg({ requestId: 8, text: 'other', candidate: 1 }))?.text, 'new');
  });

  it('validates notification shape', () => {
    assert.ok(isCanvasParams(msg({ text: 'x' })));
    assert.ok(!isCanvasParams({ uri: 'x' }));
    assert.ok(!isCanvasParams(null));
  });
});

describe('preview rendering', () => {
  it('keeps the first line, summarises the rest, cuts long lines', () => {
    assert.equal(previewLabel('a + b'), 'a + b');
    assert.equal(previewLabel('if x:\n    y\n    z'), 'if x: ⏎ (+2 lines)');
    assert.equal(previewLabel('x'.repeat(200), 10), 'xxxxxxxxx…');
    assert.equal(previewLabel('\tx'), '    x');
  });

  it('applies only at the same document version and cursor', () => {
    const pre = { uri: base.uri, version: 3, position: { line: 1, character: 4 }, text: 'x' };
    assert.ok(previewApplies(pre, base.uri, 3, { line: 1, character: 4 }));
    assert.ok(!previewApplies(pre, base.uri, 4, { line: 1, character: 4 }));
    assert.ok(!previewApplies(pre, base.uri, 3, { line: 1, character: 5 }));
    assert.ok(!previewApplies(pre, 'file:///b.py', 3, { line: 1, character: 4 }));
    assert.ok(!previewApplies({ ...pre, text: '' }, base.uri, 3, { line: 1, character: 4 }));
  });
});
