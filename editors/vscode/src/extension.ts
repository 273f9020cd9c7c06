/**
 * VS Code client for dgemma-lsp: starts `dgemma-lsp --stdio`, lets vscode-languageclient 11 wire the standard
 * LSP 3.18 inline completion and code actions, and adds what the protocol does not cover: a status bar item fed by
 * `$/progress` and `dgemma.status`, refining ghost-text drafts from `dgemma/canvas`, and commands.
 */
import * as vscode from 'vscode';
import {
  CodeAction as LspCodeAction,
  CodeActionRequest,
  CodeActionResolveRequest,
  DidChangeConfigurationNotification,
  ExecuteCommandRequest,
  LanguageClient,
  LanguageClientOptions,
  ServerOptions,
  State,
  TransportKind,
  WorkDoneProgress,
  WorkDoneProgressBegin,
  WorkDoneProgressCreateRequest,
  WorkDoneProgressEnd,
  WorkDoneProgressReport,
} from 'vscode-languageclient/node';
import { CanvasParams, CanvasTracker, isCanvasParams, Preview, previewApplies, previewLabel } from './canvas';
import { fixStructureActions, rewriteActions } from './fix';
import { doctorCommandLine, findExecutable, missingServerMessage, resolveServerLaunch, ServerLaunch } from './serverCommand';
import { serverSettings } from './settings';
import { ignoredMessage, ignoredWorkspaceKeys, isUserOnly, userValue } from './trust';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  backendFromStatus,
  OutcomeView,
  parseOutcome,
  phaseFromState,
  StatusState,
  statusText,
  statusTooltip,
} from './status';
import { NextEditController } from './nextEdit';
import { ModelReadiness } from './readiness';

const SECTION = 'dgemma';
const DOCUMENT_SELECTOR = [{ scheme: 'file' }, { scheme: 'untitled' }, { scheme: 'vscode-userdata' }];

let client: LanguageClient | undefined;
let launch: ServerLaunch | undefined;
let output: vscode.LogOutputChannel;
let statusItem: vscode.StatusBarItem;
/** The server's last `dgemma/outcome` per document (the status item shows the active document's). */
const outcomes = new Map<string, OutcomeView>();
let status: StatusState = { phase: 'starting' };
const canvas = new CanvasTracker();
let draftDecoration: vscode.TextEditorDecorationType;
let shownPreview: { editor: vscode.TextEditor; preview: Preview } | undefined;
/** Until the model reports ready, requests are answered empty; such a request waits here and asks again. */
const readiness = new ModelReadiness();
let statusPoll: ReturnType<typeof setInterval> | undefined;
/** User-only settings a workspace tried to set, already reported (the user is told once). */
const reportedIgnored = new Set<string>();

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  output = vscode.window.createOutputChannel('DiffusionGemma', { log: true });
  statusItem = vscode.window.createStatusBarItem('dgemma.status', vscode.StatusBarAlignment.Right, 100);
  statusItem.name = 'DiffusionGemma';
  statusItem.command = 'dgemma.client.showStatus';
  draftDecoration = vscode.window.createTextEditorDecorationType({
    after: { color: new vscode.ThemeColor('editorGhostText.foreground'), fontStyle: 'italic' },
    rangeBehavior: vscode.DecorationRangeBehavior.ClosedClosed,
  });
  context.subscriptions.push(output, statusItem, draftDecoration);
  // next-edit suggestions (src/nextEdit.ts): asked 600 ms after the last edit, or with alt+n
  new NextEditController(() => (client?.isRunning() ? client : undefined), () => 600).register(context);
  setStatus({ phase: 'starting' });
  statusItem.show();

  context.subscriptions.push(
    vscode.commands.registerCommand('dgemma.client.acceptWord', () =>
      vscode.commands.executeCommand('editor.action.inlineSuggest.acceptNextWord'),
    ),
    vscode.commands.registerCommand('dgemma.client.acceptLine', () =>
      vscode.commands.executeCommand('editor.action.inlineSuggest.acceptNextLine'),
    ),
    vscode.commands.registerCommand('dgemma.client.triggerSuggestion', () =>
      vscode.commands.executeCommand('editor.action.inlineSuggest.trigger'),
    ),
    vscode.commands.registerCommand('dgemma.client.fixStructure', fixStructure),
    vscode.commands.registerCommand('dgemma.client.rewriteSelection', rewriteSelection),
    vscode.commands.registerCommand('dgemma.client.showStatus', showStatus),
    vscode.commands.registerCommand('dgemma.client.explain', explain),
    vscode.window.onDidChangeActiveTextEditor(() => showActiveOutcome()),
    vscode.commands.registerCommand('dgemma.client.restartServer', async () => {
      await stopClient();
      await startClient(context);
    }),
    vscode.workspace.onDidChangeConfiguration(async (e) => {
      if (e.affectsConfiguration(SECTION)) reportIgnoredWorkspaceSettings();
      // Launch settings need a new process; everything else goes over workspace/didChangeConfiguration.
      if (e.affectsConfiguration(`${SECTION}.server`)) {
        await stopClient();
        await startClient(context);
      } else if (e.affectsConfiguration(SECTION) && client?.isRunning()) {
        // Only explicitly set server keys, like initializationOptions (languageclient's synchronize option would
        // send every default, client-only keys included).
        await client.sendNotification(DidChangeConfigurationNotification.type, {
          settings: { [SECTION]: currentServerSettings(context) },
        });
      }
    }),
    vscode.window.onDidChangeTextEditorSelection((e) => refreshPreview(e.textEditor)),
    vscode.workspace.onDidChangeTextDocument((e) => {
      if (shownPreview && shownPreview.editor.document === e.document) refreshPreview(shownPreview.editor);
    }),
    vscode.window.onDidChangeActiveTextEditor(() => clearPreview()),
  );
  reportIgnoredWorkspaceSettings();
  await startClient(context);
}

/** Say once which user-only settings (trust.ts) this workspace sets: they are ignored. */
function reportIgnoredWorkspaceSettings(): void {
  const cfg = vscode.workspace.getConfiguration(SECTION);
  const files: string[] = [];
  const paths = (vscode.workspace.workspaceFolders ?? []).map((f) => join(f.uri.fsPath, '.vscode', 'settings.json'));
  const wsFile = vscode.workspace.workspaceFile;
  if (wsFile?.scheme === 'file') paths.push(wsFile.fsPath);
  for (const p of paths) {
    try {
      files.push(readFileSync(p, 'utf8'));
    } catch {
      // no settings file there
    }
  }
  const fresh = ignoredWorkspaceKeys((key) => cfg.inspect(key), files).filter((k) => !reportedIgnored.has(k));
  if (fresh.length === 0) return;
  for (const k of fresh) reportedIgnored.add(k);
  const msg = ignoredMessage(fresh);
  output.warn(msg);
  void vscode.window.showWarningMessage(msg, 'Open User Settings').then(async (pick) => {
    if (pick) await vscode.commands.executeCommand('workbench.action.openSettings', 'dgemma');
  });
}

export async function deactivate(): Promise<void> {
  await stopClient();
}

function schemaKeys(context: vscode.ExtensionContext): string[] {
  const props = context.extension.packageJSON?.contributes?.configuration?.properties ?? {};
  return Object.keys(props);
}

function currentServerSettings(context: vscode.ExtensionContext): Record<string, unknown> {
  const cfg = vscode.workspace.getConfiguration(SECTION);
  return serverSettings(schemaKeys(context), (key) => cfg.inspect(key), isUserOnly);
}

async function startClient(context: vscode.ExtensionContext): Promise<void> {
  const cfg = vscode.workspace.getConfiguration(SECTION);
  // the user's values only, whatever a workspace sets (trust.ts)
  launch = resolveServerLaunch({
    command: userValue<string>(cfg.inspect('server.command')),
    pythonPath: userValue<string>(cfg.inspect('server.pythonPath')),
    extraArgs: userValue<string[]>(cfg.inspect('server.extraArgs')),
    env: userValue<Record<string, string>>(cfg.inspect('server.env')),
  });
  output.appendLine(`starting: ${launch.command} ${launch.args.join(' ')}`);
  readiness.reset();
  if (!findExecutable(launch.command, launch.env)) {
    const msg = missingServerMessage(launch);
    output.appendLine(msg);
    setStatus({ phase: 'error', error: `${launch.command} not found` });
    // Not awaited: activation (and a restart after the user fixes the setting) must not wait for a click.
    void vscode.window.showErrorMessage(msg, 'Open Settings', 'Show Log').then(async (pick) => {
      if (pick === 'Open Settings') await vscode.commands.executeCommand('workbench.action.openSettings', 'dgemma.server');
      if (pick === 'Show Log') output.show();
    });
    return;
  }
  const serverOptions: ServerOptions = {
    command: launch.command,
    args: launch.args,
    transport: TransportKind.stdio,
    options: { env: launch.env },
  };
  const clientOptions: LanguageClientOptions = {
    documentSelector: DOCUMENT_SELECTOR,
    outputChannel: output,
    initializationOptions: currentServerSettings(context),
    middleware: {
      workspace: {
        // Answer workspace/configuration with explicitly set values only (see settings.ts for why).
        configuration: async (params, token, next) => {
          const res = await next(params, token);
          if (!Array.isArray(res)) return res;
          return params.items.map((item, i) =>
            item.section === SECTION ? currentServerSettings(context) : (res as unknown[])[i],
          );
        },
      },
      provideInlineCompletionItems: async (document, position, ctx, token, next) => {
        setStatus({ ...status, busy: true });
        const loading = !readiness.isReady;
        try {
          let items = await next(document, position, ctx, token);
          const empty = !items || (Array.isArray(items) ? items.length === 0 : items.items.length === 0);
          // VS Code caches this empty answer for the position and version (a later trigger there never reaches the
          // server), so the request itself waits for the model and asks once more; moving the cursor cancels it.
          if (loading && empty && (await waitForModel(token))) items = await next(document, position, ctx, token);
          return items;
        } finally {
          setStatus({ ...status, busy: false });
          // The final answer replaces the draft preview (VS Code renders it as real ghost text).
          clearPreview();
        }
      },
    },
  };
  client = new LanguageClient('dgemma', 'DiffusionGemma', serverOptions, clientOptions);
  client.onDidChangeState((e) => {
    if (e.newState === State.Stopped) {
      readiness.reset();
      setStatus({ phase: status.phase === 'error' ? 'error' : 'stopped', error: status.error });
    }
  });
  client.onNotification('dgemma/canvas', (params: unknown) => {
    if (isCanvasParams(params)) onCanvas(params);
  });
  client.onNotification('dgemma/outcome', (params: unknown) => {
    const o = parseOutcome(params);
    if (!o) return;
    outcomes.set(o.uri, o);
    showActiveOutcome();
  });
  setStatus({ phase: 'starting' });
  try {
    await client.start();
  } catch (err) {
    const msg = err instanceof Error ? err.message : String(err);
    setStatus({ phase: 'error', error: msg });
    const pick = await vscode.window.showErrorMessage(
      `dgemma-lsp did not start: ${msg}. Check dgemma.server.command / dgemma.server.pythonPath, then run: ${doctorCommandLine(launch)}`,
      'Open Settings',
      'Show Log',
    );
    if (pick === 'Open Settings') await vscode.commands.executeCommand('workbench.action.openSettings', 'dgemma.server');
    if (pick === 'Show Log') output.show();
    return;
  }
  // Our own progress handler (registered after start, it replaces the default one) drives the status bar while a
  // model loads; a big checkpoint takes minutes and the editor stays usable meanwhile.
  const c = client;
  c.onRequest(WorkDoneProgressCreateRequest.type, ({ token }) => {
    c.onProgress(WorkDoneProgress.type, token, (value) => onProgress(value));
  });
  setStatus({ phase: 'ready' });
  void refreshBackendStatus();
}

async function stopClient(): Promise<void> {
  const c = client;
  client = undefined;
  clearPreview();
  canvas.clear();
  if (c) {
    try {
      await c.stop(5000);
    } catch {
      // already dead: nothing to stop
    }
  }
}

function onProgress(value: WorkDoneProgressBegin | WorkDoneProgressReport | WorkDoneProgressEnd): void {
  if (value.kind === 'begin') {
    readiness.reset();
    setStatus({ ...status, phase: 'loading', progressTitle: value.title, progressMessage: value.message, percentage: value.percentage });
  } else if (value.kind === 'report') {
    setStatus({ ...status, phase: 'loading', progressMessage: value.message ?? status.progressMessage, percentage: value.percentage ?? status.percentage });
  } else {
    setStatus({ ...status, phase: 'ready', progressTitle: undefined, progressMessage: undefined, percentage: undefined });
    if (typeof value.message === 'string' && value.message.startsWith('ready')) readiness.markReady();
    void refreshBackendStatus();
  }
}

/** Wait until the model is ready (true) or the load fails / the request is cancelled (false). */
async function waitForModel(token: vscode.CancellationToken): Promise<boolean> {
  // dgemma.status as well as $/progress: a client that missed the load's progress still learns that it ended.
  statusPoll ??= setInterval(() => {
    if (readiness.waiting === 0) {
      clearInterval(statusPoll);
      statusPoll = undefined;
    } else void refreshBackendStatus();
  }, 2000);
  return readiness.wait(token);
}

async function refreshBackendStatus(): Promise<unknown> {
  if (!client) return undefined;
  try {
    const result = await client.sendRequest(ExecuteCommandRequest.type, { command: 'dgemma.status', arguments: [] });
    const { state, ...info } = backendFromStatus(result);
    // While $/progress reports a load, the progress text is more precise than the state.
    const phase = status.phase === 'loading' && state === 'loading' ? 'loading' : phaseFromState(state, status.phase);
    if (state === 'ready') readiness.markReady();
    else if (state === 'failed') readiness.reset();
    setStatus({ ...status, ...info, phase });
    return result;
  } catch (err) {
    output.appendLine(`dgemma.status failed: ${err instanceof Error ? err.message : String(err)}`);
    return undefined;
  }
}

function setStatus(next: StatusState): void {
  status = next;
  if (!statusItem) return;
  statusItem.text = statusText(status);
  statusItem.tooltip = statusTooltip(status);
  statusItem.backgroundColor =
    status.phase === 'error' ? new vscode.ThemeColor('statusBarItem.errorBackground') : undefined;
}

async function showStatus(): Promise<void> {
  const result = await refreshBackendStatus();
  output.appendLine(`dgemma.status: ${JSON.stringify(result, null, 2)}`);
  output.show(true);
  if (!client) {
    const hint = launch ? doctorCommandLine(launch) : 'dgemma-lsp doctor';
    void vscode.window.showWarningMessage(`dgemma-lsp is not running. Run \`${hint}\` in a terminal to see why.`);
  }
}

// ---- why nothing is shown: dgemma/outcome and dgemma.explain ----------------------------------------------------

function showActiveOutcome(): void {
  const uri = vscode.window.activeTextEditor?.document.uri.toString();
  const outcome = uri ? outcomes.get(uri) : undefined;
  if (outcome?.state !== status.outcome?.state || outcome?.confidence !== status.outcome?.confidence) {
    setStatus({ ...status, outcome });
  }
}

async function explain(): Promise<void> {
  const doc = vscode.window.activeTextEditor?.document;
  if (!client || !doc) {
    void vscode.window.showWarningMessage('DiffusionGemma: no server or no active editor to explain.');
    return;
  }
  const result = await client.sendRequest(ExecuteCommandRequest.type, {
    command: 'dgemma.explain',
    arguments: [{ uri: doc.uri.toString() }],
  });
  const text = (result as { text?: string } | null)?.text ?? 'no answer';
  output.appendLine(`dgemma.explain ${doc.uri.toString()}:\n${text}`);
  output.show(true);
  void vscode.window.showInformationMessage(`DiffusionGemma: ${text.split('\n')[0]}`);
}

// ---- dgemma/canvas: refining drafts as ghost text -------------------------------------------------------------

function onCanvas(p: CanvasParams): void {
  if (p.final && (p.candidate ?? 0) === 0 && status.phase === 'ready') {
    // say why no ghost text appears when the server withheld a low-confidence suggestion
    const withheld = p.outcome === 'withheld';
    if (withheld !== !!status.withheld) setStatus({ ...status, withheld });
  }
  const preview = canvas.update(p);
  const editor = vscode.window.activeTextEditor;
  if (!preview || !editor) {
    clearPreview();
    return;
  }
  shownPreview = { editor, preview };
  refreshPreview(editor);
}

function refreshPreview(editor: vscode.TextEditor): void {
  if (!shownPreview || shownPreview.editor !== editor) return;
  const { preview } = shownPreview;
  const cur = editor.selection.active;
  const doc = editor.document;
  if (!previewApplies(preview, doc.uri.toString(), doc.version, { line: cur.line, character: cur.character })) {
    clearPreview();
    return;
  }
  // VS Code offers no API to update an inline suggestion in place, so drafts render as a ghost-coloured
  // decoration at the cursor; the final inline completion then replaces it with real, acceptable ghost text.
  const pos = new vscode.Position(preview.position.line, preview.position.character);
  editor.setDecorations(draftDecoration, [
    { range: new vscode.Range(pos, pos), renderOptions: { after: { contentText: previewLabel(preview.text) } } },
  ]);
}

function clearPreview(): void {
  if (shownPreview) shownPreview.editor.setDecorations(draftDecoration, []);
  shownPreview = undefined;
}

// ---- commands -------------------------------------------------------------------------------------------------

async function fixStructure(): Promise<void> {
  const editor = vscode.window.activeTextEditor;
  const c = client;
  if (!editor) return;
  if (!c?.isRunning()) {
    void vscode.window.showWarningMessage('DiffusionGemma: the server is not running (see the status bar item).');
    return;
  }
  const doc = editor.document;
  const whole = new vscode.Range(doc.positionAt(0), doc.positionAt(doc.getText().length));
  const range = editor.selection.isEmpty ? whole : editor.selection;
  // Listing is instant; only the picked action is resolved, which is where the server's model runs (and where it
  // says why when the model's fix was invalid and the deterministic one was applied instead).
  const listed =
    (await c.sendRequest(CodeActionRequest.type, {
      textDocument: { uri: c.code2ProtocolConverter.asUri(doc.uri) },
      range: c.code2ProtocolConverter.asRange(range),
      context: { diagnostics: [] },
    })) ?? [];
  const fixes = fixStructureActions(listed.filter((a): a is LspCodeAction => typeof a.command !== 'string'));
  if (fixes.length === 0) {
    void vscode.window.showInformationMessage('DiffusionGemma: no structure problem to fix here.');
    return;
  }
  let chosen = fixes[0];
  if (fixes.length > 1) {
    const pick = await vscode.window.showQuickPick(
      fixes.map((a) => ({ label: a.title, action: a })),
      { placeHolder: 'Fix structure' },
    );
    if (!pick) return;
    chosen = pick.action;
  }
  const resolved = await vscode.window.withProgress(
    { location: vscode.ProgressLocation.Window, title: 'DiffusionGemma: fixing structure' },
    () => c.sendRequest(CodeActionResolveRequest.type, chosen),
  );
  if (resolved.edit) {
    const ok = await vscode.workspace.applyEdit(await c.protocol2CodeConverter.asWorkspaceEdit(resolved.edit));
    if (!ok) void vscode.window.showErrorMessage(`DiffusionGemma: could not apply "${resolved.title}".`);
  }
  // No edit: the server already told the user why (window/showMessage).
}

async function rewriteSelection(): Promise<void> {
  const editor = vscode.window.activeTextEditor;
  if (!editor || editor.selection.isEmpty) {
    void vscode.window.showInformationMessage('DiffusionGemma: select the text to rewrite first.');
    return;
  }
  // The server offers "Rewrite selection" as a refactor.rewrite code action; resolving it runs the model.
  const actions =
    (await vscode.commands.executeCommand<vscode.CodeAction[]>(
      'vscode.executeCodeActionProvider',
      editor.document.uri,
      editor.selection,
      vscode.CodeActionKind.RefactorRewrite.value,
      10,
    )) ?? [];
  const rewrites = rewriteActions(actions);
  if (rewrites.length === 0) {
    void vscode.window.showInformationMessage('DiffusionGemma: the server offered no rewrite for this selection.');
    return;
  }
  await vscode.window.withProgress(
    { location: vscode.ProgressLocation.Notification, title: 'DiffusionGemma: rewriting selection' },
    () => applyAction(rewrites[0]),
  );
}

async function applyAction(action: vscode.CodeAction): Promise<void> {
  // No edit: the server already told the user why (window/showMessage).
  if (action.edit) {
    const ok = await vscode.workspace.applyEdit(action.edit);
    if (!ok) void vscode.window.showErrorMessage(`DiffusionGemma: could not apply "${action.title}".`);
  }
  if (action.command) {
    await vscode.commands.executeCommand(action.command.command, ...(action.command.arguments ?? []));
  }
}
