/**
 * `dgemma/canvas` bookkeeping (pure: no vscode import).
 *
 * The server streams each canvas while it denoises: `draft` updates per step, then `committed` when the canvas is
 * done; a multi-canvas suggestion sends canvas 0, 1, ... in order and the last message has `final: true`. Each
 * message's `text` is already the whole cleaned suggestion so far (committed canvases plus the current draft), so
 * the preview is the newest text, kept in order: a late draft of an already committed canvas is dropped.
 */

export interface Position {
  line: number;
  character: number;
}

export interface CanvasParams {
  uri: string;
  version: number;
  requestId: string | number;
  position: Position;
  text: string;
  kind: 'draft' | 'committed';
  canvasIndex: number;
  step: number;
  final: boolean;
  candidate?: number;
  outcome?: string;
}

interface RequestState {
  uri: string;
  version: number;
  position: Position;
  committedCanvases: number;
  canvasIndex: number;
  step: number;
  text: string;
}

export interface Preview {
  uri: string;
  version: number;
  position: Position;
  text: string;
}

export function isCanvasParams(p: unknown): p is CanvasParams {
  if (!p || typeof p !== 'object') return false;
  const o = p as Record<string, unknown>;
  return (
    typeof o.uri === 'string' &&
    typeof o.text === 'string' &&
    (o.kind === 'draft' || o.kind === 'committed') &&
    typeof o.position === 'object' &&
    o.position !== null
  );
}

export class CanvasTracker {
  private readonly requests = new Map<string, RequestState>();

  /** Feed one notification; returns the preview to show now, or undefined to clear it. */
  update(p: CanvasParams): Preview | undefined {
    const id = `${p.uri}#${String(p.requestId)}`;
    if ((p.candidate ?? 0) !== 0) {
      // Extra candidates of an invoked request: only the first is previewed.
      const st = this.requests.get(id);
      return st ? this.preview(st) : undefined;
    }
    if (p.final) {
      this.requests.delete(id);
      return undefined;
    }
    let st = this.requests.get(id);
    if (!st) {
      st = { uri: p.uri, version: p.version, position: p.position, committedCanvases: 0, canvasIndex: 0, step: -1, text: '' };
      // A newer request for the same document supersedes older ones (the server cancels them too).
      for (const [other, s] of this.requests) {
        if (s.uri === p.uri) this.requests.delete(other);
      }
      this.requests.set(id, st);
    }
    const idx = p.canvasIndex ?? 0;
    if (p.kind === 'committed') {
      st.committedCanvases = Math.max(st.committedCanvases, idx + 1);
      st.canvasIndex = idx + 1;
      st.step = -1;
      st.text = p.text;
    } else if (idx >= st.committedCanvases && (idx > st.canvasIndex || (idx === st.canvasIndex && (p.step ?? 0) >= st.step))) {
      st.canvasIndex = idx;
      st.step = p.step ?? 0;
      st.text = p.text;
    }
    return this.preview(st);
  }

  private preview(st: RequestState): Preview {
    return { uri: st.uri, version: st.version, position: st.position, text: st.text };
  }

  clear(uri?: string): void {
    for (const [id, st] of this.requests) {
      if (uri === undefined || st.uri === uri) this.requests.delete(id);
    }
  }

  get size(): number {
    return this.requests.size;
  }
}

/**
 * What a decoration can show: decorations render one line, so the first line is shown and further lines are
 * summarised; whitespace is kept visible (leading spaces matter for code) and long lines are cut.
 */
export function previewLabel(text: string, maxChars = 120): string {
  const lines = text.replace(/\r\n/g, '\n').split('\n');
  let first = lines[0].replace(/\t/g, '    ');
  if (first.length > maxChars) first = first.slice(0, maxChars - 1) + '…';
  const more = lines.length - 1;
  if (more > 0) return `${first} ⏎ (+${more} line${more > 1 ? 's' : ''})`;
  return first;
}

/** Should a preview be drawn for this editor state? Stale versions and moved cursors get nothing. */
export function previewApplies(pre: Preview, docUri: string, docVersion: number, cursor: Position): boolean {
  return (
    pre.uri === docUri &&
    pre.version === docVersion &&
    pre.position.line === cursor.line &&
    pre.position.character === cursor.character &&
    pre.text.length > 0
  );
}
