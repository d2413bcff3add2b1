// The extension in a real VS Code (code-server) driven by headless Chromium: every step is an
// assertion on what the workbench shows, then a screenshot. The server is the one a user gets
// from the wheel; the threads were recorded through it; nothing is stubbed.
//
// `npm run test:e2e` (installs code-server, Node 24, chromium and playwright-core when missing;
// see tools.mjs). SESSIOND_E2E_MEDIA=DIR also writes the README's screenshots into DIR.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import {
  conversation,
  EXTENSION_DIR,
  git,
  Harness,
  installServerFromWheel,
  makeRepo,
  makeRunDir,
  buildVsix,
  buildEmptyWebviewVsix,
  startCodeServer,
  writeAgentStub,
  writeClaudeSession,
} from "./fixture.mjs";
import { ensureTools } from "./tools.mjs";
import {
  activeTab,
  answerInput,
  chooseColorTheme,
  clickDialogButton,
  clickInlineAction,
  contextMenu,
  describeWindow,
  dialog,
  dialogText,
  emptyWebviewFrame,
  eventually,
  notifications,
  settledView,
  statusBarTexts,
  tabLabels,
  transcriptEntries,
  transcriptFrame,
  treeOutline,
  treeRow,
  treeRows,
  runCommand,
  usageFrame,
  visibleEntries,
  webviewHostMarks,
} from "./workbench.mjs";

const THREADS = "Threads";
/** Messages in the long thread: far more than a transcript ever loads at once. */
const LONG_THREAD = 100_000;
/** What the long thread must do (issue 27): its newest message on screen within this of Resume… */
const NEWEST_WITHIN_MS = 1000;
/** …and a page further back on screen within this of scrolling to the top (median of the pages). */
const EARLIER_PAGE_WITHIN_MS = 200;
const EARLIER_PAGES = 5;
/** Items a transcript keeps loaded at most (src/transcript/panel.ts MAX_LOADED: ten pages of 200). */
const MAX_LOADED = 2000;
/** Pages scrolled back in all: past MAX_LOADED, so the newest are let go. */
const BOUNDED_PAGES = 12;
const TODOS = "Todos";
/** The key test/e2e/empty-webview binds to opening its empty webview (the baseline). */
const EMPTY_WEBVIEW_KEY = "Control+Alt+Shift+F9";
const CHROMIUM_FLAGS = [
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];
/** Screenshots the README shows, by step name; written only when SESSIOND_E2E_MEDIA is set. */
const README_MEDIA = {
  "00-welcome": "welcome.png",
  "01-threads": "threads.png",
  "02-resume": "resume.png",
  "02d-open-diff": "diff.png",
  "03-drift-modal": "drift.png",
  "06-drift-banner": "drift-banner.png",
  "14-resume-in-claude-code": "resume-in-agent.png",
  "15-usage": "usage.png",
};

const stack = [];
let failed = false;
let root = "";
let sessiond = "";
let home = "";
let shop = "";
let docs = "";
let page;
let browser;
let chromium;
let chromiumPath = "";
let codeServer;
let notes = "";
let history = "";
let archive = "";
let shotCount = 0;
const ids = {};
/** The long thread's timings, written beside the screenshots (docs/benchmarks.md reports them). */
const timings = {};
const CLAUDE_SESSION = "7d3f0c2e-5b1a-4c8e-9f61-2a4b6c8d0e13";
let agentLog = "";

const LOGIN_BEFORE = "def check(stored, typed):\n    return stored == typed\n";
const LOGIN_AFTER = "import hmac\n\n\ndef check(stored, typed):\n    return hmac.compare_digest(stored, typed)\n";

/**
 * "fix login": what an agent does in a turn — a plan, a command that fails, an edit sessiond
 * applies (so its before/after are in the blob store), the plan updated, the answer, the cost.
 */
async function recordFixLogin(harness) {
  const { thread, sessionId } = await harness.request("thread/start", { cwd: shop, title: "fix login" });
  const record = (items) => harness.request("thread/record", { threadId: thread.threadId, sessionId, items });
  const turn = { turnId: "login-t1" };
  await record([
    { type: "turn", id: "login-t1-start", ...turn, phase: "started" },
    { type: "message", id: "login-m1", ...turn, role: "user", content: "The login form rejects **valid** passwords." },
    { type: "todos", id: "login-todos-1", ...turn, items: [{ id: "1", content: "find the bug", status: "in_progress" }] },
    { type: "operation", id: "login-task-s", ...turn, operationId: "login-task", tool: "Task", title: "find the bug", effect: "read", state: "started" },
  ]);
  // The sub-agent the Task call ran: a thread of its own, under the parent (issue 21's
  // parentThreadId, which servers without sub-agent threads ignore), named by the call.
  const subagentDir = path.join(root, "work", "subagent");
  mkdirSync(subagentDir, { recursive: true });
  const child = await harness.request("thread/start", { cwd: subagentDir, title: "find the bug", parentThreadId: thread.threadId, parentOperationId: "login-task" });
  await harness.request("thread/record", {
    threadId: child.thread.threadId,
    sessionId: child.sessionId,
    items: [
      { type: "message", id: "sub-m1", role: "user", content: "Find why valid passwords are rejected." },
      { type: "message", id: "sub-m2", role: "assistant", content: "`check()` compares the hash as text, with `==`." },
    ],
  });
  await harness.request("thread/close", { threadId: child.thread.threadId, sessionId: child.sessionId });
  await record([
    {
      type: "operation",
      id: "login-task-c",
      ...turn,
      operationId: "login-task",
      tool: "Task",
      effect: "read",
      state: "committed",
      resultPersisted: true,
      result: "The hash is compared with ==.",
      childThreadId: child.thread.threadId,
    },
    { type: "operation", id: "login-op1-s", ...turn, operationId: "login-op1", tool: "bash", effect: "read", state: "started", arguments: { command: "pytest tests/test_login.py" } },
    {
      type: "operation",
      id: "login-op1-f",
      ...turn,
      operationId: "login-op1",
      tool: "bash",
      effect: "read",
      state: "failed",
      resultPersisted: true,
      result: "FAILED tests/test_login.py::test_valid_password - AssertionError: rejected",
    },
  ]);
  await harness.request("fs/applyEdit", { threadId: thread.threadId, sessionId, operationId: "login-edit", path: "src/login.py", content: LOGIN_AFTER });
  await record([
    {
      type: "todos",
      id: "login-todos-2",
      ...turn,
      items: [
        { id: "1", content: "find the bug", status: "completed" },
        { id: "2", content: "write a regression test", status: "in_progress" },
      ],
    },
    { type: "message", id: "login-m2", ...turn, role: "assistant", content: "Fixed: the hash was compared with `==`; it is `hmac.compare_digest` now." },
    { type: "cost", id: "login-cost", ...turn, model: "model-a", inputTokens: 1200, outputTokens: 300, usd: 0.42 },
    { type: "turn", id: "login-t1-end", ...turn, phase: "completed" },
  ]);
  await harness.request("thread/close", { threadId: thread.threadId, sessionId });
  return thread.threadId;
}

/**
 * A step: on failure, a screenshot of every open window goes beside the others, and the test
 * output says what each window showed and what the extension logged: CI keeps only the output.
 */
function step(name, run) {
  it(name, async () => {
    try {
      await run();
    } catch (error) {
      failed = true;
      const windows = browser?.contexts().flatMap((context) => context.pages()) ?? [];
      for (const [number, window] of windows.entries()) {
        const file = path.join(root, "screenshots", `failed-${name.replace(/[^a-z0-9]+/gi, "-").slice(0, 60)}-${number}.png`);
        await window.screenshot({ path: file }).catch(() => undefined);
        console.log(`[e2e] window ${number} when "${name}" failed: ${JSON.stringify(await describeWindow(window).catch((reason) => String(reason)), null, 1)}`);
      }
      for (const log of extensionLogs()) console.log(`[e2e] ${log.file}, last lines:\n${log.tail}`);
      throw error;
    }
  });
}

/** The sessiond output channel of every window so far (VS Code writes each to a file under logs/). */
function extensionLogs() {
  const logs = path.join(root, "vscode/user-data/logs");
  if (!existsSync(logs)) return [];
  return readdirSync(logs, { recursive: true })
    .filter((file) => String(file).endsWith("-sessiond.log"))
    .map((file) => ({ file, tail: readFileSync(path.join(logs, String(file)), "utf8").split("\n").slice(-40).join("\n") }));
}

async function screenshot(name, window = page, { hover = false } = {}) {
  shotCount++;
  const file = path.join(root, "screenshots", `${name}.png`);
  if (!hover) {
    // The pointer goes to the empty title bar, so that no hover or tooltip covers the picture.
    await window.mouse.move(1000, 18);
    await eventually(async () => assert.equal(await window.locator(".workbench-hover-container, .monaco-hover:not(.hidden)").count(), 0), 3000).catch(() => undefined);
  }
  await window.screenshot({ path: file });
  const media = process.env.SESSIOND_E2E_MEDIA;
  if (media && README_MEDIA[name]) copyFileSync(file, path.join(path.resolve(EXTENSION_DIR, media), README_MEDIA[name]));
}

/**
 * A webview's opening as a timeline, ms after `start` (the click or key press), by one machine
 * clock (Date.now() in the test, the extension host and the webview): `workerWaitMs` is the
 * part VS Code's webview host spends waiting for its service worker before it loads any of the
 * extension's document; `restMs` is everything else.
 */
function opening(start, points) {
  const timeline = Object.fromEntries(
    Object.entries(points)
      .filter(([, at]) => Number.isFinite(at))
      .sort(([, a], [, b]) => a - b)
      .map(([name, at]) => [name, at - start]),
  );
  const totalMs = points.shown - start;
  const workerWaitMs = points.workerReady - points.workerRequested;
  return { totalMs, workerWaitMs, restMs: totalMs - workerWaitMs, timeline };
}

function describeOpening(what, timed) {
  const steps = Object.entries(timed.timeline).map(([name, ms]) => `${name} ${ms}`).join(", ");
  console.log(`[e2e] ${what}: ${timed.totalMs} ms, of which VS Code's webview host waited ${timed.workerWaitMs} ms for its service worker (the rest: ${timed.restMs} ms); ms after the start: ${steps}`);
}

/** The long thread's timings and the baseline's, beside the screenshots (docs/benchmarks.md reports them). */
function writeTimings() {
  writeFileSync(path.join(root, "screenshots", "timings.json"), JSON.stringify({ messages: LONG_THREAD, ...timings }, null, 2));
}

/** The transcript's opening: the extension host's stamps, VS Code's marks and the webview's own. */
async function transcriptOpening(frame, clicked) {
  const body = await frame.evaluate(() => ({ ...document.body.dataset }));
  const opened = JSON.parse(body.opened);
  const host = await webviewHostMarks(frame);
  return opening(clicked, {
    command: opened.requestedAt,
    panel: opened.panelAt,
    ...host,
    pageRead: opened.readAt,
    pageRendered: opened.renderedAt,
    script: opened.scriptAt,
    firstMessage: opened.initAt,
    shown: Number(body.initialShownAt),
  });
}

/**
 * The baseline: test/e2e/empty-webview's empty webview, opened with its key and timed from the
 * key press to its first frame, the way the transcript is timed from Resume to its first page.
 */
async function openEmptyWebview(window, number) {
  const pressed = Date.now();
  await window.keyboard.press(EMPTY_WEBVIEW_KEY);
  const frame = await emptyWebviewFrame(window, number);
  const body = await eventually(async () => {
    const data = await frame.evaluate(() => ({ ...document.body.dataset }));
    assert.ok(Number(data.shownAt) >= pressed, "its first frame is laid out");
    return data;
  });
  const opened = JSON.parse(body.opened);
  return opening(pressed, { command: opened.requestedAt, panel: opened.panelAt, ...(await webviewHostMarks(frame)), script: Number(body.scriptAt), shown: Number(body.shownAt) });
}

describe("sessiond in VS Code (code-server + Chromium)", { timeout: 15 * 60_000 }, () => {
  before(async () => {
    failed = true; // until the set-up is done
    const tools = ensureTools();
    root = makeRunDir();
    console.log(`[e2e] run directory: ${root}\n[e2e] screenshots: ${path.join(root, "screenshots")}`);
    sessiond = installServerFromWheel(root);
    const vsix = buildVsix();
    home = path.join(root, "home");
    shop = makeRepo(path.join(root, "work"), "shop");
    // The file the agent edits in "fix login", committed before any thread is recorded.
    mkdirSync(path.join(shop, "src"));
    writeFileSync(path.join(shop, "src/login.py"), LOGIN_BEFORE);
    git(shop, "add", ".");
    git(shop, "commit", "-q", "-m", "login");
    docs = makeRepo(path.join(root, "work"), "docs-site");
    notes = makeRepo(path.join(root, "work"), "notes");
    history = makeRepo(path.join(root, "work"), "history");
    archive = makeRepo(path.join(root, "work"), "archive");

    // An agent harness records the threads through the installed server, oldest first.
    const harness = new Harness(sessiond, home, [shop, docs]);
    ids.older = await harness.recordThread(shop, "older thread", conversation("older", 2));
    git(shop, "checkout", "-q", "-b", "feature/payments");
    ids.payments = await harness.recordThread(shop, "payment retries", conversation("payments", 2));
    git(shop, "checkout", "-q", "main");
    ids.login = await recordFixLogin(harness);
    ids.draft = await harness.recordThread(docs, "draft notes", conversation("draft", 2));
    ids.stale = await harness.recordThread(docs, "stale experiment", conversation("stale", 2));
    ids.scratch = await harness.recordThread(docs, "scratch", conversation("scratch", 2));
    // Its own folder (and window), so that the other steps' views do not list it.
    ids.long = await harness.recordThread(history, "long thread", conversation("long", LONG_THREAD));
    // The same again in a folder of its own: the first transcript of a second, fresh browser.
    ids.longElsewhere = await harness.recordThread(archive, "long thread", conversation("long", LONG_THREAD));
    await harness.stop();
    // A Claude Code session from before sessiond was installed, imported as users do.
    const projects = path.join(root, "claude/projects");
    writeClaudeSession(projects, shop, "main", CLAUDE_SESSION, "add a dark mode toggle");
    execFileSync(sessiond, ["--home", home, "import", "claude", "--from", projects], { stdio: ["ignore", "ignore", "inherit"] });
    agentLog = path.join(root, "agent-runs.log");
    writeAgentStub(root, "claude", agentLog); // root is code-server's HOME

    const workspace = path.join(root, "work/e2e.code-workspace");
    writeFileSync(workspace, JSON.stringify({ folders: [{ path: shop }, { path: docs }] }));
    codeServer = await startCodeServer(tools, { root, vsix: [vsix, buildEmptyWebviewVsix(root)], sessiond, home });
    stack.push(() => codeServer.stop());
    ({ chromium } = createRequire(import.meta.url)(tools.playwright));
    chromiumPath = tools.chromium;
    browser = await launchBrowser();
    stack.push(() => browser.close());
    page = await openWindow(`workspace=${encodeURIComponent(workspace)}`);
    failed = false;
  });

  function launchBrowser() {
    return chromium.launch({ executablePath: chromiumPath, args: CHROMIUM_FLAGS });
  }

  /** A VS Code window on `query` (?folder= or ?workspace=), with the sessiond view shown. */
  async function openWindow(query, inBrowser = browser) {
    const window = await inBrowser.newPage({ viewport: { width: 1280, height: 800 } });
    window.setDefaultTimeout(30_000);
    await window.goto(`${codeServer.url}/?${query}`);
    await window.locator(".activitybar .action-item a[aria-label^='sessiond']").click({ timeout: 90_000 });
    return window;
  }

  after(async () => {
    for (const stop of stack.reverse()) await Promise.resolve(stop()).catch(() => undefined);
    // A passing run keeps only its screenshots; a failing one keeps everything (logs are in vscode/).
    if (root && !failed) {
      for (const entry of readdirSync(root)) if (entry !== "screenshots") rmSync(path.join(root, entry), { recursive: true, force: true });
    }
    console.log(`[e2e] ${shotCount} screenshots in ${path.join(root, "screenshots")}${failed ? `; logs in ${path.join(root, "vscode/user-data/logs")}` : ""}`);
  });

  /** The sessiond view of `window` on `folder`, its rows settled (startup over). */
  async function settledFolder(window, folder) {
    await eventually(async () => assert.deepEqual(await treeOutline(window, THREADS), [folder, "  main", "    long thread"]));
    await settledView(window, THREADS);
  }

  /**
   * Resume of the long thread in `window` (on `folder`), timed from the click to the webview's
   * stamp of its first page laid out; the newest message is on screen, and only one page loaded.
   */
  async function resumeLongThread(window, folder) {
    const newest = `long message ${LONG_THREAD} (assistant)`;
    await settledFolder(window, folder);
    const row = await treeRow(window, THREADS, "long thread");
    await row.hover();
    const resume = row.locator('.actions .action-label[aria-label="Resume"]');
    await resume.waitFor();
    const clicked = Date.now();
    await resume.click();
    const frame = await transcriptFrame(window, "long thread");
    // The webview stamps (this machine's clock) when the first page was laid out.
    const shownAt = await eventually(async () => {
      const at = Number(await frame.evaluate(() => document.body.dataset.initialShownAt ?? 0));
      assert.ok(at >= clicked, "the first page is on screen");
      return at;
    });
    assert.ok((await visibleEntries(frame)).some((text) => text === `Agent ${newest}`), "the newest message is on screen, nobody having scrolled");
    const first = await transcriptEntries(frame);
    assert.ok(first.length <= 200, `one page of items, not the thread: ${first.length}`);
    assert.ok(!first.some((entry) => entry.text.includes("long message 1 (user)")), "the first message is not loaded");
    return { frame, clicked, shownAt, first };
  }

  step("the baseline: an empty webview (no extension code, no server), a window's first and a later one", async () => {
    // Before any transcript, the browser's first webview: VS Code's alone (test/e2e/empty-webview),
    // timed like the transcript, so that the transcript's timings can be set beside what any
    // webview costs here. (The browser has been up since the run's first window opened.)
    const window = await openWindow(`folder=${encodeURIComponent(history)}`);
    try {
      await settledFolder(window, "history");
      const firstOfWindow = await openEmptyWebview(window, 1);
      await eventually(async () => assert.equal(await activeTab(window), "Empty webview 1"));
      const later = await openEmptyWebview(window, 2);
      timings.emptyWebview = { firstOfWindow, later };
      describeOpening("an empty webview, the first of a window", firstOfWindow);
      describeOpening("an empty webview, a later one", later);
    } finally {
      await window.close();
    }
  });

  step("a folder without threads shows the welcome view, whose New Thread starts one there", async () => {
    const window = await openWindow(`folder=${encodeURIComponent(notes)}`);
    try {
      const welcome = window.locator(".welcome-view-content");
      await eventually(async () => assert.match(await welcome.innerText(), /No threads yet in this workspace\./));
      // The server indexed the new data directory on the first listing: its progress ends.
      await eventually(async () => assert.deepEqual(await notifications(window), []));
      await screenshot("00-welcome", window);
      await welcome.locator(".monaco-button", { hasText: "New Thread" }).click();
      await answerInput(window, "first thread");
      await eventually(async () =>
        assert.deepEqual(
          (await treeRows(window, THREADS)).map((row) => [row.label, row.icon]),
          [["notes", "root-folder"], ["main", "git-branch"], ["first thread", "debug-start"]],
        ),
      );
      await eventually(async () => assert.equal(await activeTab(window), "first thread"));
      assert.equal(await welcome.count(), 0, "the welcome content is gone");
    } finally {
      await window.close();
    }
  });

  step("the Threads view lists each folder's threads, grouped by branch, newest first", async () => {
    await eventually(async () =>
      assert.deepEqual(await treeOutline(page, THREADS), [
        "shop",
        "  main",
        "    fix login",
        "    older thread",
        "    add a dark mode toggle",
        "  feature/payments",
        "    payment retries",
        "docs-site",
        "  main",
        "    scratch",
        "    stale experiment",
        "    draft notes",
      ]),
    );
    const rows = await treeRows(page, THREADS);
    const login = rows.find((row) => row.label === "fix login");
    assert.match(login.description, /^(just now|\d+ min ago) · \$0\.42$/, "the row says when and how much, nothing the group already says");
    assert.deepEqual(
      rows.filter((row) => row.depth === 2).map((row) => [row.label, row.description]),
      [["main", "current"], ["feature/payments", ""], ["main", "current"]],
      "the branch each folder is on is marked",
    );
    assert.equal(rows.find((row) => row.label === "payment retries").icon, "warning", "recorded on another branch: needs review");
    assert.equal(login.icon, "comment-discussion");
    await screenshot("01-threads");
    // The details the row leaves out are in its tooltip.
    await (await treeRow(page, THREADS, "payment retries")).hover();
    await eventually(async () => {
      const hover = await page.locator(".workbench-hover-container, .monaco-hover").last().innerText();
      assert.match(hover, /payment retries/);
      assert.match(hover, /branch feature\/payments · 2 items · updated /);
      assert.match(hover, /Needs review: recorded on feature\/payments, this folder is on main now\. Resume asks first\./);
    });
    await screenshot("01-threads-tooltip", page, { hover: true });
  });

  step("Resume shows what the agent did: the request, its plan as it changed, the failed command, the edit, the turn's cost", async () => {
    await clickInlineAction(page, THREADS, "fix login", "Resume");
    await eventually(async () => assert.equal(await activeTab(page), "fix login"));
    const frame = await transcriptFrame(page, "fix login");
    await eventually(async () => {
      const entries = await transcriptEntries(frame);
      const said = entries.map((entry) => entry.text);
      assert.ok(said.includes("You The login form rejects valid passwords."), said.join("\n"));
      const failed = entries.find((entry) => entry.kind.includes("tool") && entry.text.includes("pytest tests/test_login.py"));
      assert.ok(failed?.kind.includes("failed"), "the failed command is marked");
      assert.match(failed.text, /^✗ bash pytest tests\/test_login\.py failed Error$/, "its output is collapsed");
      assert.equal(failed.label, "Tool call bash pytest tests/test_login.py, failed");
      assert.ok(said.includes("✎ Edited src/login.py Open diff"), "the edit, one line, with Open diff");
      assert.ok(
        said.includes("Todos 1 new · 1 completed ● find the bug completed now completed ◐ write a regression test in progress new"),
        "the plan as it changed",
      );
      assert.ok(said.includes("Agent Fixed: the hash was compared with ==; it is hmac.compare_digest now."));
      assert.ok(said.includes("Turn completed · $0.42 · 1.2k in / 300 out"), "the turn's end with its cost");
      assert.ok(said.some((text) => /^✓ Task find the bug done Result (Sub-agent|The sub-agent)/.test(text)), "the sub-agent's call, its transcript folded in it");
    });
    // The newest entries are on screen as the transcript opens, nobody having scrolled.
    assert.ok((await visibleEntries(frame)).includes("Turn completed · $0.42 · 1.2k in / 300 out"));
    // The sub-agent's own transcript opens inside the call that ran it.
    const subagent = frame.locator("#feed .entry.tool details.subagent");
    await subagent.locator("summary").click();
    await eventually(async () => {
      const texts = (await subagent.locator(".subagent-body > .entry").allInnerTexts()).map((text) => text.replace(/\s+/g, " ").trim());
      assert.match(texts[0] ?? "", /^▸ Thread started/);
      assert.deepEqual(texts.slice(1), ["You Find why valid passwords are rejected.", "Agent check() compares the hash as text, with ==."]);
    });
    // Markdown is rendered; the failed command's output opens in place.
    assert.equal(await frame.locator("#feed .role-user strong").first().innerText(), "valid");
    const failedCall = frame.locator("#feed .entry.tool.failed");
    await failedCall.locator("summary").click();
    assert.match(await failedCall.locator("details.result pre").innerText(), /AssertionError: rejected/);
    await eventually(async () =>
      assert.deepEqual(
        (await treeRows(page, TODOS)).map((row) => [row.label, row.description]),
        [
          ["find the bug", "completed"],
          ["write a regression test", "in progress"],
        ],
      ),
    );
    await eventually(async () => assert.ok((await statusBarTexts(page)).some((text) => text.includes("$0.42")), "the cost is in the status bar"));
    await eventually(async () => assert.equal((await treeRows(page, THREADS)).find((row) => row.label === "fix login").icon, "debug-start", "marked open here"));
    await screenshot("02-resume");
  });

  step("Open diff shows the recorded change in VS Code's diff editor", async () => {
    const frame = await transcriptFrame(page, "fix login");
    await frame.locator("#feed .entry.edit button", { hasText: "Open diff" }).click();
    await eventually(async () => assert.equal(await activeTab(page), "src/login.py (recorded edit: before ↔ after)"));
    const diff = page.locator(".editor-group-container.active .monaco-diff-editor");
    const side = async (name) => (await diff.locator(`.editor.${name} .view-lines`).innerText()).replace(/\u00a0/g, " ");
    await eventually(async () => {
      assert.match(await side("original"), /return stored == typed/);
      assert.match(await side("modified"), /return hmac\.compare_digest\(stored, typed\)/);
      assert.doesNotMatch(await side("original"), /hmac/);
    });
    await screenshot("02d-open-diff");
    await page.keyboard.press("Control+w"); // back to the transcript
    await eventually(async () => assert.equal(await activeTab(page), "fix login"));
  });

  step("the transcript is read with the keyboard and follows the editor's theme", async () => {
    const frame = await transcriptFrame(page, "fix login");
    const focused = () => frame.evaluate(() => document.activeElement?.getAttribute("aria-label") ?? "");
    await frame.locator("#feed > .entry").last().click();
    assert.match(await focused(), /^Resumed/, "the newest entry: this resume");
    await page.keyboard.press("ArrowUp");
    assert.match(await focused(), /^Turn completed · \$0\.42/, "one entry up: the turn's end");
    await page.keyboard.press("ArrowUp");
    assert.match(await focused(), /^Agent, item \d+$/, "and the agent's answer");
    await page.keyboard.press("Home");
    assert.match(await focused(), /^Thread started/, "Home: the first entry");
    assert.equal(await frame.locator('#feed > .entry[tabindex="0"]').count(), 1, "one entry in the tab order, the focused one");
    assert.equal(await frame.locator("#feed").getAttribute("role"), "feed");
    const theme = () => frame.evaluate(() => ({ kind: document.body.className.match(/vscode-(light|dark|high-contrast)/)?.[1], background: getComputedStyle(document.body).backgroundColor }));
    const before = await theme();
    const opposite = before.kind === "dark" ? "Light" : "Dark";
    const original = await chooseColorTheme(page, (labels, current) => labels.find((label) => label !== current && label.includes(`${opposite} Modern`)) ?? labels.find((label) => label.includes(opposite)));
    try {
      await eventually(async () => {
        const now = await theme();
        assert.notEqual(now.kind, before.kind, "the webview takes the new theme");
        assert.notEqual(now.background, before.background);
      });
      await screenshot("02e-other-theme");
    } finally {
      await chooseColorTheme(page, () => original);
    }
    await eventually(async () => assert.equal((await theme()).kind, before.kind));
  });

  step(`Resume of a ${LONG_THREAD.toLocaleString("en")}-message thread shows its newest message within ${NEWEST_WITHIN_MS} ms and scrolls back a page within ${EARLIER_PAGE_WITHIN_MS} ms`, async () => {
    const window = await openWindow(`folder=${encodeURIComponent(history)}`);
    const messageNumbers = (entries) => entries.flatMap((entry) => /^(?:You|Agent) long message (\d+) /.exec(entry.text)?.[1] ?? []).map(Number);
    try {
      // The first transcript of this window (the browser has had webviews before: the
      // baseline's, the other steps').
      const { frame, clicked, shownAt, first } = await resumeLongThread(window, "history");
      timings.resumeToNewestMs = shownAt - clicked;
      timings.resume = await transcriptOpening(frame, clicked);
      describeOpening(`${LONG_THREAD} messages, Resume → newest message on screen, the first transcript of a window`, timings.resume);
      await eventually(async () => assert.deepEqual((await treeRows(window, THREADS)).map((r) => [r.label, r.icon]).at(-1), ["long thread", "debug-start"]));
      await screenshot("02a-long-thread", window);
      console.log(`[e2e] ${LONG_THREAD} messages: Resume → newest message on screen in ${timings.resumeToNewestMs} ms`);
      // As the browser's first webview below: what VS Code's webview host waits for its
      // service worker is VS Code's (docs/benchmarks.md, "whose 2 s"), 44–172 ms a window's
      // first transcript in CI runs whose totals spread 817–1,040 ms; the rest is asserted.
      const { workerWaitMs, restMs } = timings.resume;
      assert.ok(restMs <= NEWEST_WITHIN_MS, `newest message after ${timings.resumeToNewestMs} ms: beside VS Code's ${workerWaitMs} ms wait for its webview's service worker, ${restMs} ms (at most ${NEWEST_WITHIN_MS})`);

      // Scrolling back: Home (the keyboard's way to the top) brings the page before, and the
      // reader stays where they were; each page is timed from the key press.
      await frame.locator("#feed > .entry").last().click();
      /** Presses `key` and waits for the page it asks for; (the page's time, what is shown). */
      const pageBy = async (key, direction) => {
        const shownAt = () => frame.evaluate((name) => Number(document.body.dataset[name] ?? 0), `${direction}ShownAt`);
        const before = await shownAt();
        const pressed = Date.now();
        await window.keyboard.press(key);
        const at = await eventually(async () => {
          const stamp = await shownAt();
          assert.ok(stamp > before, `a ${direction} page is on screen`);
          return stamp;
        });
        const entries = await transcriptEntries(frame);
        const numbers = messageNumbers(entries);
        assert.deepEqual(numbers, numbers.map((_, n) => numbers[0] + n), "oldest first, none missing, none twice");
        assert.ok(entries.length <= MAX_LOADED, `${entries.length} entries in the page (at most ${MAX_LOADED})`);
        return { ms: at - pressed, numbers };
      };
      timings.earlierPageMs = [];
      let oldest = messageNumbers(first)[0];
      for (let page = 1; page <= EARLIER_PAGES; page++) {
        const { ms, numbers } = await pageBy("Home", "earlier");
        timings.earlierPageMs.push(ms);
        assert.ok(numbers[0] < oldest, `page ${page} starts earlier: ${numbers[0]} < ${oldest}`);
        assert.equal(numbers.at(-1), LONG_THREAD, "the newest is still there");
        oldest = numbers[0];
      }
      const sorted = [...timings.earlierPageMs].sort((a, b) => a - b);
      timings.earlierPageMedianMs = sorted[Math.floor(sorted.length / 2)];
      console.log(`[e2e] ${LONG_THREAD} messages: Home → the page before on screen in ${timings.earlierPageMs.join(", ")} ms (median ${timings.earlierPageMedianMs})`);
      await screenshot("02b-long-thread-earlier", window);
      assert.ok(timings.earlierPageMedianMs <= EARLIER_PAGE_WITHIN_MS, `a page back in ${timings.earlierPageMedianMs} ms (median; at most ${EARLIER_PAGE_WITHIN_MS})`);
      writeTimings();

      // Further back than a transcript keeps loaded: the newest are let go (the page stays
      // bounded however far the reader goes), and End brings them back, page by page.
      let numbers = [];
      for (let page = EARLIER_PAGES + 1; page <= BOUNDED_PAGES; page++) {
        ({ numbers } = await pageBy("Home", "earlier"));
        assert.ok(numbers[0] < oldest, `page ${page} starts earlier: ${numbers[0]} < ${oldest}`);
        oldest = numbers[0];
      }
      assert.ok(numbers.at(-1) < LONG_THREAD, `the newest were let go: the page ends at ${numbers.at(-1)}`);
      for (let page = 1; numbers.at(-1) < LONG_THREAD; page++) {
        assert.ok(page <= BOUNDED_PAGES, "back at the newest within as many pages");
        const newest = numbers.at(-1);
        ({ numbers } = await pageBy("End", "later"));
        assert.ok(numbers.at(-1) > newest, `page ${page} ends later: ${numbers.at(-1)} > ${newest}`);
        // The entries let go above did not move the reader: where End took them is on screen.
        const visible = messageNumbers((await visibleEntries(frame)).map((text) => ({ text })));
        assert.ok(visible.includes(newest), `message ${newest} still on screen (${visible.join(", ")})`);
      }
      console.log(`[e2e] ${LONG_THREAD} messages: ${BOUNDED_PAGES} pages back and down again, at most ${MAX_LOADED} entries loaded throughout`);
    } catch (error) {
      await window.screenshot({ path: path.join(root, "screenshots", "failed-long-thread-window.png") }).catch(() => undefined);
      throw error;
    } finally {
      await window.close();
    }
  });

  step(`the first webview after the browser starts: the ${LONG_THREAD.toLocaleString("en")}-message thread's beside the empty webview's`, async () => {
    // Two browsers started now, each with one window opened as a person opens VS Code: in
    // the first, the empty webview is the first webview, opened as soon as the window has
    // settled; in the second, the long thread's transcript, resumed as soon. Opened this
    // early, a webview waits for VS Code's webview service worker (~2 s here, an empty one
    // too; a few seconds later it does not); what is left is ours, and it stays in budget.
    const firstWebview = async (folder, open) => {
      const fresh = await launchBrowser();
      try {
        const window = await openWindow(`folder=${encodeURIComponent(folder)}`, fresh);
        return await open(window);
      } finally {
        await fresh.close();
      }
    };
    timings.emptyWebview.firstOfBrowser = await firstWebview(archive, async (window) => {
      await settledFolder(window, "archive");
      return openEmptyWebview(window, 1);
    });
    describeOpening("an empty webview, the first of a browser just started", timings.emptyWebview.firstOfBrowser);
    timings.resumeFirstOfBrowser = await firstWebview(archive, async (window) => {
      const { frame, clicked } = await resumeLongThread(window, "archive");
      await screenshot("02c-long-thread-first-of-browser", window);
      return transcriptOpening(frame, clicked);
    });
    describeOpening(`${LONG_THREAD} messages, Resume → newest message on screen, the first webview of a browser just started`, timings.resumeFirstOfBrowser);
    writeTimings();
    const { restMs, workerWaitMs } = timings.resumeFirstOfBrowser;
    assert.ok(restMs <= NEWEST_WITHIN_MS, `beside VS Code's ${workerWaitMs} ms wait for its webview's service worker, ${restMs} ms (at most ${NEWEST_WITHIN_MS})`);
  });

  step("Resume of a thread recorded on another branch asks first; Cancel does nothing", async () => {
    const before = await treeOutline(page, THREADS);
    await clickInlineAction(page, THREADS, "payment retries", "Resume", "feature/payments");
    await dialog(page).waitFor();
    const shown = await dialogText(page);
    assert.equal(shown.message, "“payment retries” was recorded somewhere else. Continue it here?");
    assert.match(shown.detail, /Branch: feature\/payments → main \(blocks\)/);
    assert.deepEqual(
      shown.buttons.filter((title) => ["Continue here", "Fork into a new thread", "Cancel"].includes(title)).sort(),
      ["Cancel", "Continue here", "Fork into a new thread"],
    );
    await screenshot("03-drift-modal");
    await clickDialogButton(page, "Cancel");
    assert.equal(await activeTab(page), "fix login", "no transcript opened");
    assert.ok(!(await tabLabels(page)).includes("payment retries"));
    assert.deepEqual(await treeOutline(page, THREADS), before, "no thread was added or moved");
    assert.equal((await treeRows(page, THREADS)).find((row) => row.label === "fix login").icon, "debug-start", "fix login is still open here");
    await screenshot("04-drift-cancel");
  });

  step("Fork from the drift modal starts a new thread on this branch and opens it", async () => {
    await clickInlineAction(page, THREADS, "payment retries", "Resume", "feature/payments");
    await dialog(page).waitFor();
    await clickDialogButton(page, "Fork into a new thread");
    // The fork carries the title and conversation, on this branch, open here; the original stays.
    await eventually(async () =>
      assert.deepEqual(
        (await treeRows(page, THREADS)).slice(0, 7).map((row) => [row.label, row.icon]),
        [
          ["shop", "root-folder"],
          ["main", "git-branch"],
          ["payment retries", "debug-start"],
          ["fix login", "comment-discussion"],
          ["older thread", "comment-discussion"],
          ["add a dark mode toggle", "comment-discussion"],
          ["feature/payments", "git-branch"],
        ],
      ),
    );
    assert.equal((await treeRows(page, THREADS))[7].label, "payment retries");
    await eventually(async () => assert.equal(await activeTab(page), "payment retries"));
    const fork = await transcriptFrame(page, "payment retries");
    await eventually(async () => assert.ok((await transcriptEntries(fork)).some((entry) => entry.text === "Agent payments message 2 (assistant)")));
    await screenshot("05-drift-fork");
  });

  step("Continue here from the drift modal resumes the thread itself", async () => {
    await clickInlineAction(page, THREADS, "payment retries", "Resume", "feature/payments");
    await dialog(page).waitFor();
    await clickDialogButton(page, "Continue here");
    await eventually(async () => assert.equal(await activeTab(page), "payment retries"));
    const frame = await transcriptFrame(page, "payment retries", { threadId: ids.payments });
    await eventually(async () => {
      const said = (await transcriptEntries(frame)).map((entry) => entry.text);
      assert.ok(said.includes("You payments message 1 (user)"), said.join("\n"));
      assert.ok(said.includes("Agent payments message 2 (assistant)"));
      assert.match(said.at(-1), /^Continued in a changed workspace: Branch: feature\/payments → main \(blocks\)$/, "the accepted drift is part of the thread now");
    });
    // The drift and what to do about it: a banner at the top, kept in view.
    const banner = frame.locator("#banner .banner");
    await banner.waitFor();
    assert.equal(await banner.getAttribute("aria-label"), "The workspace is not where this thread was recorded");
    const said = await banner.innerText();
    assert.match(said, /Branch: feature\/payments → main \(blocks\) The agent's commits and edits are on feature\/payments: check it out to continue where it was/);
    assert.ok((await banner.evaluate((element) => element.getBoundingClientRect().top)) < 20, "at the top of the view");
    await screenshot("06-drift-banner");
    // Its button opens the restore report.
    await banner.locator("button", { hasText: "Show restore report" }).click();
    await eventually(async () => assert.equal(await activeTab(page), "Restore report: payment retries"));
    await page.keyboard.press("Control+w");
  });

  step("Rename from the context menu retitles the row", async () => {
    await contextMenu(page, THREADS, "draft notes", "Rename…");
    await answerInput(page, "release notes draft");
    await eventually(async () => {
      const outline = await treeOutline(page, THREADS);
      assert.ok(outline.includes("    release notes draft"), outline.join("\n"));
      assert.ok(!outline.includes("    draft notes"));
    });
    await screenshot("07-rename");
  });

  step("Archive from the context menu takes the row out of the view", async () => {
    await contextMenu(page, THREADS, "stale experiment", "Archive");
    await eventually(async () => assert.ok(!(await treeOutline(page, THREADS)).includes("    stale experiment")));
    await screenshot("08-archive");
  });

  step("Delete from the context menu asks, then removes the thread", async () => {
    await contextMenu(page, THREADS, "scratch", "Delete…");
    await dialog(page).waitFor();
    assert.equal((await dialogText(page)).message, "Delete “scratch”? Its history cannot be recovered.");
    await clickDialogButton(page, "Delete");
    await eventually(async () =>
      assert.deepEqual((await treeOutline(page, THREADS)).slice(-3), ["docs-site", "  main", "    release notes draft"]),
    );
    await screenshot("09-delete");
  });

  step("Resume of a thread another window holds says who has it, and marks its row", async () => {
    // Another editor (its own server process, same data directory) has the thread open.
    const other = new Harness(sessiond, home, [docs]);
    try {
      const report = await other.request("thread/resume", { threadId: ids.draft });
      assert.equal(report.status, "ready");
      await clickInlineAction(page, THREADS, "release notes draft", "Resume");
      await eventually(async () =>
        assert.ok(
          (await notifications(page)).some((text) => /^Could not resume the thread: The thread is open in another session\..*e2e-harness/.test(text)),
          (await notifications(page)).join("\n"),
        ),
      );
      await eventually(async () => assert.equal((await treeRows(page, THREADS)).find((row) => row.label === "release notes draft").icon, "lock"));
      assert.equal((await treeRows(page, THREADS)).find((row) => row.label === "payment retries").icon, "debug-start", "the open thread stays open");
      await screenshot("10-open-elsewhere");
    } finally {
      await other.stop();
    }
  });

  step("a checkout moves the current-branch mark, and flags threads recorded on the old branch", async () => {
    const marks = async () => {
      const rows = await treeRows(page, THREADS);
      return [rows[1].label, rows[1].description, rows.find((row) => row.label === "fix login").icon];
    };
    git(shop, "checkout", "-q", "-b", "feature/ui");
    await eventually(async () => assert.deepEqual(await marks(), ["main", "", "warning"]));
    await screenshot("11-checkout");
    git(shop, "checkout", "-q", "main");
    await eventually(async () => assert.deepEqual(await marks(), ["main", "current", "comment-discussion"]));
  });

  step("the view follows what other clients and other sessiond processes record, without a refresh", async () => {
    const rowsBefore = await treeOutline(page, THREADS);
    assert.ok(rowsBefore.indexOf("    older thread") > 2, "older thread is not on top yet");
    // Another client (a terminal agent, another editor) on the same server, over WebSocket.
    execFileSync(sessiond, ["client", "record", ids.older, "--message", "recorded from a terminal"], {
      cwd: shop,
      env: { ...process.env, SESSIOND_HOME: home },
      stdio: ["ignore", "ignore", "inherit"],
    });
    await eventually(async () => {
      const outline = await treeOutline(page, THREADS);
      assert.deepEqual(outline.slice(0, 3), ["shop", "  main", "    older thread"], outline.join("\n"));
    });
    assert.match((await treeRows(page, THREADS)).find((row) => row.label === "older thread").description, /^just now/);
    await (await treeRow(page, THREADS, "older thread")).click();
    const older = await transcriptFrame(page, "older thread");
    const said = async () => (await transcriptEntries(older)).map((entry) => entry.text).join("\n");
    await eventually(async () => assert.match(await said(), /recorded from a terminal/));
    // The open transcript follows what is recorded next, without being opened again.
    execFileSync(sessiond, ["client", "record", ids.older, "--message", "and again, while you read"], {
      cwd: shop,
      env: { ...process.env, SESSIOND_HOME: home },
      stdio: ["ignore", "ignore", "inherit"],
    });
    await eventually(async () => assert.match(await said(), /and again, while you read$/));
    // Another sessiond process (another editor window, an agent harness) on the same data
    // directory starts a thread: this window's server sees the file and announces it.
    const other = new Harness(sessiond, home, [docs]);
    try {
      await other.recordThread(docs, "from another editor", conversation("other", 2));
    } finally {
      await other.stop();
    }
    await eventually(async () =>
      assert.deepEqual((await treeOutline(page, THREADS)).slice(-4), ["docs-site", "  main", "    from another editor", "    release notes draft"]),
    );
    await screenshot("12-live-update");
  });

  step("an imported Claude Code session: Resume shows it read-only, and Resume in Claude Code continues it in a terminal", async () => {
    const row = (await treeRows(page, THREADS)).find((candidate) => candidate.label === "add a dark mode toggle");
    assert.match(row.description, / · Claude Code$/, "the row names the agent that keeps the session");
    await clickInlineAction(page, THREADS, "add a dark mode toggle", "Resume");
    await eventually(async () => assert.equal(await activeTab(page), "add a dark mode toggle"));
    const frame = await transcriptFrame(page, "add a dark mode toggle");
    await eventually(async () => {
      const said = (await transcriptEntries(frame)).map((entry) => entry.text);
      assert.ok(said.includes("You add a dark mode toggle"), said.join("\n"));
      assert.ok(said.includes("Claude Code The toggle goes in the header; the theme is a CSS variable."), "the agent's words, under its name");
      assert.ok(said.some((text) => /^✓ TodoWrite done Arguments Result/.test(text)), `its tool call, with its arguments and result collapsed: ${said.join("\n")}`);
    });
    assert.match(await frame.locator("#notice").innerText(), /A Claude Code session, shown read-only: Resume in Claude Code \(in the title bar\) continues it there\./);
    await eventually(async () =>
      assert.deepEqual(
        (await treeRows(page, TODOS)).map((todo) => [todo.label, todo.description]),
        [["write the toggle test", "in progress"]],
      ),
    );
    const offer = page.locator(".notification-toast", { hasText: "is a Claude Code session" });
    await offer.waitFor();
    assert.equal(
      await offer.locator(".notification-list-item-message").innerText(),
      "“add a dark mode toggle” is a Claude Code session: sessiond shows it, Claude Code continues it.",
    );
    await screenshot("13-imported-session");
    // From the transcript's title bar (the notification offers the same).
    await page.locator('.editor-group-container.active .editor-actions .action-label[aria-label="Resume in Claude Code"]').click();
    // The agent's own resume ran in the session's directory, in a terminal named after it.
    await eventually(async () => assert.equal(existsSync(agentLog) ? readFileSync(agentLog, "utf8") : "", `${shop} --resume ${CLAUDE_SESSION}\n`), 30_000);
    await eventually(async () => assert.ok((await page.locator(".part.panel").innerText()).includes("Claude Code"), "the terminal is shown"));
    await screenshot("14-resume-in-claude-code");
  });

  step("Show Usage: each day's tokens by model as a chart, and a table by project, from the server's index", async () => {
    await runCommand(page, "sessiond: Show Usage");
    await eventually(async () => assert.equal(await activeTab(page), "sessiond Usage"));
    const frame = await usageFrame(page);
    await eventually(async () => {
      const models = await frame.locator("ul.legend li").allInnerTexts();
      assert.ok(models.includes("claude-sonnet-4-5-20250929"), `the imported session's model: ${models.join(", ")}`);
      assert.ok((await frame.locator("svg rect.bar").count()) > 0, "a bar for its day");
      const projects = await frame.locator("#projects td.project").allInnerTexts();
      assert.ok(projects.includes(shop), `its project: ${projects.join(", ")}`);
    });
    assert.match(await frame.locator("#summary").innerText(), /tokens in \d+ model calls · \$/);
    await runCommand(page, "Notifications: Clear All Notifications"); // the earlier steps' toasts
    await screenshot("15-usage");
  });
});


process.on("exit", () => {
  if (root && existsSync(root)) console.log(`[e2e] screenshots: ${path.join(root, "screenshots")}`);
});