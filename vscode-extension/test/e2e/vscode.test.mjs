// The extension in a real VS Code (code-server) driven by headless Chromium: every step is an
// assertion on what the workbench shows, then a screenshot. The server is the one a user gets
// from the wheel; the threads were recorded through it; nothing is stubbed.
//
// `npm run test:e2e` (installs code-server, Node 24, chromium and playwright-core when missing;
// see tools.mjs). SESSIOND_E2E_MEDIA=DIR also writes the README's screenshots into DIR.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { copyFileSync, existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
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
  startCodeServer,
  writeAgentStub,
  writeClaudeSession,
} from "./fixture.mjs";
import { ensureTools } from "./tools.mjs";
import {
  activeTab,
  answerInput,
  clickDialogButton,
  clickInlineAction,
  codeLens,
  contextMenu,
  describeWindow,
  dialog,
  dialogText,
  editorKey,
  editorText,
  eventually,
  findInEditor,
  notifications,
  statusBarTexts,
  tabLabels,
  treeOutline,
  treeRow,
  treeRows,
} from "./workbench.mjs";

const THREADS = "Threads";
/** Messages in the long thread: far more than a resume brings back at once. */
const LONG_THREAD = 2500;
const TODOS = "Todos";
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
  "03-drift-modal": "drift.png",
  "14-resume-in-claude-code": "resume-in-agent.png",
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
let codeServer;
let notes = "";
let history = "";
let shotCount = 0;
const ids = {};
const CLAUDE_SESSION = "7d3f0c2e-5b1a-4c8e-9f61-2a4b6c8d0e13";
let agentLog = "";

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
    docs = makeRepo(path.join(root, "work"), "docs-site");
    notes = makeRepo(path.join(root, "work"), "notes");
    history = makeRepo(path.join(root, "work"), "history");

    // An agent harness records the threads through the installed server, oldest first.
    const harness = new Harness(sessiond, home, [shop, docs]);
    ids.older = await harness.recordThread(shop, "older thread", conversation("older", 2));
    git(shop, "checkout", "-q", "-b", "feature/payments");
    ids.payments = await harness.recordThread(shop, "payment retries", conversation("payments", 2));
    git(shop, "checkout", "-q", "main");
    ids.login = await harness.recordThread(shop, "fix login", [
      ...conversation("login", 4),
      { type: "todos", id: "login-todos", items: [{ id: "1", content: "write a regression test", status: "in_progress" }] },
      { type: "cost", id: "login-cost", model: "model-a", inputTokens: 1200, outputTokens: 300, usd: 0.42 },
    ]);
    ids.draft = await harness.recordThread(docs, "draft notes", conversation("draft", 2));
    ids.stale = await harness.recordThread(docs, "stale experiment", conversation("stale", 2));
    ids.scratch = await harness.recordThread(docs, "scratch", conversation("scratch", 2));
    // Its own folder (and window), so that the other steps' views do not list it.
    ids.long = await harness.recordThread(history, "long thread", conversation("long", LONG_THREAD));
    await harness.stop();
    // A Claude Code session from before sessiond was installed, imported as users do.
    const projects = path.join(root, "claude/projects");
    writeClaudeSession(projects, shop, "main", CLAUDE_SESSION, "add a dark mode toggle");
    execFileSync(sessiond, ["--home", home, "import", "claude", "--from", projects], { stdio: ["ignore", "ignore", "inherit"] });
    agentLog = path.join(root, "agent-runs.log");
    writeAgentStub(root, "claude", agentLog); // root is code-server's HOME

    const workspace = path.join(root, "work/e2e.code-workspace");
    writeFileSync(workspace, JSON.stringify({ folders: [{ path: shop }, { path: docs }] }));
    codeServer = await startCodeServer(tools, { root, vsix, sessiond, home });
    stack.push(() => codeServer.stop());
    const { chromium } = createRequire(import.meta.url)(tools.playwright);
    browser = await chromium.launch({ executablePath: tools.chromium, args: CHROMIUM_FLAGS });
    stack.push(() => browser.close());
    page = await openWindow(`workspace=${encodeURIComponent(workspace)}`);
    failed = false;
  });

  /** A VS Code window on `query` (?folder= or ?workspace=), with the sessiond view shown. */
  async function openWindow(query) {
    const window = await browser.newPage({ viewport: { width: 1280, height: 800 } });
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

  step("Resume of a short thread shows its transcript (in a tab named after it), todos and cost", async () => {
    await clickInlineAction(page, THREADS, "fix login", "Resume");
    await eventually(async () => assert.equal(await activeTab(page), "fix login"));
    await eventually(async () => {
      const text = await editorText(page);
      assert.match(text, /^# fix login/m);
      assert.match(text, /login message 1 \(user\)/);
      assert.match(text, /login message 4 \(assistant\)/);
    });
    await eventually(async () =>
      assert.deepEqual(
        (await treeRows(page, TODOS)).map((row) => [row.label, row.description]),
        [["write a regression test", "in progress"]],
      ),
    );
    await eventually(async () => assert.ok((await statusBarTexts(page)).some((text) => text.includes("$0.42")), "the cost is in the status bar"));
    await eventually(async () => assert.equal((await treeRows(page, THREADS)).find((row) => row.label === "fix login").icon, "debug-start", "marked open here"));
    await screenshot("02-resume");
  });

  step(`Resume of a ${LONG_THREAD}-message thread shows its newest message at once; Load earlier messages brings older ones`, async () => {
    const window = await openWindow(`folder=${encodeURIComponent(history)}`);
    const newest = `long message ${LONG_THREAD} (assistant)`;
    const messageNumbers = (text) => [...text.matchAll(/^long message (\d+) /gm)].map((match) => Number(match[1]));
    try {
      await eventually(async () => assert.deepEqual(await treeOutline(window, THREADS), ["history", "  main", "    long thread"]));
      await clickInlineAction(window, THREADS, "long thread", "Resume");
      await eventually(async () => assert.equal(await activeTab(window), "long thread"));
      // Recorded by an agent outside any editor (no workspace folder of its own): still listed, open here.
      await eventually(async () => assert.deepEqual((await treeRows(window, THREADS)).map((row) => [row.label, row.icon]).at(-1), ["long thread", "debug-start"]));
      // On screen as the transcript opens, nobody having scrolled: the newest message, last.
      await eventually(async () => assert.equal(messageNumbers(await editorText(window)).at(-1), LONG_THREAD));
      assert.ok((await editorText(window)).split("\n").includes(newest));
      await screenshot("02a-long-thread", window);
      // Only the newest part came with the resume: the first message is not in the document.
      assert.equal(await findInEditor(window, "long message 1 (user)"), "No results");

      // At the top: the lens above the title, then the oldest message loaded so far.
      await editorKey(window, "Control+Home");
      const lens = codeLens(window, "Load earlier messages");
      await lens.waitFor();
      const top = await editorText(window);
      assert.match(top, /^# long thread$/m);
      const titleTop = await window
        .locator(".editor-group-container.active .view-lines .view-line")
        .evaluateAll((lines) => lines.find((line) => line.textContent.replace(/\u00a0/g, " ") === "# long thread")?.getBoundingClientRect().top);
      assert.ok((await lens.boundingBox()).y < titleTop, "the lens is above the first line");
      const firstShown = messageNumbers(top)[0];
      assert.ok(firstShown > 1 && firstShown < LONG_THREAD, `the first message shown is ${firstShown}`);
      assert.deepEqual(messageNumbers(top), messageNumbers(top).map((_, n) => firstShown + n), "oldest first, none missing");
      await screenshot("02b-long-thread-top", window);

      await lens.click();
      // The message just before the first one shown is in the document now (Find scrolls to
      // it), earlier ones are still to load, and the newest is still at the end.
      await eventually(async () => assert.equal(await findInEditor(window, `long message ${firstShown - 1} (`), "1 of 1"));
      assert.ok(messageNumbers(await editorText(window)).includes(firstShown - 1), "scrolled to it");
      assert.equal(await findInEditor(window, newest), "1 of 1");
      assert.equal(messageNumbers(await editorText(window)).at(-1), LONG_THREAD);
      assert.equal(await findInEditor(window, "long message 1 (user)"), "No results");
      await editorKey(window, "Control+Home");
      await lens.waitFor();
      assert.ok(messageNumbers(await editorText(window))[0] < firstShown, "the top now starts earlier");
      await screenshot("02c-load-earlier", window);
    } catch (error) {
      await window.screenshot({ path: path.join(root, "screenshots", "failed-long-thread-window.png") }).catch(() => undefined);
      throw error;
    } finally {
      await window.close();
    }
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
    await eventually(async () => {
      assert.equal(await activeTab(page), "payment retries");
      assert.match(await editorText(page), /payments message 2 \(assistant\)/);
    });
    await screenshot("05-drift-fork");
  });

  step("Continue here from the drift modal resumes the thread itself", async () => {
    await clickInlineAction(page, THREADS, "payment retries", "Resume", "feature/payments");
    await dialog(page).waitFor();
    await clickDialogButton(page, "Continue here");
    await eventually(async () => {
      assert.equal(await activeTab(page), "payment retries");
      const text = await editorText(page);
      assert.match(text, /payments message 1 \(user\)/);
      assert.match(text, /payments message 2 \(assistant\)/);
    });
    // What came back invalidated is said, with the way to the full report.
    await eventually(async () =>
      assert.ok(
        (await notifications(page)).some((text) => text.startsWith("Resumed “payment retries”, but: worktree invalidated")),
        (await notifications(page)).join("\n"),
      ),
    );
    await screenshot("06-drift-continue");
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
    const older = (await treeRows(page, THREADS)).find((row) => row.label === "older thread");
    assert.match(older.description, /^just now/);
    await (await treeRow(page, THREADS, "older thread")).click();
    await eventually(async () => assert.match(await editorText(page), /recorded from a terminal/));
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
    await eventually(async () => {
      assert.equal(await activeTab(page), "add a dark mode toggle");
      const text = await editorText(page);
      assert.match(text, /add a dark mode toggle/);
      assert.match(text, /The toggle goes in the header; the theme is a CSS variable\./);
    });
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
    await offer.locator(".monaco-button", { hasText: "Resume in Claude Code" }).click();
    // The agent's own resume ran in the session's directory, in a terminal named after it.
    await eventually(async () => assert.equal(existsSync(agentLog) ? readFileSync(agentLog, "utf8") : "", `${shop} --resume ${CLAUDE_SESSION}\n`), 30_000);
    await eventually(async () => assert.ok((await page.locator(".part.panel").innerText()).includes("Claude Code"), "the terminal is shown"));
    await screenshot("14-resume-in-claude-code");
  });
});


process.on("exit", () => {
  if (root && existsSync(root)) console.log(`[e2e] screenshots: ${path.join(root, "screenshots")}`);
});