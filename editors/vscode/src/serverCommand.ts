/** Resolve how to start `dgemma-lsp --stdio` from the extension's settings (pure: no vscode import). */

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
