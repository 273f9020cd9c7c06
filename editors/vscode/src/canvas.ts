/**
 * `dgemma/canvas` bookkeeping (pure: no vscode import).
 *
 * The server streams each canvas while it denoises: `draft` updates per step, then `committed` when the canvas is
 * done; a multi-canvas suggestion sends canvas 0, 1, ... in order and the last message has `final: true`.
 * The preview shown at the cursor is the committed text of earlier canvases plus the newest draft of the current one.
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
}

interface RequestState {
  uri: string;
  version: number;
  position: Position;
  committed: Map<number, string>;
  current: number;
  draft: string;
  lastStep: number;
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
  private latest: string | undefined;

  /** Feed one notification; returns the preview to show now, or undefined to clear it. */
  update(p: CanvasParams): Preview | undefined {
    const id = `${p.uri}#${String(p.requestId)}`;
    if (p.final) {
      this.requests.delete(id);
      if (this.latest === id) this.latest = undefined;
      return undefined;
    }
    let st = this.requests.get(id);
    if (!st) {
      st = {
        uri: p.uri,
        version: p.version,
        position: p.position,
        committed: new Map(),
        current: p.canvasIndex ?? 0,
        draft: '',
        lastStep: -1,
      };
      this.requests.set(id, st);
      // A newer request for the same document supersedes older ones (the server cancels them too).
      for (const [other, s] of this.requests) {
        if (other !== id && s.uri === p.uri) this.requests.delete(other);
      }
    }
    this.latest = id;
    const idx = p.canvasIndex ?? 0;
    if (p.kind === 'committed') {
      st.committed.set(idx, p.text);
      st.current = idx + 1;
      st.draft = '';
      st.lastStep = -1;
    } else if (idx >= st.current && (idx > st.current || (p.step ?? 0) >= st.lastStep)) {
      // Drafts can only move forward; a late draft of an already committed canvas is dropped.
      st.current = idx;
      st.draft = p.text;
      st.lastStep = p.step ?? 0;
    }
    return this.preview(st);
  }

  private preview(st: RequestState): Preview {
    const parts: string[] = [];
    const indices = [...st.committed.keys()].sort((a, b) => a - b);
    for (const i of indices) parts.push(st.committed.get(i) ?? '');
    parts.push(st.draft);
    return { uri: st.uri, version: st.version, position: st.position, text: parts.join('') };
  }

  clear(uri?: string): void {
    for (const [id, st] of this.requests) {
      if (uri === undefined || st.uri === uri) this.requests.delete(id);
    }
    this.latest = undefined;
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
