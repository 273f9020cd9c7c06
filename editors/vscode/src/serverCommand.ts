/** Resolve how to start `dgemma-lsp --stdio` from the extension's settings (pure: no vscode import). */
import { accessSync, constants, statSync } from 'node:fs';
import { delimiter, isAbsolute, join } from 'node:path';

export interface ServerLaunchConfig {
  command?: string;
  pythonPath?: string;
  extraArgs?: string[];
  env?: Record<string, string>;
}

export interface ServerLaunch {
  command: string;
  args: string[];
  env: Record<string, string>;
}

/**
 * A Python interpreter wins over the executable name, because a venv's interpreter is the most reliable way
 * to reach an install that is not on the editor's PATH (GUI editors often start without the shell's PATH).
 */
export function resolveServerLaunch(cfg: ServerLaunchConfig, baseEnv: NodeJS.ProcessEnv = process.env): ServerLaunch {
  const extra = (cfg.extraArgs ?? []).filter((a) => typeof a === 'string' && a.length > 0);
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(baseEnv)) {
    if (typeof v === 'string') env[k] = v;
  }
  Object.assign(env, cfg.env ?? {});
  const python = (cfg.pythonPath ?? '').trim();
  if (python) {
    return { command: python, args: ['-m', 'dgemma_lsp.cli', '--stdio', ...extra], env };
  }
  const command = (cfg.command ?? '').trim() || 'dgemma-lsp';
  return { command, args: ['--stdio', ...extra], env };
}

/**
 * The same command line with `doctor` instead of `--stdio`, for the troubleshooting hint; server-only options
 * (--log-file) are dropped because the doctor subcommand does not take them.
 */
export function doctorCommandLine(launch: ServerLaunch): string {
  const args: string[] = [];
  for (let i = 0; i < launch.args.length; i++) {
    const a = launch.args[i];
    if (a === '--log-file') {
      i++;
      continue;
    }
    if (a.startsWith('--log-file=')) continue;
    args.push(a === '--stdio' ? 'doctor' : a);
  }
  return [launch.command, ...args].map(shellQuote).join(' ');
}

function shellQuote(s: string): string {
  return /^[\w@%+=:,./-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`;
}

/**
 * Where `command` resolves to (a path, or a name looked up on the server's PATH), or undefined when it is not an
 * executable file: checked before starting so a missing server is one clear message, not the language client's
 * generic "couldn't create connection" on top of ours.
 */
export function findExecutable(command: string, env: Record<string, string | undefined>): string | undefined {
  const isFile = (p: string): boolean => {
    try {
      accessSync(p, constants.X_OK);
      return statSync(p).isFile();
    } catch {
      return false;
    }
  };
  if (isAbsolute(command) || command.includes('/') || command.includes('\\')) {
    return isFile(command) ? command : undefined;
  }
  const exts = process.platform === 'win32' ? (env.PATHEXT ?? '.EXE;.CMD;.BAT').split(';') : [''];
  for (const dir of (env.PATH ?? env.Path ?? '').split(delimiter)) {
    if (!dir) continue;
    for (const ext of exts) {
      const p = join(dir, command + ext);
      if (isFile(p)) return p;
    }
  }
  return undefined;
}

/** The error a user sees when the server command does not exist, with what to do. */
export function missingServerMessage(launch: ServerLaunch): string {
  return (
    `DiffusionGemma: cannot start the language server: \`${launch.command}\` was not found. ` +
    'Install dgemma-lsp (`bash scripts/setup` in the dgemma-lsp repository creates .venv/bin/dgemma-lsp), then set ' +
    'dgemma.server.command to that file (or dgemma.server.pythonPath to the venv\'s bin/python).'
  );
}
