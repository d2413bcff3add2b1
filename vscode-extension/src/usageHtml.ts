// The usage view's page, from two `usage/report` answers: a bar chart of each day's tokens by
// model (inline SVG, so the page needs no script, no library and no network) and a table of
// what each project used. Pure, so a unit test reads exactly what the webview shows.
import type { UsagePart, UsageReportResult, UsageTotals } from "./protocol.generated";

const PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#9c755f"];
const CHART_HEIGHT = 180;
const BAR_WIDTH = 26;
const BAR_GAP = 18; // room for a day's label (MM-DD) under its bar

export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** USD as a person reads a bill: unpriced (never $0) when no call had a known price, a "+"
 * when some had none. */
export function usageUsd(totals: Pick<UsageTotals, "usd" | "unpricedCalls">): string {
  if (totals.usd === null || totals.usd === undefined) return "unpriced";
  const shown = totals.usd >= 1 || totals.usd === 0 ? `$${totals.usd.toFixed(2)}` : `$${totals.usd.toFixed(4)}`;
  return totals.unpricedCalls > 0 ? `${shown}+` : shown;
}

export function tokens(n: number): string {
  return n.toLocaleString("en-US");
}

/** Each project's totals over the report's days (the days' breakdowns added up). */
export function byProject(report: UsageReportResult): UsagePart[] {
  const found = new Map<string, UsagePart>();
  for (const row of report.rows) {
    for (const part of row.breakdown ?? []) {
      const sum = found.get(part.name) ?? { ...part, inputTokens: 0, outputTokens: 0, cacheReadTokens: 0,
        cacheWriteTokens: 0, totalTokens: 0, usd: null, calls: 0, unpricedCalls: 0 };
      sum.inputTokens += part.inputTokens;
      sum.outputTokens += part.outputTokens;
      sum.cacheReadTokens += part.cacheReadTokens;
      sum.cacheWriteTokens += part.cacheWriteTokens;
      sum.totalTokens += part.totalTokens;
      sum.calls += part.calls;
      sum.unpricedCalls += part.unpricedCalls;
      if (part.usd !== null && part.usd !== undefined) sum.usd = (sum.usd ?? 0) + part.usd;
      found.set(part.name, sum);
    }
  }
  return [...found.values()].sort((a, b) => b.totalTokens - a.totalTokens || a.name.localeCompare(b.name));
}

/** The chart: one stacked bar a day, a colour per model, its height the day's tokens. */
export function chartSvg(report: UsageReportResult): { svg: string; models: string[] } {
  const models = [...new Set(report.rows.flatMap((row) => (row.breakdown ?? []).map((part) => part.name)))].sort();
  const most = Math.max(1, ...report.rows.map((row) => row.totalTokens));
  const width = Math.max(1, report.rows.length) * (BAR_WIDTH + BAR_GAP) + BAR_GAP;
  const bars: string[] = [];
  report.rows.forEach((row, index) => {
    let top = CHART_HEIGHT;
    const x = BAR_GAP + index * (BAR_WIDTH + BAR_GAP);
    for (const part of row.breakdown ?? []) {
      const height = (part.totalTokens / most) * CHART_HEIGHT;
      top -= height;
      const color = PALETTE[models.indexOf(part.name) % PALETTE.length];
      bars.push(`<rect class="bar" x="${x}" y="${top.toFixed(1)}" width="${BAR_WIDTH}" height="${height.toFixed(1)}" fill="${color}"` +
        ` data-day="${escapeHtml(row.key)}" data-model="${escapeHtml(part.name)}"><title>${escapeHtml(`${row.key} · ${part.name}: ${tokens(part.totalTokens)} tokens, ${usageUsd(part)}`)}</title></rect>`);
    }
    bars.push(`<text class="day" x="${x + BAR_WIDTH / 2}" y="${CHART_HEIGHT + 14}" text-anchor="middle">${escapeHtml(row.key.slice(5))}</text>`);
  });
  const svg = `<svg role="img" aria-label="Tokens per day by model" width="${width}" height="${CHART_HEIGHT + 20}" viewBox="0 0 ${width} ${CHART_HEIGHT + 20}">${bars.join("")}</svg>`;
  return { svg, models };
}

export function usageHtml(byModel: UsageReportResult, projects: UsageReportResult, csp: { nonce: string; cspSource: string }): string {
  const { svg, models } = chartSvg(byModel);
  const legend = models
    .map((model, i) => `<li><span class="swatch c${i % PALETTE.length}"></span>${escapeHtml(model)}</li>`)
    .join("");
  // The legend's colours as classes of the nonce'd stylesheet: the policy allows no style attribute.
  const swatches = PALETTE.map((color, i) => `.c${i} { background: ${color}; }`).join("\n");
  const rows = byProject(projects)
    .map((part) => `<tr><td class="project">${escapeHtml(part.name)}</td><td>${tokens(part.inputTokens)}</td><td>${tokens(part.outputTokens)}</td>` +
      `<td>${tokens(part.cacheReadTokens)}</td><td>${tokens(part.cacheWriteTokens)}</td><td>${tokens(part.totalTokens)}</td><td>${usageUsd(part)}</td></tr>`)
    .join("");
  const total = byModel.totals;
  const empty = byModel.rows.length === 0 ? `<p id="empty">No model calls recorded yet: costs appear as agents record or sessions are imported.</p>` : "";
  // Inline SVG and a nonce'd style, nothing else: the page loads nothing and runs nothing.
  return `<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; img-src ${csp.cspSource} data:; style-src 'nonce-${csp.nonce}';">
<title>sessiond usage</title>
<style nonce="${csp.nonce}">
body { font-family: var(--vscode-font-family); color: var(--vscode-foreground); padding: 0 16px 16px; }
h2 { font-size: 1.1em; margin: 18px 0 6px; }
#summary { color: var(--vscode-descriptionForeground); }
.chart { overflow-x: auto; padding: 8px 0; }
.day { font-size: 10px; fill: var(--vscode-descriptionForeground); }
ul.legend { list-style: none; padding: 0; display: flex; flex-wrap: wrap; gap: 14px; margin: 4px 0 0; }
.swatch { display: inline-block; width: 10px; height: 10px; margin-right: 6px; border-radius: 2px; }
table { border-collapse: collapse; margin-top: 4px; }
th, td { padding: 3px 10px; text-align: right; border-bottom: 1px solid var(--vscode-panel-border, #8884); }
th:first-child, td.project { text-align: left; }
th { color: var(--vscode-descriptionForeground); font-weight: normal; }
${swatches}
</style></head><body>
<h2>Tokens per day, by model</h2>
<p id="summary">${tokens(total.totalTokens)} tokens in ${tokens(total.calls)} model calls · ${usageUsd(total)} · days in ${escapeHtml(byModel.timezone)}</p>
${empty}<div class="chart">${svg}</div>
<ul class="legend">${legend}</ul>
<h2>By project</h2>
<table id="projects"><thead><tr><th>project</th><th>input</th><th>output</th><th>cache read</th><th>cache write</th><th>total</th><th>USD</th></tr></thead>
<tbody>${rows}</tbody></table>
</body></html>`;
}
