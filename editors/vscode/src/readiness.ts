/** Requests that wait for the server's model to finish loading (pure: no vscode import). */

export interface Cancellable {
  isCancellationRequested: boolean;
  onCancellationRequested(listener: () => void): { dispose(): void };
}

/**
 * Whether the model is ready, and the requests waiting for it. A request answered empty during the load waits here
 * and asks again: VS Code keeps that empty answer for the position and document version, so a later trigger at the
 * same place is served from it and never reaches the server.
 */
export class ModelReadiness {
  private ready = false;
  private waiters = new Set<(ok: boolean) => void>();

  get isReady(): boolean {
    return this.ready;
  }

  get waiting(): number {
    return this.waiters.size;
  }

  /** The model is ready: every waiting request asks again. */
  markReady(): void {
    this.ready = true;
    this.release(true);
  }

  /** Not ready (a load begins or failed, or the client restarts): waiting requests keep their empty answer. */
  reset(): void {
    this.ready = false;
    this.release(false);
  }

  /** True once the model is ready; false if the load fails, the client restarts or the request is cancelled. */
  wait(token: Cancellable): Promise<boolean> {
    if (this.ready) return Promise.resolve(true);
    if (token.isCancellationRequested) return Promise.resolve(false);
    return new Promise((resolve) => {
      const done = (ok: boolean): void => {
        this.waiters.delete(done);
        sub.dispose();
        resolve(ok);
      };
      const sub = token.onCancellationRequested(() => done(false));
      this.waiters.add(done);
    });
  }

  private release(ok: boolean): void {
    for (const done of [...this.waiters]) done(ok);
  }
}
