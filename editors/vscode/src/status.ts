/** Status bar text for the server's lifecycle, model loading and backend (pure: no vscode import). */

export type Phase = 'starting' | 'loading' | 'ready' | 'error' | 'stopped' | 'disabled';

/** The server's `dgemma/outcome` for the active document: why the last suggestion was shown or not. */
export interface OutcomeView {
  feature: string;
  /** shown | nothing | withheld | disabled | excluded | loading | error | timeout | superseded (an open list) */
  state: string;
  reason?: string;
  confidence?: number | null;
  gate?: number | null;
}

export interface StatusState {
  phase: Phase;
  progressTitle?: string;
  progressMessage?: string;
  percentage?: number;
  backend?: string;
  model?: string;
  device?: string;
  error?: string;
  busy?: boolean;
  /** The last suggestion was withheld: the model's confidence was under min_confidence. */
  withheld?: boolean;
  /** The last request's outcome in the active document (server's `dgemma/outcome`). */
  outcome?: OutcomeView;
}

/** "withheld 0.12 < 0.25", "disabled", "shown" ... */
export function outcomeText(o: OutcomeView): string {
  if (o.state === 'withheld' && typeof o.confidence === 'number' && typeof o.gate === 'number') {
    return `withheld ${o.confidence.toFixed(2)} < ${o.gate.toFixed(2)}`;
  }
  return o.state;
}

const OUTCOME_ICONS: Record<string, string> = {
  withheld: '$(eye-closed)',
  disabled: '$(circle-slash)',
  excluded: '$(circle-slash)',
  error: '$(warning)',
  timeout: '$(warning)',
};

/** An outcome object from the server's notification, or undefined. */
export function parseOutcome(p: unknown): (OutcomeView & { uri: string }) | undefined {
  if (!p || typeof p !== 'object') return undefined;
  const r = p as Record<string, unknown>;
  if (typeof r.uri !== 'string' || typeof r.state !== 'string' || typeof r.feature !== 'string') return undefined;
  const num = (v: unknown): number | null => (typeof v === 'number' ? v : null);
  return {
    uri: r.uri,
    feature: r.feature,
    state: r.state,
    reason: typeof r.reason === 'string' ? r.reason : undefined,
    confidence: num(r.confidence),
    gate: num(r.gate),
  };
}

export function statusText(s: StatusState): string {
  switch (s.phase) {
    case 'starting':
      return '$(loading~spin) dgemma: starting';
    case 'loading': {
      const pct = typeof s.percentage === 'number' ? ` ${Math.round(s.percentage)}%` : '';
      const what = s.progressMessage || s.progressTitle || 'loading model';
      return `$(loading~spin) dgemma: ${truncate(what, 40)}${pct}`;
    }
    case 'ready': {
      const parts = [s.backend, s.device].filter((x): x is string => !!x);
      if (s.outcome && !s.busy) {
        parts.push(outcomeText(s.outcome));
        const icon = OUTCOME_ICONS[s.outcome.state] ?? '$(sparkle)';
        return `${icon} dgemma: ${parts.join(' · ')}`;
      }
      const icon = s.busy ? '$(sync~spin)' : s.withheld ? '$(eye-closed)' : '$(sparkle)';
      if (s.withheld && !s.busy) parts.push('withheld');
      return parts.length ? `${icon} dgemma: ${parts.join(' · ')}` : `${icon} dgemma`;
    }
    case 'error':
      return '$(error) dgemma: error';
    case 'stopped':
      return '$(circle-slash) dgemma: stopped';
    case 'disabled':
      return '$(circle-slash) dgemma: off';
  }
}

export function statusTooltip(s: StatusState): string {
  const lines = ['DiffusionGemma language server'];
  if (s.backend) lines.push(`backend: ${s.backend}`);
  if (s.model) lines.push(`model: ${s.model}`);
  if (s.device) lines.push(`device: ${s.device}`);
  if (s.progressTitle) lines.push(`${s.progressTitle}${s.progressMessage ? `: ${s.progressMessage}` : ''}`);
  if (s.error) lines.push(`error: ${s.error}`);
  if (s.outcome) {
    const o = s.outcome;
    lines.push(`last ${o.feature === 'nextEdit' ? 'next edit' : 'suggestion'}: ${outcomeText(o)}${o.reason && o.state !== 'shown' ? ` (${o.reason})` : ''}`);
    if (typeof o.gate === 'number') lines.push(`gate in force: min_confidence ${o.gate.toFixed(2)}`);
  } else if (s.withheld) {
    lines.push('last suggestion withheld: the model was less confident than min_confidence (dgemma.minConfidence: 0 shows all)');
  }
  lines.push('Click for details');
  return lines.join('\n');
}

/**
 * Pull backend/model/device/state out of `dgemma.status`'s answer:
 * `{server, backend: {state, error, info: {name, model, device, ready}}, stats, settings}`.
 */
export function backendFromStatus(
  result: unknown,
): Pick<StatusState, 'backend' | 'model' | 'device' | 'error'> & { state?: string } {
  const out: Pick<StatusState, 'backend' | 'model' | 'device' | 'error'> & { state?: string } = {};
  if (!result || typeof result !== 'object') return out;
  const r = result as Record<string, unknown>;
  const b = (typeof r.backend === 'object' && r.backend !== null ? r.backend : {}) as Record<string, unknown>;
  const info = (typeof b.info === 'object' && b.info !== null ? b.info : {}) as Record<string, unknown>;
  const str = (v: unknown): string | undefined => (typeof v === 'string' && v ? v : undefined);
  const settings = (typeof r.settings === 'object' && r.settings !== null ? r.settings : {}) as Record<string, unknown>;
  out.backend = str(info.name) ?? str(settings.backend);
  out.model = str(info.model) ?? str(settings.model);
  out.device = str(info.device);
  out.state = str(b.state);
  out.error = str(b.error);
  return out;
}

/** Status phase from the server's backend state (loading / ready / failed ...). */
export function phaseFromState(state: string | undefined, current: Phase): Phase {
  if (!state) return current;
  if (/fail|error|unavailable/i.test(state)) return 'error';
  if (/load|start/i.test(state)) return 'loading';
  if (/ready|idle/i.test(state)) return 'ready';
  return current;
}

function truncate(s: string, n: number): string {
  return s.length > n ? s.slice(0, n - 1) + '…' : s;
}
