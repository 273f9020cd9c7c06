/**
 * Which `dgemma.*` settings go to the server (pure: no vscode import).
 *
 * Only values the user set explicitly are sent: the server's own sources (config file, DGEMMA_LSP_* environment)
 * rank below initializationOptions, so sending the schema defaults would silently override them.
 */

export const CLIENT_ONLY_PREFIXES = ['server.', 'trace.', 'client.'];

export interface Inspected<T = unknown> {
  key: string;
  globalValue?: T;
  workspaceValue?: T;
  workspaceFolderValue?: T;
  defaultLanguageValue?: T;
  globalLanguageValue?: T;
  workspaceLanguageValue?: T;
  workspaceFolderLanguageValue?: T;
}

/** The effective explicitly-set value of an inspected setting, most specific scope first. */
export function explicitValue(info: Inspected | undefined): { set: boolean; value?: unknown } {
  if (!info) return { set: false };
  const order = [
    info.workspaceFolderLanguageValue,
    info.workspaceLanguageValue,
    info.globalLanguageValue,
    info.workspaceFolderValue,
    info.workspaceValue,
    info.globalValue,
  ];
  for (const v of order) {
    if (v !== undefined) return { set: true, value: v };
  }
  return { set: false };
}

/**
 * Build the server settings object (camelCase keys, as in package.json without the `dgemma.` prefix) from the
 * schema's key list and an inspector.
 */
export function serverSettings(
  schemaKeys: string[],
  inspect: (key: string) => Inspected | undefined,
  userOnly: (key: string) => boolean = () => false,
): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const full of schemaKeys) {
    if (!full.startsWith('dgemma.')) continue;
    const key = full.slice('dgemma.'.length);
    if (CLIENT_ONLY_PREFIXES.some((p) => key.startsWith(p))) continue;
    const info = inspect(key);
    // a user-only setting (trust.ts): the user's value or none, whatever a workspace says
    const { set, value } = userOnly(key) ? explicitValue({ key, globalValue: info?.globalValue }) : explicitValue(info);
    if (set) out[key] = value;
  }
  return out;
}
