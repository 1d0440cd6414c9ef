// Hand-written SVG charts for bench/REPORT.md: no browser, no canvas, no dependency. Plain SVG 1.1
// that GitHub renders inline and a person reads at a glance.

export type BarKind = 'hashgate' | 'peer' | 'baseline' | 'wrong';

export interface Bar {
  label: string;
  value: number;
  kind: BarKind;
  /** Text after the value, e.g. '1.52x best peer'; for wrong bars the whole label ('WRONG: hash mismatch'). */
  note?: string;
}

export interface BarGroup {
  label: string;
  bars: Bar[];
  /** Unit of this group's values (overrides the chart's `unit`). */
  unit?: string;
}

export interface BarChartOptions {
  title: string;
  subtitle?: string;
  unit?: string;
  groups: BarGroup[];
  width?: number;
}

export interface LineSeries {
  name: string;
  points: { x: number; y: number }[];
}

export interface LineChartOptions {
  title: string;
  subtitle?: string;
  xLabel: string;
  yLabel: string;
  series: LineSeries[];
  logX?: boolean;
  /** Log y axis, for series that differ by orders of magnitude (needs every y > 0). */
  logY?: boolean;
  width?: number;
  height?: number;
}

const COLORS: Record<BarKind, string> = {
  hashgate: '#2563eb',
  peer: '#9ca3af',
  baseline: '#d1d5db',
  wrong: '#dc2626',
};
const PALETTE = ['#2563eb', '#f59e0b', '#10b981', '#ef4444', '#8b5cf6', '#0891b2', '#84cc16', '#db2777'];
const FONT = 'font-family="system-ui, -apple-system, Segoe UI, Helvetica, Arial, sans-serif"';

export function escapeXml(s: string): string {
  return s.replace(/[<>&"']/g, (c) => ({ '<': '&lt;', '>': '&gt;', '&': '&amp;', '"': '&quot;', "'": '&apos;' })[c] as string);
}

/** 1234567 -> '1.23M'; keeps 3 significant digits. */
export function formatSi(v: number): string {
  if (!Number.isFinite(v)) return String(v);
  const a = Math.abs(v);
  const units: [number, string][] = [
    [1e12, 'T'],
    [1e9, 'G'],
    [1e6, 'M'],
    [1e3, 'k'],
  ];
  for (const [d, u] of units) if (a >= d) return `${trim((v / d).toPrecision(3))}${u}`;
  if (a === 0) return '0';
  if (a < 0.01) return v.toExponential(1);
  return trim(v.toPrecision(3));
}

function trim(s: string): string {
  return s.includes('.') && !s.includes('e') ? s.replace(/\.?0+$/, '') : s;
}

function truncate(s: string, max: number): string {
  return s.length <= max ? s : `${s.slice(0, max - 1)}…`;
}

/**
 * Horizontal bars, one block per measure. Each block is scaled to its own maximum: measures of one
 * suite can differ by orders of magnitude (keys/s vs MB/s) and the comparison that matters is within
 * a measure. Wrong implementations are drawn as a red stub with the reason, never as a ranked bar.
 */
export function barChart(o: BarChartOptions): string {
  const width = o.width ?? 960;
  const labelW = 300;
  const barMax = width - labelW - 200;
  const rowH = 22;
  const groupGap = 14;
  const top = o.subtitle ? 62 : 46;
  let h = top;
  for (const g of o.groups) h += 22 + g.bars.length * rowH + groupGap;
  h += 30;
  const parts: string[] = [];
  parts.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${h}" viewBox="0 0 ${width} ${h}" ${FONT} font-size="12">`,
    `<rect x="0" y="0" width="${width}" height="${h}" fill="#ffffff"/>`,
    `<text x="16" y="26" font-size="17" font-weight="600" fill="#111827">${escapeXml(o.title)}</text>`,
  );
  if (o.subtitle) parts.push(`<text x="16" y="46" fill="#4b5563">${escapeXml(o.subtitle)}</text>`);
  let y = top;
  for (const g of o.groups) {
    parts.push(`<text x="16" y="${y + 15}" font-weight="600" fill="#111827">${escapeXml(truncate(g.label, 110))}</text>`);
    y += 22;
    const max = Math.max(0, ...g.bars.filter((b) => b.kind !== 'wrong').map((b) => b.value));
    const unit = g.unit ?? o.unit;
    for (const b of g.bars) {
      const w = b.kind === 'wrong' ? 6 : max > 0 ? Math.max(1, (b.value / max) * barMax) : 1;
      const weight = b.kind === 'hashgate' ? ' font-weight="600"' : '';
      parts.push(
        `<g class="bar" data-kind="${b.kind}" data-value="${b.kind === 'wrong' ? 'NaN' : b.value}">`,
        `<title>${escapeXml(`${b.label}: ${b.kind === 'wrong' ? 'wrong answers' : formatSi(b.value) + (unit ? ' ' + unit : '')}`)}</title>`,
        `<text x="${labelW - 8}" y="${y + 14}" text-anchor="end" fill="#111827"${weight}>${escapeXml(truncate(b.label, 44))}</text>`,
        `<rect x="${labelW}" y="${y + 3}" width="${w.toFixed(1)}" height="${rowH - 6}" rx="2" fill="${COLORS[b.kind]}"/>`,
      );
      const valueText = b.kind === 'wrong' ? (b.note ?? 'WRONG') : `${formatSi(b.value)}${unit ? ' ' + unit : ''}${b.note ? '  ' + b.note : ''}`;
      parts.push(
        `<text x="${(labelW + w + 6).toFixed(1)}" y="${y + 14}" fill="${b.kind === 'wrong' ? COLORS.wrong : '#374151'}">${escapeXml(truncate(valueText, 60))}</text>`,
        `</g>`,
      );
      y += rowH;
    }
    y += groupGap;
  }
  const legend: [BarKind, string][] = [
    ['hashgate', 'hashgate'],
    ['peer', 'peer'],
    ['baseline', 'baseline'],
    ['wrong', 'wrong answers or failed (not ranked)'],
  ];
  let lx = 16;
  for (const [k, text] of legend) {
    parts.push(`<rect x="${lx}" y="${y + 4}" width="12" height="12" fill="${COLORS[k]}"/>`, `<text x="${lx + 16}" y="${y + 14}" fill="#374151">${escapeXml(text)}</text>`);
    lx += 30 + text.length * 7;
  }
  parts.push('</svg>');
  return parts.join('\n') + '\n';
}

/** "Nice" tick values covering [min, max] (1, 2, 5 x 10^n steps). */
export function niceTicks(min: number, max: number, count = 5): number[] {
  if (!(max > min)) return [min];
  const span = max - min;
  const raw = span / count;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * mag).find((s) => span / s <= count) ?? 10 * mag;
  const out: number[] = [];
  for (let v = Math.ceil(min / step) * step; v <= max + step * 1e-9; v += step) out.push(Number(v.toPrecision(12)));
  return out;
}

/** Throughput vs a swept parameter (threads, batch size, key count), one line per series. */
export function lineChart(o: LineChartOptions): string {
  const width = o.width ?? 860;
  const height = o.height ?? 420;
  const m = { left: 80, right: 260, top: o.subtitle ? 62 : 46, bottom: 56 };
  const pw = width - m.left - m.right;
  const ph = height - m.top - m.bottom;
  const pts = o.series.flatMap((s) => s.points).filter((p) => Number.isFinite(p.x) && Number.isFinite(p.y));
  const logX = !!o.logX && pts.every((p) => p.x > 0);
  const fx = (x: number) => (logX ? Math.log10(x) : x);
  const xs = pts.map((p) => fx(p.x));
  let xMin = xs.length ? Math.min(...xs) : 0;
  let xMax = xs.length ? Math.max(...xs) : 1;
  if (xMax === xMin) {
    xMin -= 1;
    xMax += 1;
  }
  const logY = !!o.logY && pts.length > 0 && pts.every((p) => p.y > 0);
  const yMax = Math.max(1e-12, ...pts.map((p) => p.y)) * 1.08;
  // log axis: whole decades around the data
  const lyMin = logY ? Math.floor(Math.log10(Math.min(...pts.map((p) => p.y)))) : 0;
  const lyMax = logY ? Math.max(lyMin + 1, Math.ceil(Math.log10(Math.max(...pts.map((p) => p.y))))) : 0;
  const X = (x: number) => m.left + ((fx(x) - xMin) / (xMax - xMin)) * pw;
  const Y = (y: number) => (logY ? m.top + ph - ((Math.log10(y) - lyMin) / (lyMax - lyMin)) * ph : m.top + ph - (y / yMax) * ph);
  const parts: string[] = [];
  parts.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" ${FONT} font-size="12">`,
    `<rect x="0" y="0" width="${width}" height="${height}" fill="#ffffff"/>`,
    `<text x="16" y="26" font-size="17" font-weight="600" fill="#111827">${escapeXml(o.title)}</text>`,
  );
  if (o.subtitle) parts.push(`<text x="16" y="46" fill="#4b5563">${escapeXml(o.subtitle)}</text>`);
  // y grid and ticks
  const yTicks = logY ? Array.from({ length: lyMax - lyMin + 1 }, (_, i) => 10 ** (lyMin + i)) : niceTicks(0, yMax);
  for (const t of yTicks) {
    const y = Y(t);
    parts.push(
      `<line x1="${m.left}" y1="${y.toFixed(1)}" x2="${m.left + pw}" y2="${y.toFixed(1)}" stroke="#e5e7eb"/>`,
      `<text x="${m.left - 6}" y="${(y + 4).toFixed(1)}" text-anchor="end" fill="#4b5563">${escapeXml(formatSi(t))}</text>`,
    );
  }
  // x ticks: the measured x values themselves (threads 1..n, batch sizes) when few, else nice ticks
  const distinctX = [...new Set(pts.map((p) => p.x))].sort((a, b) => a - b);
  const xTicks = distinctX.length <= 12 ? distinctX : logX ? niceTicks(xMin, xMax).map((v) => 10 ** v) : niceTicks(xMin, xMax);
  for (const t of xTicks) {
    const x = X(t);
    parts.push(
      `<line x1="${x.toFixed(1)}" y1="${m.top + ph}" x2="${x.toFixed(1)}" y2="${m.top + ph + 5}" stroke="#6b7280"/>`,
      `<text x="${x.toFixed(1)}" y="${m.top + ph + 18}" text-anchor="middle" fill="#4b5563">${escapeXml(formatSi(t))}</text>`,
    );
  }
  parts.push(
    `<line x1="${m.left}" y1="${m.top}" x2="${m.left}" y2="${m.top + ph}" stroke="#6b7280"/>`,
    `<line x1="${m.left}" y1="${m.top + ph}" x2="${m.left + pw}" y2="${m.top + ph}" stroke="#6b7280"/>`,
    `<text x="${m.left + pw / 2}" y="${height - 14}" text-anchor="middle" fill="#111827">${escapeXml(o.xLabel + (logX ? ' (log scale)' : ''))}</text>`,
    `<text x="18" y="${m.top + ph / 2}" text-anchor="middle" fill="#111827" transform="rotate(-90 18 ${m.top + ph / 2})">${escapeXml(o.yLabel + (logY ? ' (log scale)' : ''))}</text>`,
  );
  o.series.forEach((s, i) => {
    const color = PALETTE[i % PALETTE.length] as string;
    const sp = s.points.filter((p) => Number.isFinite(p.x) && Number.isFinite(p.y) && (!logX || p.x > 0) && (!logY || p.y > 0)).sort((a, b) => a.x - b.x);
    parts.push(`<g class="series" data-name="${escapeXml(s.name)}">`);
    if (sp.length > 1) {
      parts.push(`<polyline fill="none" stroke="${color}" stroke-width="2" points="${sp.map((p) => `${X(p.x).toFixed(1)},${Y(p.y).toFixed(1)}`).join(' ')}"/>`);
    }
    for (const p of sp) {
      parts.push(`<circle cx="${X(p.x).toFixed(1)}" cy="${Y(p.y).toFixed(1)}" r="3.5" fill="${color}"><title>${escapeXml(`${s.name}: x=${p.x}, y=${formatSi(p.y)}`)}</title></circle>`);
    }
    parts.push('</g>');
    const ly = m.top + 8 + i * 18;
    parts.push(
      `<rect x="${m.left + pw + 16}" y="${ly}" width="12" height="12" fill="${color}"/>`,
      `<text x="${m.left + pw + 32}" y="${ly + 10}" fill="#374151">${escapeXml(truncate(s.name, 36))}</text>`,
    );
  });
  parts.push('</svg>');
  return parts.join('\n') + '\n';
}
