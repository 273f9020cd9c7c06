/**
 * A real VS Code workbench for end-to-end tests: code-server (loopback only) with the packaged .vsix, driven by
 * Playwright over Debian's Chromium, and the few things a user does in it (open a file, run a command, read ghost
 * text and notifications).
 *
 * Env: CODE_SERVER, DGEMMA_VSIX, DGEMMA_LSP_CMD (JSON list: the server command), CHROMIUM (default
 * /usr/bin/chromium), DGEMMA_E2E_ARTIFACTS (screenshots). Every e2e test file uses this one module.
 */
import { ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, renameSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { Browser, chromium, Page } from 'playwright-core';

/** The server command from DGEMMA_LSP_CMD (JSON list) as the extension's settings: the arguments after --stdio
 * become dgemma.server.extraArgs. */
export function serverSettings(commandEnv = 'DGEMMA_LSP_CMD'): Record<string, unknown> {
  const cmd: string[] = JSON.parse(process.env[commandEnv] ?? '["dgemma-lsp","--stdio"]');
  const stdio = cmd.indexOf('--stdio');
  return { 'dgemma.server.command': cmd[0], 'dgemma.server.extraArgs': cmd.slice(stdio >= 0 ? stdio + 1 : 1) };
}

/** Poll `fn` every `every` ms until it returns something truthy, at most `ms` ms. */
export async function until<T>(ms: number, fn: () => Promise<T | undefined | false>, every = 200): Promise<T | undefined> {
  const t0 = Date.now();
  while (Date.now() - t0 < ms) {
    const v = await fn();
    if (v) return v;
    await new Promise((r) => setTimeout(r, every));
  }
  return undefined;
}

/** Workbench settings that keep other suggestions and popups out of the way. */
export const QUIET_SETTINGS: Record<string, unknown> = {
  'dgemma.debounceMs': 0,
  'editor.inlineSuggest.enabled': true,
  'editor.quickSuggestions': { other: false, comments: false, strings: false },
  'editor.suggestOnTriggerCharacters': false,
  'editor.acceptSuggestionOnEnter': 'off',
  'editor.lightbulb.enabled': 'off',
  'workbench.startupEditor': 'none',
  'workbench.tips.enabled': false,
  'workbench.enableExperiments': false,
  'security.workspace.trust.enabled': false,
  'telemetry.telemetryLevel': 'off',
  'extensions.autoCheckUpdates': false,
  'extensions.autoUpdate': false,
  'update.mode': 'none',
  'files.autoSave': 'off',
  'json.validate.enable': false,
};

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const addr = s.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      s.close(() => resolve(port));
    });
    s.on('error', reject);
  });
}

export class Workbench {
  readonly root = mkdtempSync(join(tmpdir(), 'dgemma-e2e-'));
  readonly ws = join(this.root, 'ws');
  readonly userData = join(this.root, 'user');
  private proc?: ChildProcess;
  private browser?: Browser;
  page!: Page;
  log = '';

  /** Write the user settings file; a running workbench picks the change up (the extension restarts its server). */
  writeSettings(settings: Record<string, unknown>): void {
    // write then rename: the workbench watches the file, and a read of a half-written file is a settings file with
    // none of our settings (the extension then starts the default `dgemma-lsp`)
    // code-server's extension host is the "remote": machine-scoped settings (the server command, its env) are read
    // from the Machine settings file there, the rest from the User file; a user of code-server sets both
    for (const scope of ['User', 'Machine']) {
      mkdirSync(join(this.userData, scope), { recursive: true });
      const file = join(this.userData, scope, 'settings.json');
      writeFileSync(file + '.tmp', JSON.stringify({ ...QUIET_SETTINGS, ...settings }, null, 2));
      renameSync(file + '.tmp', file);
    }
  }

  async start(settings: Record<string, unknown>, files: Record<string, string>): Promise<void> {
    const extDir = join(this.root, 'ext');
    for (const d of [this.ws, this.userData, extDir, join(this.userData, 'User')]) mkdirSync(d, { recursive: true });
    for (const [name, text] of Object.entries(files)) {
      mkdirSync(dirname(join(this.ws, name)), { recursive: true }); // e.g. .vscode/settings.json
      writeFileSync(join(this.ws, name), text);
    }
    this.writeSettings(settings);
    const codeServer = process.env.CODE_SERVER ?? 'code-server';
    const vsix = process.env.DGEMMA_VSIX ?? join(__dirname, '..', '..', '..', 'dgemma-lsp.vsix');
    const common = ['--user-data-dir', this.userData, '--extensions-dir', extDir];
    execFileSync(codeServer, [...common, '--install-extension', vsix], { stdio: 'pipe', timeout: 120_000 });
    const port = await freePort();
    this.proc = spawn(
      codeServer,
      [...common, '--auth', 'none', '--bind-addr', `127.0.0.1:${port}`, '--disable-telemetry', '--disable-update-check',
        '--disable-workspace-trust', '--disable-getting-started-override', this.ws],
      { stdio: 'pipe', env: { ...process.env, VSCODE_PROXY_URI: '' } },
    );
    this.proc.stdout?.on('data', (d: Buffer) => (this.log += d.toString()));
    this.proc.stderr?.on('data', (d: Buffer) => (this.log += d.toString()));
    const t0 = Date.now();
    for (;;) {
      try {
        if ((await fetch(`http://127.0.0.1:${port}/healthz`)).status < 500) break;
      } catch {
        // not listening yet
      }
      if (Date.now() - t0 > 60_000) throw new Error(`code-server did not answer:\n${this.log.slice(-3000)}`);
      await new Promise((r) => setTimeout(r, 250));
    }
    this.browser = await chromium.launch({
      executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
      headless: true,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
    this.page = await this.browser.newPage({ viewport: { width: 1400, height: 900 } });
    await this.page.goto(`http://127.0.0.1:${port}/?folder=${encodeURIComponent(this.ws)}`);
    await this.page.locator('.monaco-workbench').waitFor({ timeout: 90_000 });
    await this.page.locator('.explorer-folders-view, .explorer-viewlet').first().waitFor({ timeout: 60_000 }).catch(() => undefined);
  }

  async close(): Promise<void> {
    await this.browser?.close().catch(() => undefined);
    if (this.proc && this.proc.exitCode === null) this.proc.kill('SIGTERM');
  }

  async shot(name: string): Promise<void> {
    const dir = process.env.DGEMMA_E2E_ARTIFACTS;
    if (!dir || !this.page) return;
    mkdirSync(dir, { recursive: true });
    await this.page.screenshot({ path: join(dir, `${name}.png`) }).catch(() => undefined);
  }

  /** Open a workspace file through Quick Open, as a user would. */
  async openFile(name: string): Promise<void> {
    const page = this.page;
    await page.keyboard.press('Control+P');
    const input = page.locator('.quick-input-widget input');
    await input.waitFor({ state: 'visible', timeout: 15_000 });
    await input.fill(name);
    const row = page.locator('.quick-input-list .monaco-list-row', { hasText: name }).first();
    await row.waitFor({ timeout: 15_000 });
    await row.click();
    await page.locator(`.tab.active[data-resource-name="${name}"], .tab.active:has-text("${name}")`).first().waitFor({ timeout: 15_000 });
    await page.locator('.editor-instance .monaco-editor .view-lines').first().click();
  }

  async runCommand(title: string): Promise<void> {
    const page = this.page;
    await page.keyboard.press('Control+Shift+P');
    const input = page.locator('.quick-input-widget input');
    await input.waitFor({ state: 'visible', timeout: 15_000 });
    await input.fill(`>${title}`);
    // Enter runs the row on top when it lands: on a loaded machine that can still be the palette's unfiltered
    // list (recently used commands), so wait until the top row is the command asked for.
    const top = page.locator('.quick-input-list .monaco-list-row').first();
    const want = title.toLowerCase();
    const ready = await until(15_000, async () => ((await top.textContent().catch(() => '')) ?? '').toLowerCase().includes(want), 100);
    if (!ready) throw new Error(`the command palette never listed "${title}" first: ${await top.textContent().catch(() => '')}`);
    await page.keyboard.press('Enter');
  }

  /** Reloads the window and waits until the page really reloaded (the workbench drawn anew). */
  async reloadWindow(): Promise<void> {
    const page = this.page;
    const marked = () => page.evaluate(() => (globalThis as unknown as { __dgemmaBeforeReload?: number }).__dgemmaBeforeReload === 1);
    await page.evaluate(() => { (globalThis as unknown as { __dgemmaBeforeReload?: number }).__dgemmaBeforeReload = 1; });
    await this.runCommand('Developer: Reload Window');
    const gone = await until(60_000, async () => !(await marked().catch(() => true)), 250);
    if (!gone) throw new Error('"Developer: Reload Window" did not reload the page');
    await page.locator('.monaco-workbench').waitFor({ timeout: 90_000 });
  }

  /** Ghost text as the editor draws it: inline part on the cursor line plus any following view-zone lines. */
  async ghostText(): Promise<string> {
    return this.page.evaluate(() => {
      const doc = (globalThis as unknown as { document: { querySelector(s: string): { querySelectorAll(s: string): Iterable<{ textContent: string | null }> } | null } }).document;
      const editor = doc.querySelector('.editor-instance .monaco-editor');
      if (!editor) return '';
      const clean = (s: string | null) => (s ?? '').replace(/\u00a0/g, ' ');
      const inline = [...editor.querySelectorAll('.ghost-text-decoration, .ghost-text-decoration-preview')].map((e) => clean(e.textContent)).join('');
      const block = [...editor.querySelectorAll('.ghost-text .view-line, .ghost-text-view-zone .view-line')].map((e) => clean(e.textContent));
      return [inline, ...block].join('\n');
    });
  }

  /** The texts of the notification toasts on screen. */
  async notifications(): Promise<string[]> {
    return (await this.page.locator('.notifications-toasts .notification-list-item-message').allTextContents()).map((t) => t.trim());
  }

  /** The cursor position the status bar shows ("Ln 2, Col 12"). */
  async cursorLabel(): Promise<string> {
    return ((await this.page.locator('#status\\.editor\\.selection').first().textContent()) ?? '').trim();
  }
}
