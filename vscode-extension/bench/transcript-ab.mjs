// Resume → newest message of a 100,000-message thread, two builds of the extension side by
// side: A_VSIX and B_VSIX (e.g. main's and this checkout's), each in a code-server of its own
// with its own data directory, one browser, a fresh window per Resume (its first webview)
// opened WAIT ms after its view settled (default 3000: past the browser's startup, when any
// webview waits ~2 s; bench/first-webview.mjs), rounds interleaved A B B A …; medians, and
// the ratio B/A, of the whole and of the part after VS Code's webview host has its service
// worker (VS Code's mark `content/workerReady` → the first page laid out).
//
//   A_VSIX=/path/main.vsix B_VSIX=sessiond-0.1.0.vsix node bench/transcript-ab.mjs
import { createRequire } from "node:module";
import path from "node:path";
import { conversation, Harness, installServerFromWheel, makeRepo, makeRunDir, startCodeServer } from "../test/e2e/fixture.mjs";
import { ensureTools } from "../test/e2e/tools.mjs";
import { eventually, settledView, transcriptFrame, treeOutline, treeRow, webviewHostMarks } from "../test/e2e/workbench.mjs";

const FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"];
const MESSAGES = Number(process.env.MESSAGES ?? 100_000);
const ROUNDS = Number(process.env.ROUNDS ?? 10);
const WAIT = Number(process.env.WAIT ?? 3000);
if (!process.env.A_VSIX || !process.env.B_VSIX) throw new Error("set A_VSIX and B_VSIX to the two .vsix files");
const tools = ensureTools();
const sides = [];
let sessiond;
for (const [name, vsix] of [["A", process.env.A_VSIX], ["B", process.env.B_VSIX]]) {
  const root = makeRunDir();
  sessiond ??= installServerFromWheel(root);
  const home = path.join(root, "home");
  const folder = makeRepo(path.join(root, "work"), "history");
  const harness = new Harness(sessiond, home, [folder]);
  await harness.recordThread(folder, "long thread", conversation("long", MESSAGES));
  await harness.stop();
  sides.push({ name, vsix, folder, server: await startCodeServer(tools, { root, vsix: path.resolve(vsix), sessiond, home }), totals: [], afterWorker: [] });
}
const { chromium } = createRequire(import.meta.url)(tools.playwright);
const browser = await chromium.launch({ executablePath: tools.chromium, args: FLAGS });

async function resume(side, keep) {
  const window = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  try {
    await window.goto(`${side.server.url}/?folder=${encodeURIComponent(side.folder)}`);
    await window.locator(".activitybar .action-item a[aria-label^='sessiond']").click({ timeout: 90_000 });
    await eventually(async () => {
      if ((await treeOutline(window, "Threads")).length !== 3) throw new Error("the view is not filled yet");
    });
    await settledView(window, "Threads");
    await window.waitForTimeout(WAIT);
    const row = await treeRow(window, "Threads", "long thread");
    await row.hover();
    const button = row.locator('.actions .action-label[aria-label="Resume"]');
    await button.waitFor();
    const clicked = Date.now();
    await button.click();
    const frame = await transcriptFrame(window, "long thread");
    const shownAt = await eventually(async () => {
      const at = Number(await frame.evaluate(() => document.body.dataset.initialShownAt ?? 0));
      if (!(at >= clicked)) throw new Error("not shown yet");
      return at;
    });
    const marks = await webviewHostMarks(frame);
    if (keep) {
      side.totals.push(shownAt - clicked);
      side.afterWorker.push(shownAt - marks.workerReady);
    }
  } finally {
    await window.close();
  }
}

const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
try {
  for (const side of sides) await resume(side, false); // each server's first: not counted
  for (let round = 0; round < ROUNDS; round++) for (const side of round % 2 ? [...sides].reverse() : sides) await resume(side, true);
  for (const side of sides) {
    console.log(`${side.name} (${side.vsix}): Resume → newest message median ${median(side.totals)} ms [${side.totals.join(", ")}]; worker ready → newest median ${median(side.afterWorker)} ms [${side.afterWorker.join(", ")}]`);
  }
  const [a, b] = sides;
  console.log(`B/A: ${(median(b.totals) / median(a.totals)).toFixed(2)}x whole, ${(median(b.afterWorker) / median(a.afterWorker)).toFixed(2)}x after the worker`);
} finally {
  await browser.close();
  for (const side of sides) side.server.stop();
}
process.exit(0);
