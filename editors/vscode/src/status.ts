/** Status bar text for the server's lifecycle, model loading and backend (pure: no vscode import). */

export type Phase = 'starting' | 'loading' | 'ready' | 'error' | 'stopped' | 'disabled';

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
      const icon = s.busy ? '$(sync~spin)' : '$(sparkle)';
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
  lines.push('Click for details');
  return lines.join('\n');
}

/** Pull backend/model/device out of whatever shape `dgemma.status` returns (nested `backend` info or flat). */
export function backendFromStatus(result: unknown): Pick<StatusState, 'backend' | 'model' | 'device'> {
  const out: Pick<StatusState, 'backend' | 'model' | 'device'> = {};
  if (!result || typeof result !== 'object') return out;
  const r = result as Record<string, unknown>;
  const info = (typeof r.backend === 'object' && r.backend !== null ? r.backend : r) as Record<string, unknown>;
  const str = (v: unknown): string | undefined => (typeof v === 'string' && v ? v : undefined);
  out.backend = str(info.name) ?? str(info.backend) ?? str(r.backend);
  out.model = str(info.model) ?? str(r.model);
  out.device = str(info.device) ?? str(r.device);
  return out;
}

function truncate(s: string, n: number): string {
  return s.length > n ? s.slice(0, n - 1) + '…' : s;
}
