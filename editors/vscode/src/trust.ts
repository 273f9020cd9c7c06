/**
 * Settings only the user may set (pure: no vscode import). A repository's `.vscode/settings.json` must not start a
 * program, pick where code and credentials go, weaken TLS or write files: these settings have `machine` scope in
 * package.json (VS Code applies only user and remote values) and are restricted in untrusted workspaces; the
 * extension reads their user value only, and tells the user once which workspace values it ignored.
 */

/** Keys (without `dgemma.`) that start a program, route code or keys, weaken TLS, write files or narrow exclusions. */
export const USER_ONLY = [
  'server.command', // starts a program
  'server.pythonPath', // starts a program
  'server.extraArgs', // e.g. --config FILE, --log-file FILE
  'server.env', // PYTHONPATH, LD_PRELOAD, ... of the server process
  'backend', // local or remote: where code goes
  'model', // a checkpoint folder is code the server loads
  'baseUrl', // where code goes
  'apiKeyEnv', // which environment variable's value is sent as the key
  'headers', // credentials sent with every request
  'verifyTls', // weakens TLS
  'caBundle', // whom TLS trusts
  'allowInsecureHttp', // plain HTTP to another host
  'excludeFiles', // a workspace list would replace the user's secret-file globs
  'logFile', // writes a file anywhere
] as const;

export interface ScopedValues {
  globalValue?: unknown;
  workspaceValue?: unknown;
  workspaceFolderValue?: unknown;
}

export function isUserOnly(key: string): boolean {
  return (USER_ONLY as readonly string[]).includes(key);
}

/** The user's own value of a user-only setting (undefined: not set by the user). */
export function userValue<T>(info: ScopedValues | undefined): T | undefined {
  return info?.globalValue as T | undefined;
}

/** JSON with comments and trailing commas (VS Code's settings files), or undefined when it does not parse. */
export function parseJsonc(text: string): unknown {
  let out = '';
  let i = 0;
  while (i < text.length) {
    const c = text[i];
    if (c === '"') {
      let j = i + 1;
      while (j < text.length && text[j] !== '"') j += text[j] === '\\' ? 2 : 1;
      out += text.slice(i, j + 1);
      i = j + 1;
    } else if (c === '/' && text[i + 1] === '/') {
      while (i < text.length && text[i] !== '\n') i++;
    } else if (c === '/' && text[i + 1] === '*') {
      const end = text.indexOf('*/', i + 2);
      i = end < 0 ? text.length : end + 2;
    } else {
      out += c;
      i++;
    }
  }
  try {
    return JSON.parse(out.replace(/,(\s*[}\]])/g, '$1'));
  } catch {
    return undefined;
  }
}

/** User-only keys a workspace sets: from VS Code's view (inspect) and from the workspace's settings files
 * (VS Code reads a workspace's settings for the WORKSPACE_SCOPES only, which leave out `machine` and `application`:
 * src/vs/workbench/services/configuration/common/configuration.ts, so inspect() never shows those values). */
export function ignoredWorkspaceKeys(
  inspect: (key: string) => ScopedValues | undefined,
  settingsFiles: string[],
): string[] {
  const found = new Set<string>();
  for (const key of USER_ONLY) {
    const info = inspect(key);
    if (info?.workspaceValue !== undefined || info?.workspaceFolderValue !== undefined) found.add(key);
  }
  for (const text of settingsFiles) {
    const obj = parseJsonc(text);
    const settings = obj && typeof obj === 'object' ? (obj as Record<string, unknown>) : {};
    // a .code-workspace file keeps them under "settings"
    const inner = settings.settings && typeof settings.settings === 'object' ? (settings.settings as Record<string, unknown>) : settings;
    for (const key of USER_ONLY) if (`dgemma.${key}` in inner) found.add(key);
  }
  return USER_ONLY.filter((k) => found.has(k));
}

/** What the user reads once: which workspace values were ignored, and why. */
export function ignoredMessage(keys: string[]): string {
  return (
    `DiffusionGemma: this workspace's settings ${keys.map((k) => `dgemma.${k}`).join(', ')} are ignored: ` +
    'only your user settings may start programs, pick where code and keys go, weaken TLS or write files.'
  );
}
