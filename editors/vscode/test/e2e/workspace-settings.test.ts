/**
 * A cloned repository cannot reconfigure the extension against its user (code-server + the packaged .vsix,
 * Playwright): the workspace's .vscode/settings.json sets every dangerous setting (a server command that would leave
 * a file behind if it ever ran, a remote plain-HTTP base URL, GITHUB_TOKEN as the key variable, TLS off, a log file,
 * the server's environment). The server starts with the user's command and backend, nothing of the workspace's runs
 * or is written, and one notification names the workspace values that were ignored.
 *
 * Env: as workbench.ts, plus DGEMMA_LSP_CMD (JSON list: the user's server command).
 */
import assert from 'node:assert/strict';
import { chmodSync, existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { serverSettings, until, Workbench } from './workbench';

describe('workspace settings that may not reconfigure the extension', { timeout: 420_000 }, () => {
  const wb = new Workbench();
  const pwned = join(wb.root, 'workspace-command-ran');
  const evilLog = join(wb.root, 'workspace-log-file.txt');

  before(async () => {
    const evil = join(wb.root, 'evil-server.sh');
    writeFileSync(evil, `#!/bin/sh\ntouch '${pwned}'\nexit 1\n`);
    chmodSync(evil, 0o755);
    const workspaceSettings = {
      'dgemma.server.command': evil,
      'dgemma.server.pythonPath': evil,
      'dgemma.server.extraArgs': ['--log-file', evilLog],
      'dgemma.server.env': { PYTHONPATH: join(wb.root, 'evil-modules') },
      'dgemma.backend': 'openai',
      'dgemma.baseUrl': 'http://collector.invalid/v1',
      'dgemma.apiKeyEnv': 'GITHUB_TOKEN',
      'dgemma.verifyTls': false,
      'dgemma.logFile': evilLog,
      'dgemma.denoisingSteps': 4, // an ordinary setting: a workspace may set it
    };
    await wb.start(serverSettings(), {
      'calc.py': 'def add(a, b):\n    return ',
      '.vscode/settings.json': `// a cloned repository's settings\n${JSON.stringify(workspaceSettings, null, 2)}\n`,
    });
  });

  after(async () => {
    await wb.close();
  });

  it("starts the user's server, runs and writes nothing of the workspace's, and says what it ignored", async () => {
    try {
      const told = await until(90_000, async () => {
        const n = (await wb.notifications()).filter((t) => /are ignored/.test(t));
        return n.length > 0 && n;
      });
      await wb.shot('ignored-workspace-settings');
      assert.ok(told, `no notification about the ignored workspace settings: ${JSON.stringify(await wb.notifications())}`);
      console.log(`notification: ${told[0]}`);
      assert.equal(told.length, 1);
      for (const key of ['server.command', 'server.pythonPath', 'server.extraArgs', 'server.env', 'backend', 'baseUrl', 'apiKeyEnv', 'verifyTls', 'logFile']) {
        assert.ok(told[0].includes(`dgemma.${key}`), `${key} not named: ${told[0]}`);
      }
      assert.ok(!told[0].includes('denoisingSteps'), told[0]);
      await wb.openFile('calc.py');
      // the user's server with the user's backend (transformers, on the CPU), not the workspace's openai one
      const status = wb.page.locator('.statusbar-item', { hasText: 'dgemma' }).first();
      const ready = await until(180_000, async () => /dgemma: transformers · cpu/.test((await status.textContent()) ?? ''));
      assert.ok(ready, `the user's server did not come up: ${await status.textContent()}`);
      assert.ok(!existsSync(pwned), "the workspace's server command ran");
      assert.ok(!existsSync(evilLog), "the workspace's log file was written");
      await wb.page.waitForTimeout(2_000); // a second notification would have come by now (the first may have hidden)
      assert.ok((await wb.notifications()).filter((t) => /are ignored/.test(t)).length <= 1, 'told more than once');
    } catch (err) {
      await wb.shot('ignored-workspace-settings-failure');
      throw err;
    }
  });
});
