// What the usage view shows, from `usage/report` answers shaped as the server sends them.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { UsageReportResult, UsageTotals } from "../../src/protocol.generated";
import { byProject, chartSvg, usageHtml, usageUsd } from "../../src/usageHtml";

function totals(total: number, usd: number | null, unpricedCalls = 0): UsageTotals {
  return { inputTokens: total, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0, totalTokens: total, usd, calls: 1 + unpricedCalls, unpricedCalls };
}

const byModel: UsageReportResult = {
  report: "daily", timezone: "UTC", by: "model", since: null, until: null,
  totals: totals(600, 1.5, 1),
  rows: [
    { key: "2026-12-01", models: ["claude-sonnet-4-5", "mystery-model"], firstAt: "", lastAt: "", ...totals(400, 1.0, 1),
      breakdown: [{ name: "claude-sonnet-4-5", ...totals(300, 1.0) }, { name: "mystery-model", ...totals(100, null, 1) }] },
    { key: "2026-12-02", models: ["claude-sonnet-4-5"], firstAt: "", lastAt: "", ...totals(200, 0.5),
      breakdown: [{ name: "claude-sonnet-4-5", ...totals(200, 0.5) }] },
  ],
};
const projects: UsageReportResult = {
  ...byModel, report: "monthly", by: "project",
  rows: [{ key: "2026-12", models: [], firstAt: "", lastAt: "", ...totals(600, 1.5, 1),
           breakdown: [{ name: "/work/<shop>", ...totals(500, 1.5) }, { name: "/work/api", ...totals(100, null, 1) }] }],
};

describe("the usage view", () => {
  it("draws one bar a day, stacked by model, the tallest day full height", () => {
    const { svg, models } = chartSvg(byModel);
    assert.deepEqual(models, ["claude-sonnet-4-5", "mystery-model"]);
    const bars = [...svg.matchAll(/data-day="([^"]+)" data-model="([^"]+)"/g)].map((m) => `${m[1]} ${m[2]}`);
    assert.deepEqual(bars, ["2026-12-01 claude-sonnet-4-5", "2026-12-01 mystery-model", "2026-12-02 claude-sonnet-4-5"]);
    const heights = [...svg.matchAll(/height="([\d.]+)" fill/g)].map((m) => Number(m[1]));
    assert.deepEqual(heights, [135, 45, 90]); // 300 + 100 of 400 tokens over 180 px; 200 of 400
  });

  it("says unpriced, never $0, for a model no price list knows", () => {
    assert.equal(usageUsd({ usd: null, unpricedCalls: 2 }), "unpriced");
    assert.equal(usageUsd({ usd: 1.5, unpricedCalls: 1 }), "$1.50+");
    assert.equal(usageUsd({ usd: 0.0123, unpricedCalls: 0 }), "$0.0123");
  });

  it("tables each project's tokens, most first, names escaped", () => {
    assert.deepEqual(byProject(projects).map((part) => [part.name, part.totalTokens, usageUsd(part)]), [
      ["/work/<shop>", 500, "$1.50"],
      ["/work/api", 100, "unpriced"],
    ]);
    const html = usageHtml(byModel, projects, { nonce: "n0nce", cspSource: "vscode-resource:" });
    assert.ok(html.includes("<td class=\"project\">/work/&#60;shop&#62;</td>"));
    assert.ok(!html.includes("<script"), "the page runs nothing");
    assert.ok(!/ style="/.test(html), "no style attribute: the policy would drop it");
    assert.match(html, /<span class="swatch c1"><\/span>mystery-model/);
    assert.match(html, /default-src 'none'/);
  });
});
