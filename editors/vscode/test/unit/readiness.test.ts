import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Cancellable, ModelReadiness } from '../../src/readiness';

function token(): Cancellable & { cancel(): void } {
  const listeners = new Set<() => void>();
  return {
    isCancellationRequested: false,
    onCancellationRequested(l) {
      listeners.add(l);
      return { dispose: () => listeners.delete(l) };
    },
    cancel() {
      this.isCancellationRequested = true;
      for (const l of [...listeners]) l();
    },
  };
}

describe('waiting for the model', () => {
  it('a request waiting during the load asks again once the model is ready', async () => {
    const r = new ModelReadiness();
    const asked = r.wait(token());
    assert.equal(r.waiting, 1);
    r.markReady();
    assert.equal(await asked, true);
    assert.equal(r.waiting, 0);
    assert.equal(await r.wait(token()), true, 'once ready, nothing waits');
  });

  it('gives up when the request is cancelled (the cursor moved) or the load failed', async () => {
    const r = new ModelReadiness();
    const t = token();
    const moved = r.wait(t);
    const other = r.wait(token());
    t.cancel();
    assert.equal(await moved, false);
    r.reset();
    assert.equal(await other, false);
    assert.equal(r.waiting, 0);
    assert.equal(r.isReady, false);
  });
});
