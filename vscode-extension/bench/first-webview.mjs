// When does a webview wait for VS Code's webview service worker? The empty webview of
// test/e2e/empty-webview (VS Code alone, no sessiond code on the way), opened in a browser
// just started, as soon as the window's sessiond view has settled or WAITS ms later, and
// again in the same window; PROFILE=1 reuses one browser profile across the rounds (the
// worker registered by the first round: a browser restart, as a person's). Prints, per
// round, key press → first frame and the host page's wait for its worker (VS Code's marks).
//
//   node bench/first-webview.mjs            # WAITS=0,2000,4000,6000 ROUNDS=8
import { mkdtempSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import path from "node:path";
import { buildEmptyWebviewVsix, buildVsix, conversation, Harness, installServerFromWheel, makeRepo, makeRunDir, startCodeServer } from "../test/e2e/fixture.mjs";
import { ensureTools } from "../test/e2e/tools.mjs";
import { emptyWebviewFrame, eventually, settledView, treeOutline, webviewHostMarks } from "../test/e2e/workbench.mjs";

const FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"];
const waits = (process.env.WAITS ?? "0,2000,4000,6000").split(",").map(Number);
const rounds = Number(process.env.ROUNDS ?? 8);
const tools = ensureTools();
const root = makeRunDir();
const sessiond = installServerFromWheel(root);
const home = path.join(root, "home");
const folder = makeRepo(path.join(root, "work"), "history");
const harness = new Harness(sessiond, home, [folder]);
await harness.recordThread(folder, "a thread", conversation("a", 2));
await harness.stop();
const server = await startCodeServer(tools, { root, vsix: [buildVsix(), buildEmptyWebviewVsix(root)], sessiond, home });
const { chromium } = createRequire(import.meta.url)(tools.playwright);
const profile = process.env.PROFILE ? mkdtempSync(path.join(tmpdir(), "first-webview-profile-")) : undefined;

async function openEmpty(window, number) {
  const pressed = Date.now();
  await window.keyboard.press("Control+Alt+Shift+F9");
  const frame = await emptyWebviewFrame(window, number);
  const shownAt = await eventually(async () => {
    const at = Number(await frame.evaluate(() => document.body.dataset.shownAt ?? 0));
    if (!(at >= pressed)) throw new Error("not shown yet");
    return at;
  });
  const marks = await webviewHostMarks(frame);
  return `${shownAt - pressed} ms (waited ${marks.workerReady - marks.workerRequested} ms for the worker)`;
}

try {
  for (let round = 0; round < rounds; round++) {
    const wait = waits[round % waits.length];
    const launched = Date.now();
    const options = { executablePath: tools.chromium, args: FLAGS };
    const browser = profile ? await chromium.launchPersistentContext(profile, { ...options, viewport: { width: 1280, height: 800 } }) : await chromium.launch(options);
    try {
      const window = await browser.newPage({ viewport: { width: 1280, height: 800 } });
      await window.goto(`${server.url}/?folder=${encodeURIComponent(folder)}`);
      await window.locator(".activitybar .action-item a[aria-label^='sessiond']").click({ timeout: 90_000 });
      await eventually(async () => {
        if ((await treeOutline(window, "Threads")).length !== 3) throw new Error("the view is not filled yet");
      });
      await settledView(window, "Threads");
      if (wait) await window.waitForTimeout(wait);
      const since = Date.now() - launched;
      const first = await openEmpty(window, 1);
      const second = await openEmpty(window, 2);
      console.log(`round ${round + 1}: ${wait} ms after the view settled (${since} ms after the browser started): first ${first}; second ${second}`);
    } finally {
      await browser.close();
    }
  }
} finally {
  server.stop();
}
process.exit(0);
