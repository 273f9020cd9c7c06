import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { serverSettings } from '../../src/settings';
import { ignoredMessage, ignoredWorkspaceKeys, isUserOnly, parseJsonc, USER_ONLY, userValue } from '../../src/trust';

const pkg = JSON.parse(readFileSync(join(__dirname, '..', '..', '..', 'package.json'), 'utf8'));
const props: Record<string, { scope?: string }> = pkg.contributes.configuration.properties;

describe('settings a workspace may not set (package.json scopes)', () => {
  it('gives every setting that starts a program, routes code or keys, weakens TLS or writes files machine scope', () => {
    const dangerous = [
      'server.command', 'server.pythonPath', 'server.extraArgs', 'server.env', 'backend', 'model', 'baseUrl',
      'apiKeyEnv', 'headers', 'verifyTls', 'caBundle', 'allowInsecureHttp', 'excludeFiles', 'logFile',
    ];
    assert.deepEqual([...USER_ONLY].sort(), [...dangerous].sort());
    for (const key of dangerous) {
      assert.ok(props[`dgemma.${key}`], `dgemma.${key} is declared`);
      assert.ok(['machine', 'application'].includes(props[`dgemma.${key}`].scope ?? ''), `dgemma.${key}: ${props[`dgemma.${key}`].scope}`);
    }
    // nothing else can be overridden by a workspace where a machine value is meant (machine-overridable)
    const overridable = Object.entries(props).filter(([, v]) => v.scope === 'machine-overridable').map(([k]) => k);
    assert.deepEqual(overridable, []);
  });

  it('declares limited untrusted-workspace support that restricts exactly those settings', () => {
    const cap = pkg.capabilities?.untrustedWorkspaces;
    assert.equal(cap?.supported, 'limited');
    assert.ok(typeof cap.description === 'string' && cap.description.length > 20);
    assert.deepEqual([...cap.restrictedConfigurations].sort(), USER_ONLY.map((k) => `dgemma.${k}`).sort());
  });
});

describe('workspace values of user-only settings', () => {
  it('are never sent to the server nor used to start it', () => {
    const set: Record<string, object> = {
      baseUrl: { key: 'dgemma.baseUrl', globalValue: 'https://mine/v1', workspaceValue: 'http://evil/v1' },
      apiKeyEnv: { key: 'dgemma.apiKeyEnv', workspaceFolderValue: 'GITHUB_TOKEN' },
      denoisingSteps: { key: 'dgemma.denoisingSteps', workspaceValue: 12 },
    };
    const out = serverSettings(Object.keys(props), (k) => (set[k] ?? { key: k }) as never, isUserOnly);
    assert.deepEqual(out, { baseUrl: 'https://mine/v1', denoisingSteps: 12 });
    assert.equal(userValue({ workspaceValue: '/tmp/evil' }), undefined);
    assert.equal(userValue({ globalValue: '/usr/bin/dgemma-lsp', workspaceValue: '/tmp/evil' }), '/usr/bin/dgemma-lsp');
  });

  it('are found in VS Code\'s view and in the settings files, and named in one message', () => {
    const file = `{
      // a cloned repository's .vscode/settings.json
      "dgemma.server.command": "/tmp/evil.sh", /* runs when a file opens */
      "dgemma.baseUrl": "http://evil.example/v1",
      "dgemma.denoisingSteps": 4,
    }`;
    assert.deepEqual(parseJsonc(file), {
      'dgemma.server.command': '/tmp/evil.sh',
      'dgemma.baseUrl': 'http://evil.example/v1',
      'dgemma.denoisingSteps': 4,
    });
    const inspect = (k: string) => (k === 'logFile' ? { workspaceValue: '/etc/x' } : undefined);
    const keys = ignoredWorkspaceKeys(inspect, [file, '{"settings": {"dgemma.apiKeyEnv": "GITHUB_TOKEN"}}', 'not json']);
    assert.deepEqual(keys, ['server.command', 'baseUrl', 'apiKeyEnv', 'logFile']);
    assert.match(ignoredMessage(keys), /dgemma\.server\.command, dgemma\.baseUrl, dgemma\.apiKeyEnv, dgemma\.logFile are ignored/);
  });
});
