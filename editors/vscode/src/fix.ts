/** Picking the server's structure actions out of a code action list (pure: no vscode import). */

export interface ActionLike {
  title: string;
  kind?: { value: string } | string;
  isPreferred?: boolean;
  disabled?: unknown;
}

function kindOf(a: ActionLike): string {
  if (!a.kind) return '';
  return typeof a.kind === 'string' ? a.kind : a.kind.value;
}

/** Fix-structure actions: model fixes first (preferred), then deterministic ones; disabled ones dropped. */
export function fixStructureActions<T extends ActionLike>(actions: readonly T[]): T[] {
  const fixes = actions.filter((a) => !a.disabled && /fix structure|fix all structure|repair|complete (this )?markdown table/i.test(a.title));
  return fixes.sort((a, b) => rank(a) - rank(b));
}

function rank(a: ActionLike): number {
  let r = 0;
  if (!a.isPreferred) r += 1;
  if (/deterministic|rules/i.test(a.title)) r += 2;
  if (/document|whole|all/i.test(a.title)) r += 4;
  return r;
}

/** Rewrite-selection actions (kind refactor.rewrite or a title saying so). */
export function rewriteActions<T extends ActionLike>(actions: readonly T[]): T[] {
  return actions.filter((a) => !a.disabled && (/^refactor\.rewrite\.dgemma\.rewriteSelection/.test(kindOf(a)) || /rewrite/i.test(a.title)));
}
