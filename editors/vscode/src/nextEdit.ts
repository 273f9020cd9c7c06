/**
 * Next-edit suggestions from dgemma-lsp (`dgemma/nextEdit`) as a diff decoration: the replaced text struck through
 * on a removed-text background, the new text after it on an inserted-text background. Asked after a pause in
 * editing or with alt+n; alt+y applies every edit of the suggestion and reports it (the server then names the next
 * site: alt+j goes there and asks again); escape dismisses and reports that. Public VS Code API only.
 */
import * as vscode from 'vscode';
import { ExecuteCommandRequest, type LanguageClient } from 'vscode-languageclient/node';

interface LspPosition {
  line: number;
  character: number;
}
interface LspRange {
  start: LspPosition;
  end: LspPosition;
}
interface LspCommand {
  title: string;
  command: string;
  arguments?: unknown[];
}
export interface NextEditResult {
  uri: string;
  version: number;
  id: string | null;
  edits: { range: LspRange; newText: string }[];
  command?: LspCommand;
  dismissCommand?: LspCommand;
  reason?: string | null;
}

const CONTEXT_KEY = 'dgemma.nextEditShown';

function toRange(r: LspRange): vscode.Range {
  return new vscode.Range(r.start.line, r.start.character, r.end.line, r.end.character);
}

export class NextEditController implements vscode.Disposable {
  private readonly removed = vscode.window.createTextEditorDecorationType({
    backgroundColor: new vscode.ThemeColor('diffEditor.removedTextBackground'),
    textDecoration: 'line-through',
  });
  private readonly added = vscode.window.createTextEditorDecorationType({});
  private shown: { editor: vscode.TextEditor; result: NextEditResult } | undefined;
  private jumpTarget: { uri: string; position: vscode.Position } | undefined;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private applying = false;

  constructor(
    private readonly client: () => LanguageClient | undefined,
    private readonly delayMs: () => number,
  ) {}

  register(context: vscode.ExtensionContext): void {
    context.subscriptions.push(
      this,
      vscode.commands.registerCommand('dgemma.client.nextEdit.request', () => this.request()),
      vscode.commands.registerCommand('dgemma.client.nextEdit.accept', () => this.accept()),
      vscode.commands.registerCommand('dgemma.client.nextEdit.dismiss', () => this.dismiss()),
      vscode.commands.registerCommand('dgemma.client.nextEdit.jump', () => this.jump()),
      vscode.workspace.onDidChangeTextDocument((e) => {
        if (this.applying || e.contentChanges.length === 0) return;
        if (this.shown && e.document === this.shown.editor.document) this.clear();
        const delay = this.delayMs();
        if (delay <= 0) return;
        if (this.timer) clearTimeout(this.timer);
        this.timer = setTimeout(() => {
          const editor = vscode.window.activeTextEditor;
          if (editor && editor.document === e.document) void this.request();
        }, delay);
      }),
    );
  }

  /** Ask for a next edit at the cursor of the active editor and show it. */
  async request(): Promise<NextEditResult | undefined> {
    const client = this.client();
    const editor = vscode.window.activeTextEditor;
    if (!client || !editor) return undefined;
    const doc = editor.document;
    const version = doc.version;
    const pos = editor.selection.active;
    let result: NextEditResult;
    try {
      result = await client.sendRequest<NextEditResult>('dgemma/nextEdit', {
        textDocument: { uri: doc.uri.toString() },
        position: { line: pos.line, character: pos.character },
      });
    } catch {
      return undefined;
    }
    if (doc.version !== version || vscode.window.activeTextEditor !== editor) return result; // typed meanwhile
    if (result.edits.length > 0) this.show(editor, result);
    return result;
  }

  private show(editor: vscode.TextEditor, result: NextEditResult): void {
    this.clear();
    const removed: vscode.Range[] = [];
    const added: vscode.DecorationOptions[] = [];
    for (const e of result.edits) {
      const range = toRange(e.range);
      if (!range.isEmpty) removed.push(range);
      if (e.newText) {
        added.push({
          range: new vscode.Range(range.end, range.end),
          renderOptions: {
            after: {
              contentText: e.newText.replace(/\r?\n/g, ' \u23ce '),
              backgroundColor: new vscode.ThemeColor('diffEditor.insertedTextBackground'),
            },
          },
        });
      }
    }
    editor.setDecorations(this.removed, removed);
    editor.setDecorations(this.added, added);
    this.shown = { editor, result };
    void vscode.commands.executeCommand('setContext', CONTEXT_KEY, true);
  }

  private clear(): void {
    if (this.shown) {
      this.shown.editor.setDecorations(this.removed, []);
      this.shown.editor.setDecorations(this.added, []);
    }
    this.shown = undefined;
    void vscode.commands.executeCommand('setContext', CONTEXT_KEY, false);
  }

  private async run(command: LspCommand | undefined): Promise<unknown> {
    const client = this.client();
    if (!client || !command) return undefined;
    return client.sendRequest(ExecuteCommandRequest.type, { command: command.command, arguments: command.arguments });
  }

  /** Apply every edit of the shown suggestion, report it, remember the next site the server names. */
  async accept(): Promise<boolean> {
    const shown = this.shown;
    if (!shown) return false;
    const doc = shown.editor.document;
    const edit = new vscode.WorkspaceEdit();
    for (const e of shown.result.edits) edit.replace(doc.uri, toRange(e.range), e.newText);
    this.applying = true;
    let ok = false;
    try {
      ok = await vscode.workspace.applyEdit(edit);
    } finally {
      this.applying = false;
    }
    this.clear();
    if (!ok) return false;
    const res = (await this.run(shown.result.command)) as { jump?: LspPosition | null } | undefined;
    this.jumpTarget = res?.jump
      ? { uri: doc.uri.toString(), position: new vscode.Position(res.jump.line, res.jump.character) }
      : undefined;
    return true;
  }

  async dismiss(): Promise<boolean> {
    const shown = this.shown;
    if (!shown) return false;
    this.clear();
    await this.run(shown.result.dismissCommand);
    return true;
  }

  /** Go to the shown edit; without one, to the site the last accept named, and ask there. */
  async jump(): Promise<boolean> {
    const editor = vscode.window.activeTextEditor;
    if (!editor) return false;
    let target: vscode.Position | undefined;
    if (this.shown && this.shown.editor === editor && this.shown.result.edits[0]) {
      target = toRange(this.shown.result.edits[0].range).start;
    } else if (this.jumpTarget && this.jumpTarget.uri === editor.document.uri.toString()) {
      target = this.jumpTarget.position;
      this.jumpTarget = undefined;
    }
    if (!target) return false;
    editor.selection = new vscode.Selection(target, target);
    editor.revealRange(new vscode.Range(target, target), vscode.TextEditorRevealType.InCenterIfOutsideViewport);
    if (!this.shown) await this.request();
    return true;
  }

  dispose(): void {
    if (this.timer) clearTimeout(this.timer);
    this.clear();
    this.removed.dispose();
    this.added.dispose();
  }
}
