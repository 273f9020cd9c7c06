import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { doctorCommandLine, resolveServerLaunch } from '../../src/serverCommand';
import { explicitValue, serverSettings } from '../../src/settings';

const pkg = JSON.parse(readFileSync(join(__dirname, '..', '..', '..', 'package.json'), 'utf8'));
const keys = Object.keys(pkg.contributes.configuration.properties);

describe('server settings sent to dgemma-lsp', () => {
  it('sends only explicitly set server keys, most specific scope first, never client-only keys', () => {
    const set: Record<string, object> = {
      model: { key: 'dgemma.model', globalValue: '/m' },
      denoisingSteps: { key: 'dgemma.denoisingSteps', globalValue: 8, workspaceValue: 12 },
      'server.command': { key: 'dgemma.server.command', globalValue: '/bin/x' },
      enable: { key: 'dgemma.enable', workspaceFolderValue: { markdown: false } },
    };
    const out = serverSettings(keys, (k) => (set[k] ?? { key: k }) as never);
    assert.deepEqual(out, { model: '/m', denoisingSteps: 12, enable: { markdown: false } });
  });

  it('an unset setting is not sent (the server keeps its config file / environment value)', () => {
    assert.deepEqual(explicitValue({ key: 'x' }), { set: false });
    assert.deepEqual(explicitValue(undefined), { set: false });
    assert.deepEqual(explicitValue({ key: 'x', globalValue: false }), { set: true, value: false });
  });

  it('every server setting in package.json is camelCase under dgemma.', () => {
    for (const k of keys) {
      assert.match(k, /^dgemma\.[a-z][A-Za-z0-9]*(\.[a-z][A-Za-z0-9]*)?$/);
    }
    assert.ok(keys.includes('dgemma.denoisingSteps'));
    assert.ok(keys.includes('dgemma.server.pythonPath'));
  });
});

describe('server launch', () => {
  it('defaults to dgemma-lsp --stdio with extra args', () => {
    const l = resolveServerLaunch({ extraArgs: ['--config', '/c.toml'] }, {});
    assert.equal(l.command, 'dgemma-lsp');
    assert.deepEqual(l.args, ['--stdio', '--config', '/c.toml']);
  });

  it('a Python interpreter wins and runs the module', () => {
    const l = resolveServerLaunch({ command: 'ignored', pythonPath: '/venv/bin/python' }, {});
    assert.equal(l.command, '/venv/bin/python');
    assert.deepEqual(l.args, ['-m', 'dgemma_lsp.cli', '--stdio']);
  });

  it('merges env and builds the doctor hint', () => {
    const l = resolveServerLaunch({ command: '/opt/dgemma lsp', env: { HF_HUB_OFFLINE: '1' } }, { PATH: '/bin' });
    assert.deepEqual(l.env, { PATH: '/bin', HF_HUB_OFFLINE: '1' });
    assert.equal(doctorCommandLine(l), "'/opt/dgemma lsp' doctor");
    const m = resolveServerLaunch({ extraArgs: ['--model', '/m', '--log-file', '/l'] }, {});
    assert.equal(doctorCommandLine(m), 'dgemma-lsp doctor --model /m');
  });
});
