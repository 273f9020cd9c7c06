import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { fixStructureActions, rewriteActions } from '../../src/fix';
import { backendFromStatus, parseOutcome, phaseFromState, statusText, statusTooltip } from '../../src/status';

describe('status bar', () => {
  it('shows loading progress with a percentage', () => {
    assert.equal(
      statusText({ phase: 'loading', progressMessage: 'loading transformers: weights', percentage: 42.4 }),
      '$(loading~spin) dgemma: loading transformers: weights 42%',
    );
  });

  it('shows backend and device when ready, and a spinner while a suggestion runs', () => {
    assert.equal(statusText({ phase: 'ready', backend: 'transformers', device: 'cpu' }), '$(sparkle) dgemma: transformers · cpu');
    assert.equal(statusText({ phase: 'ready', busy: true }), '$(sync~spin) dgemma');
    assert.equal(statusText({ phase: 'error' }), '$(error) dgemma: error');
    assert.match(statusTooltip({ phase: 'error', error: 'no model' }), /error: no model/);
  });

  it('says when the last suggestion was withheld for low confidence', () => {
    const st = { phase: 'ready' as const, backend: 'transformers', device: 'cpu', withheld: true };
    assert.equal(statusText(st), '$(eye-closed) dgemma: transformers · cpu · withheld');
    assert.match(statusTooltip(st), /withheld: the model was less confident than min_confidence/);
    assert.equal(statusText({ ...st, busy: true }), '$(sync~spin) dgemma: transformers · cpu');
    assert.equal(statusText({ ...st, withheld: false }), '$(sparkle) dgemma: transformers · cpu');
  });

  it("says why the active document's last request showed nothing: withheld under the gate, disabled, shown", () => {
    const base = { phase: 'ready' as const, backend: 'transformers', device: 'cpu' };
    const withheld = parseOutcome({ uri: 'file:///a.py', feature: 'nextEdit', state: 'withheld', confidence: 0.123, gate: 0.99, reason: 'low confidence' });
    assert.ok(withheld);
    assert.equal(statusText({ ...base, outcome: withheld }), '$(eye-closed) dgemma: transformers · cpu · withheld 0.12 < 0.99');
    assert.match(statusTooltip({ ...base, outcome: withheld }), /gate in force: min_confidence 0\.99/);
    const disabled = parseOutcome({ uri: 'file:///a.py', feature: 'nextEdit', state: 'disabled' });
    assert.equal(statusText({ ...base, outcome: disabled }), '$(circle-slash) dgemma: transformers · cpu · disabled');
    const excluded = parseOutcome({ uri: 'file:///a.py', feature: 'inlineCompletion', state: 'excluded' });
    assert.equal(statusText({ ...base, outcome: excluded }), '$(circle-slash) dgemma: transformers · cpu · excluded');
    const shown = parseOutcome({ uri: 'file:///a.py', feature: 'nextEdit', state: 'shown' });
    assert.equal(statusText({ ...base, outcome: shown }), '$(sparkle) dgemma: transformers · cpu · shown');
    assert.equal(parseOutcome({ state: 'shown' }), undefined);
  });

  it('reads dgemma.status answers', () => {
    const st = {
      server: { name: 'dgemma-lsp' },
      backend: { state: 'ready', error: null, info: { name: 'transformers', model: '/tiny', device: 'cpu', ready: true } },
      settings: { backend: 'transformers' },
    };
    assert.deepEqual(backendFromStatus(st), {
      backend: 'transformers',
      model: '/tiny',
      device: 'cpu',
      state: 'ready',
      error: undefined,
    });
    assert.deepEqual(backendFromStatus(null), {});
    assert.equal(phaseFromState('loading', 'ready'), 'loading');
    assert.equal(phaseFromState('failed', 'ready'), 'error');
    assert.equal(phaseFromState('ready', 'loading'), 'ready');
    assert.equal(phaseFromState(undefined, 'starting'), 'starting');
  });
});

describe('code action picking', () => {
  const actions = [
    { title: 'Fix all structure problems (2)', kind: 'source.fixAll.dgemma' },
    { title: 'Fix structure (deterministic rules, no model): trailing comma', kind: 'quickfix.dgemma.fixStructure.rules' },
    { title: 'Fix structure with DiffusionGemma: trailing comma', kind: 'quickfix.dgemma.fixStructure', isPreferred: true },
    { title: 'Rewrite selection with DiffusionGemma', kind: 'refactor.rewrite.dgemma.rewriteSelection' },
    { title: 'Organize imports', kind: 'source.organizeImports' },
  ];

  it('orders fixes: preferred model fix, deterministic fix, then fix all', () => {
    assert.deepEqual(
      fixStructureActions(actions).map((a) => a.kind),
      ['quickfix.dgemma.fixStructure', 'quickfix.dgemma.fixStructure.rules', 'source.fixAll.dgemma'],
    );
  });

  it('finds the rewrite action', () => {
    assert.deepEqual(rewriteActions(actions).map((a) => a.title), ['Rewrite selection with DiffusionGemma']);
  });
});
