/**
 * An independent LSP client (vscode-languageserver-protocol over stdio, no editor) against `dgemma-lsp --stdio`:
 * initialize, inline completion with dgemma/canvas streaming, diagnostics, code action + codeAction/resolve whose
 * edit leaves valid JSON, and dgemma.status.
 *
 * Env: DGEMMA_LSP_CMD = JSON list (the server command, e.g. ["dgemma-lsp","--stdio","--model","/tiny"]).
 */
import assert from 'node:assert/strict';
import { ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { after, before, describe, it } from 'node:test';
import {
  CodeAction,
  CodeActionRequest,
  CodeActionResolveRequest,
  createProtocolConnection,
  Diagnostic,
  DidOpenTextDocumentNotification,
  ExecuteCommandRequest,
  ExitNotification,
  InitializedNotification,
  InitializeRequest,
  InitializeResult,
  InlineCompletionItem,
  InlineCompletionList,
  InlineCompletionRequest,
  InlineCompletionTriggerKind,
  ProtocolConnection,
  PublishDiagnosticsNotification,
  ShutdownRequest,
  StreamMessageReader,
  StreamMessageWriter,
  TextEdit,
  WorkDoneProgressCreateRequest,
} from 'vscode-languageserver-protocol/node';
import { TextDocument } from 'vscode-languageserver-textdocument';

interface Canvas {
  uri: string;
  version: number;
  requestId: string | number;
  text: string;
  kind: string;
  canvasIndex: number;
  step: number;
  final: boolean;
}

const cmd: string[] = JSON.parse(process.env.DGEMMA_LSP_CMD ?? '["dgemma-lsp","--stdio"]');
let proc: ChildProcessWithoutNullStreams;
let conn: ProtocolConnection;
let init: InitializeResult;
const canvases: Canvas[] = [];
const diagnostics = new Map<string, Diagnostic[]>();
let stderr = '';

function waitFor<T>(what: string, fn: () => T | undefined, timeoutMs: number): Promise<T> {
  return new Promise((resolve, reject) => {
    const t0 = Date.now();
    const tick = () => {
      const v = fn();
      if (v !== undefined) return resolve(v);
      if (Date.now() - t0 > timeoutMs) return reject(new Error(`timed out waiting for ${what}; server stderr:\n${stderr.slice(-2000)}`));
      setTimeout(tick, 50);
    };
    tick();
  });
}

describe('dgemma-lsp over stdio (Node protocol client)', { timeout: 240_000 }, () => {
  before(async () => {
    proc = spawn(cmd[0], cmd.slice(1), { stdio: 'pipe' });
    proc.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    conn = createProtocolConnection(new StreamMessageReader(proc.stdout), new StreamMessageWriter(proc.stdin));
    conn.onNotification('dgemma/canvas', (p: Canvas) => {
      canvases.push(p);
    });
    conn.onNotification(PublishDiagnosticsNotification.type, (p) => {
      diagnostics.set(p.uri, p.diagnostics);
    });
    conn.onRequest(WorkDoneProgressCreateRequest.type, () => undefined);
    conn.onRequest('workspace/configuration', (p: { items: unknown[] }) => p.items.map(() => null));
    conn.onNotification('$/progress', () => undefined);
    conn.onNotification('window/logMessage', () => undefined);
    conn.listen();
    init = await conn.sendRequest(InitializeRequest.type, {
      processId: process.pid,
      rootUri: null,
      workspaceFolders: null,
      capabilities: {
        window: { workDoneProgress: true },
        textDocument: {
          inlineCompletion: { dynamicRegistration: false },
          codeAction: {
            resolveSupport: { properties: ['edit'] },
            codeActionLiteralSupport: { codeActionKind: { valueSet: ['quickfix', 'source', 'refactor'] } },
            dataSupport: true,
          },
          publishDiagnostics: { relatedInformation: true },
          synchronization: { dynamicRegistration: false },
        },
        workspace: { configuration: true, applyEdit: true },
      },
      initializationOptions: { denoisingSteps: 4, singleLineCanvas: 8, multiLineCanvas: 16, debounceMs: 0 },
    });
    await conn.sendNotification(InitializedNotification.type, {});
  });

  after(async () => {
    try {
      await conn.sendRequest(ShutdownRequest.type);
      await conn.sendNotification(ExitNotification.type);
    } catch {
      // the server may already be gone; the kill below settles it
    }
    await new Promise((r) => setTimeout(r, 300));
    proc.kill();
    conn.dispose();
  });

  it('initialize advertises inline completion, resolvable code actions and dgemma commands', () => {
    const caps = init.capabilities;
    assert.ok(caps.inlineCompletionProvider, 'inlineCompletionProvider');
    assert.equal(typeof caps.codeActionProvider, 'object');
    assert.equal((caps.codeActionProvider as { resolveProvider?: boolean }).resolveProvider, true);
    assert.ok(caps.executeCommandProvider?.commands.includes('dgemma.status'));
    assert.equal(init.serverInfo?.name, 'dgemma-lsp');
  });

  it('inline completion returns non-empty text and streams dgemma/canvas ending with final', async () => {
    const uri = 'file:///tmp/dgemma-protocol/calc.py';
    const text = 'def add(a, b):\n    return \n';
    await conn.sendNotification(DidOpenTextDocumentNotification.type, {
      textDocument: { uri, languageId: 'python', version: 1, text },
    });
    const position = { line: 1, character: 11 };
    let items: InlineCompletionItem[] = [];
    // The model loads in the background; an early request can come back empty while it loads.
    const t0 = Date.now();
    while (items.length === 0 && Date.now() - t0 < 150_000) {
      const res = await conn.sendRequest(InlineCompletionRequest.type, {
        textDocument: { uri },
        position,
        context: { triggerKind: InlineCompletionTriggerKind.Invoked },
      });
      items = Array.isArray(res) ? res : ((res as InlineCompletionList | null)?.items ?? []);
      if (items.length === 0) await new Promise((r) => setTimeout(r, 1000));
    }
    assert.ok(items.length > 0, 'no inline completion item');
    const first = items[0];
    const insert = typeof first.insertText === 'string' ? first.insertText : first.insertText.value;
    assert.ok(insert.trim().length > 0, 'empty insertText');
    if (first.range) {
      assert.deepEqual(first.range.start, position, 'the item starts at the cursor');
    }
    const mine = await waitFor('a final canvas', () => {
      const c = canvases.filter((c) => c.uri === uri);
      return c.some((x) => x.final) ? c : undefined;
    }, 10_000);
    // Per request: canvases in order, drafts before the final message, exactly one final, at the end.
    const byReq = new Map<string, Canvas[]>();
    for (const c of mine) {
      const k = String(c.requestId) + '#' + String((c as unknown as { candidate?: number }).candidate ?? 0);
      byReq.set(k, [...(byReq.get(k) ?? []), c]);
    }
    for (const [k, seq] of byReq) {
      const finals = seq.filter((c) => c.final);
      assert.ok(finals.length <= 1, `${k}: more than one final`);
      if (finals.length) assert.ok(seq[seq.length - 1].final, `${k}: final is not last`);
      for (let i = 1; i < seq.length; i++) {
        assert.ok(seq[i].canvasIndex >= seq[i - 1].canvasIndex, `${k}: canvas index went back`);
      }
      assert.ok(seq.every((c) => c.version === 1 && (c.kind === 'draft' || c.kind === 'committed')));
    }
    assert.ok(mine.some((c) => c.kind === 'draft'), 'no draft canvas streamed');
  });

  it('broken JSON gets a diagnostic, and a resolved fix-structure action yields valid JSON', async () => {
    const uri = 'file:///tmp/dgemma-protocol/broken.json';
    const text = '{\n  "name": "demo",\n  "tags": ["a", "b",],\n  "path": "C:\\\\Users\\\\x",\n  "$id": 7\n';
    await conn.sendNotification(DidOpenTextDocumentNotification.type, {
      textDocument: { uri, languageId: 'json', version: 1, text },
    });
    const diags = await waitFor('diagnostics', () => {
      const d = diagnostics.get(uri);
      return d && d.length > 0 ? d : undefined;
    }, 30_000);
    const actions = (await conn.sendRequest(CodeActionRequest.type, {
      textDocument: { uri },
      range: diags[0].range,
      context: { diagnostics: diags },
    })) as CodeAction[];
    const titles = actions.map((a) => a.title);
    assert.ok(actions.length > 0, 'no code actions');
    assert.ok(actions.every((a) => a.edit === undefined), 'listing must stay instant (edits come from resolve)');
    // "Fix all" tries the model and falls back to the deterministic repair, so it always resolves to an edit.
    const fixAll = actions.find((a) => a.kind === 'source.fixAll.dgemma');
    assert.ok(fixAll, `no fix-all action in ${JSON.stringify(titles)}`);
    const resolved = await conn.sendRequest(CodeActionResolveRequest.type, fixAll);
    const edits: TextEdit[] = resolved.edit?.changes?.[uri] ??
      (resolved.edit?.documentChanges ?? []).flatMap((c) => ('edits' in c ? (c.edits as TextEdit[]) : []));
    assert.ok(edits.length > 0, 'resolve returned no edit');
    const others = Object.keys(resolved.edit?.changes ?? {}).filter((u) => u !== uri);
    assert.deepEqual(others, [], 'an edit targets another document');
    const doc = TextDocument.create(uri, 'json', 1, text);
    const fixed = TextDocument.applyEdits(doc, edits);
    const value = JSON.parse(fixed);
    assert.deepEqual(value, { name: 'demo', tags: ['a', 'b'], path: 'C:\\Users\\x', $id: 7 });

    // The per-issue deterministic action resolves to a valid edit too.
    const rules = actions.find((a) => a.kind === 'quickfix.dgemma.fixStructure.rules');
    assert.ok(rules, `no rules action in ${JSON.stringify(titles)}`);
    const r2 = await conn.sendRequest(CodeActionResolveRequest.type, rules);
    assert.ok(r2.edit, 'rules action resolved without an edit');
  });

  it('dgemma.status reports the backend', async () => {
    const st = (await conn.sendRequest(ExecuteCommandRequest.type, { command: 'dgemma.status', arguments: [] })) as {
      server: { name: string };
      backend: { state: string; info?: { name: string; device: string } };
    };
    assert.equal(st.server.name, 'dgemma-lsp');
    assert.equal(st.backend.state, 'ready');
    assert.equal(st.backend.info?.name, 'transformers');
    assert.equal(st.backend.info?.device, 'cpu');
  });
});
