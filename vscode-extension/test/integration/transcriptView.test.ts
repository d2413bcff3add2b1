// The transcript after Resume, against the real server: what the agent did (a failed
// command, an edit and its diff from the blob store, todos as they changed, turn costs),
// paging back and forward a page at a time, opening at a seq, following new items, and the
// drift banner.
import {
  activateExtension,
  EXTENSION_DIR,
  fromWebview,
  git,
  harnessClient,
  makeRepo,
  serverCommand,
  shownTranscript,
  tempDir,
  textOf,
  vscodeStub,
  waitFor,
  type ActivatedExtension,
} from "../support/harness";
import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import * as path from "node:path";
import { after, before, describe, it } from "node:test";
import { Uri } from "../support/vscode";
import type { ToWebview } from "../../src/transcript/messages";
import { PAGE } from "../../src/transcript/panel";

const LONG = 700;

describe("the transcript view", () => {
  const root = tempDir("sessiond-ext-transcript-");
  const home = `${root.path}/home`;
  let repo = "";
  let extension: ActivatedExtension;
  const ids = { work: "", long: "", drifted: "" };

  before(async () => {
    repo = makeRepo(root.path, "shop");
    writeFileSync(path.join(repo, "app.py"), "def login(user):\n    return False\n");
    const harness = harnessClient(home, repo);
    const work = await harness.request("thread/start", { cwd: repo, title: "fix login" });
    ids.work = work.thread.threadId;
    const record = (items: [Record<string, unknown>, ...Record<string, unknown>[]]) => harness.request("thread/record", { threadId: ids.work, sessionId: work.sessionId, items });
    await record([
      { type: "turn", id: "t1-start", turnId: "t1", phase: "started" },
      { type: "message", id: "m1", turnId: "t1", role: "user", content: "the login **always** fails" },
      { type: "todos", id: "todo-1", turnId: "t1", items: [{ id: "1", content: "find the bug", status: "in_progress" }] },
      { type: "operation", id: "op1-s", operationId: "op1", turnId: "t1", tool: "bash", effect: "side_effect", state: "started", arguments: { command: "pytest -q" } },
      { type: "operation", id: "op1-f", operationId: "op1", turnId: "t1", tool: "bash", effect: "side_effect", state: "failed", result: "FAILED test_login.py::test_ok" },
    ]);
    const edit = await harness.request("fs/applyEdit", {
      threadId: ids.work,
      sessionId: work.sessionId,
      operationId: "edit-1",
      path: "app.py",
      content: "def login(user):\n    return user.ok\n",
    });
    assert.equal(edit.outcome, "applied");
    await record([
      { type: "file_edit", id: "e-blind", turnId: "t1", path: path.join(repo, "notes.md"), beforeSha: "1".repeat(64), afterSha: "2".repeat(64) },
      { type: "todos", id: "todo-2", turnId: "t1", items: [{ id: "1", content: "find the bug", status: "completed" }, { id: "2", content: "add a test", status: "pending" }] },
      { type: "cost", id: "c1", turnId: "t1", model: "model-a", inputTokens: 2000, outputTokens: 150, usd: 0.031 },
      { type: "message", id: "m2", turnId: "t1", role: "assistant", content: "Fixed: `login` returned False." },
      { type: "turn", id: "t1-end", turnId: "t1", phase: "completed" },
    ]);
    await harness.request("thread/close", { threadId: ids.work, sessionId: work.sessionId });

    const long = await harness.request("thread/start", { cwd: repo, title: "long thread" });
    ids.long = long.thread.threadId;
    const message = (n: number) => ({ type: "message", id: `l${n}`, role: n % 2 ? "user" : "assistant", content: `long message ${n}` });
    const rest = Array.from({ length: LONG - 1 }, (_, n) => message(n + 2));
    await harness.request("thread/record", { threadId: ids.long, sessionId: long.sessionId, items: [message(1), ...rest] });
    await harness.request("thread/close", { threadId: ids.long, sessionId: long.sessionId });

    git(repo, "checkout", "-q", "-b", "feature/payments");
    const drifted = await harness.request("thread/start", { cwd: repo, title: "payment retries" });
    ids.drifted = drifted.thread.threadId;
    await harness.request("thread/record", {
      threadId: ids.drifted,
      sessionId: drifted.sessionId,
      items: [{ type: "operation", id: "d1", operationId: "deploy-1", tool: "deploy", effect: "side_effect", state: "started" }],
    });
    await harness.request("thread/close", { threadId: ids.drifted, sessionId: drifted.sessionId });
    git(repo, "checkout", "-q", "main");
    await harness.stop();
    extension = await activateExtension({ command: serverCommand(home), folders: [repo] });
  });

  after(async () => {
    await extension?.deactivate();
    root.remove();
  });

  const thread = async (threadId: string) => (await extension.api.client.request("thread/list", { limit: 10 })).threads.find((t) => t.threadId === threadId)!;
  const texts = async (threadId: string) => (await shownTranscript(extension.api, threadId)).entries.map((entry) => entry.text);

  it("shows what the agent did, in order: the request, todos, a failed command, the edits, the turn's cost", async () => {
    await extension.api.sessions.resume(await thread(ids.work));
    assert.deepEqual(await texts(ids.work), [
      `▸ Thread started · branch main · ${repo}`,
      "You the login always fails",
      "Todos 1 new ◐ find the bug in progress new",
      "✗ bash pytest -q failed Error FAILED test_login.py::test_ok",
      "✓ fs/applyEdit done",
      "✎ Edited app.py Open diff",
      "✎ Edited notes.md Open diff",
      "Todos 1 new · 1 completed ● find the bug completed now completed ○ add a test pending new",
      "Agent Fixed: login returned False.",
      "Turn completed · $0.03 · 2.0k in / 150 out",
      `▸ Resumed · branch main · ${repo}`,
    ]);
    const shown = await shownTranscript(extension.api, ids.work);
    assert.match(shown.entries[3]!.html, /class="entry tool failed"/, "the failed call is marked");
    assert.match(shown.entries[1]!.html, /<strong>always<\/strong>/, "Markdown is rendered");
    // The edit recorded with hashes only names a file that is not there: resume says so.
    assert.match(shown.banner ?? "", /<strong>file history invalidated<\/strong>: changed since the last edit: .*notes\.md/);
  });

  it("Open diff shows the file before and after the edit, from the blob store", async () => {
    const shown = await shownTranscript(extension.api, ids.work);
    const edit = shown.entries.find((entry) => entry.text === "✎ Edited app.py Open diff")!;
    await fromWebview(extension.api, ids.work, { type: "diff", key: edit.key });
    const diff = vscodeStub.executed.find((run) => run.command === "vscode.diff");
    assert.ok(diff, `the diff editor opens: ${JSON.stringify(vscodeStub.messages)}`);
    const [before, after, title] = diff.args as [Uri, Uri, string];
    assert.equal(title, "app.py (recorded edit: before ↔ after)");
    assert.equal(path.basename(before.path), "app.py", "named after the file: the diff editor picks its language");
    const provider = vscodeStub.contentProviders.get(before.scheme)!;
    assert.equal(await provider.provideTextDocumentContent(before), "def login(user):\n    return False\n");
    assert.equal(await provider.provideTextDocumentContent(after), "def login(user):\n    return user.ok\n");
  });

  it("an edit recorded with its hashes only says its content was not recorded, and opens nothing", async () => {
    vscodeStub.executed = [];
    const blind = (await shownTranscript(extension.api, ids.work)).entries.find((entry) => entry.text === "✎ Edited notes.md Open diff")!;
    await fromWebview(extension.api, ids.work, { type: "diff", key: blind.key });
    assert.deepEqual(vscodeStub.executed, []);
    const after = (await shownTranscript(extension.api, ids.work)).entries.find((entry) => entry.key === blind.key)!;
    assert.equal(after.text, "✎ Edited notes.md content not recorded");
  });

  it("opens a long thread at its newest page and pages back to the start, never more than a page at a time", async () => {
    await extension.api.sessions.openTranscript(await thread(ids.long));
    const numbers = async () => (await texts(ids.long)).flatMap((text) => /^(?:You|Agent) long message (\d+)$/.exec(text)?.[1] ?? []).map(Number);
    const first = await numbers();
    assert.equal(first.at(-1), LONG, "the newest message");
    assert.ok(first.length <= PAGE && first.length > PAGE - 5, `one page: ${first.length} messages`);
    assert.equal((await shownTranscript(extension.api, ids.long)).hasEarlier, true);
    for (let page = 1; (await shownTranscript(extension.api, ids.long)).hasEarlier; page++) {
      assert.ok(page < 10, "ends");
      await fromWebview(extension.api, ids.long, { type: "earlier" });
      const pages = (await shownTranscript(extension.api, ids.long)).pages;
      assert.ok(pages.at(-1)!.front.length <= PAGE, "a page at a time");
      assert.equal(pages.at(-1)!.back.length, 0);
    }
    assert.deepEqual(await numbers(), Array.from({ length: LONG }, (_, n) => n + 1), "every message once, in order");
    assert.equal((await texts(ids.long))[0], `▸ Thread started · branch main · ${repo}`);
  });

  it("opens at a seq (a search hit) with the items around it, and pages both ways from there", async () => {
    extension.api.transcripts.close(ids.long);
    await vscodeStub.commands.get("sessiond.openTranscript")!(await thread(ids.long), { seq: 351, highlight: ["message"] });
    const shown = await shownTranscript(extension.api, ids.long);
    assert.equal(shown.focusSeq, 351);
    assert.ok(shown.entries.some((entry) => entry.seq === 351 && entry.text === "Agent long message 350"));
    assert.deepEqual([shown.hasEarlier, shown.hasLater], [true, true]);
    const lastSeq = shown.entries.at(-1)!.seq;
    await fromWebview(extension.api, ids.long, { type: "later" });
    const later = await shownTranscript(extension.api, ids.long);
    assert.equal(later.entries.find((entry) => entry.seq > lastSeq)?.seq, lastSeq + 1, "the next page follows on");
    assert.equal(later.pages.at(-1)!.direction, "later");
  });

  it("follows what another client records into the open thread", async () => {
    await extension.api.sessions.closeActive(); // this window held the thread since its Resume
    await extension.api.sessions.openTranscript(await thread(ids.work));
    const other = harnessClient(home, repo);
    try {
      // Another process holds the thread's writer for a moment (an agent harness), then closes.
      const report = await other.request("thread/resume", { threadId: ids.work });
      assert.equal(report.status, "ready");
      await other.request("thread/record", {
        threadId: ids.work,
        sessionId: report.session.sessionId!,
        items: [{ type: "message", id: "late", role: "assistant", content: "one more thing" }],
      });
      await other.request("thread/close", { threadId: ids.work, sessionId: report.session.sessionId! });
    } finally {
      await other.stop();
    }
    await waitFor("the new message in the transcript", async () => ((await texts(ids.work)).includes("Agent one more thing") ? true : undefined), 20_000);
  });

  it("a call that ran a sub-agent holds the sub-agent's transcript, loaded when its block is opened", async () => {
    const client = extension.api.client;
    const parent = await client.request("thread/start", { cwd: repo, title: "with a sub-agent" });
    // A sub-agent's thread under its parent, naming the call that started it.
    const child = await client.request("thread/start", { cwd: repo, title: "look around", parentThreadId: parent.thread.threadId, parentOperationId: "task-1" });
    await client.request("thread/record", {
      threadId: child.thread.threadId,
      sessionId: child.sessionId,
      items: [{ type: "message", id: "c1", role: "assistant", content: "found **it**" }],
    });
    await client.request("thread/close", { threadId: child.thread.threadId, sessionId: child.sessionId });
    await client.request("thread/record", {
      threadId: parent.thread.threadId,
      sessionId: parent.sessionId,
      items: [{ type: "operation", id: "p1", operationId: "task-1", tool: "Task", effect: "read", state: "committed" }],
    });
    await client.request("thread/close", { threadId: parent.thread.threadId, sessionId: parent.sessionId });
    await extension.api.sessions.openTranscript(parent.thread);
    const call = (await shownTranscript(extension.api, parent.thread.threadId)).entries.find((entry) => entry.key === "op:task-1")!;
    assert.match(call.html, new RegExp(`<details class="subagent" data-child="${child.thread.threadId}">`), "found by thread/list {parentThreadId}");
    assert.match(textOf(call.html), /Sub-agent: look around · 1 item/);
    await fromWebview(extension.api, parent.thread.threadId, { type: "child", threadId: child.thread.threadId });
    const panel = extension.api.transcripts.get(parent.thread.threadId)!.panel as unknown as { posted: ToWebview[] };
    const page = panel.posted.find((message) => message.type === "child");
    assert.ok(page?.type === "child");
    assert.deepEqual(page.back.map((entry) => textOf(entry.html)).slice(1), ["Agent found it"], "the sub-agent's transcript, its own first page");
    assert.equal(page.hasMore, false);
  });

  it("a thread continued in a changed workspace shows the drift and what to review in a banner", async () => {
    vscodeStub.answers.push((shown) => (shown.modal ? "Continue here" : undefined));
    await extension.api.sessions.resume(await thread(ids.drifted));
    const banner = (await shownTranscript(extension.api, ids.drifted)).banner ?? "";
    assert.match(banner, /The workspace is not where this thread was recorded/);
    assert.match(banner, /Branch: feature\/payments → main \(blocks\)<\/strong> The agent&#39;s commits and edits are on feature\/payments/);
    assert.match(banner, /<strong>deploy<\/strong> \(started\): needs review\. Started, no outcome recorded, and it has side effects/);
    assert.match((await texts(ids.drifted)).at(-1)!, /^Continued in a changed workspace: Branch: feature\/payments → main \(blocks\)$/);
    const deploy = (await shownTranscript(extension.api, ids.drifted)).entries.find((entry) => entry.text.startsWith("… deploy"));
    assert.match(deploy?.text ?? "", /needs review/, "the call itself is marked too");
  });

  it("the webview's HTML carries its script and stylesheet, the first page is posted without waiting for the webview, and says when each step of the opening happened", async () => {
    extension.api.transcripts.close(ids.work);
    const clicked = Date.now();
    await extension.api.sessions.resume(await thread(ids.work));
    const panel = extension.api.transcripts.get(ids.work)!.panel as unknown as { webview: { html: string }; posted: ToWebview[] };
    const html = panel.webview.html;
    // Nothing for VS Code's webview service worker to fetch after the HTML: both are in it,
    // and the policy lets in only what carries this document's nonce.
    const nonce = /script-src 'nonce-([^']+)'/.exec(html)?.[1] ?? "";
    assert.ok(nonce.length >= 16, html.slice(0, 400));
    assert.ok(html.includes(`style-src 'nonce-${nonce}'`), "styles: only the stylesheet it carries");
    assert.doesNotMatch(html, /<link\b|<script\b[^>]*\bsrc=/, "no stylesheet or script to load");
    for (const [tag, file] of [["style", "webview.css"], ["script", "webview.js"]]) {
      assert.ok(html.includes(`<${tag} nonce="${nonce}">${readFileSync(path.join(EXTENSION_DIR, "dist", file!), "utf8")}</${tag}>`), `dist/${file} as built, in a <${tag}>`);
    }
    // Posted before the webview's script said "ready" (VS Code holds it until the document
    // has loaded): no round trip before the first page.
    assert.deepEqual(panel.posted.map((message) => message.type).slice(0, 2), ["init", "page"]);
    const init = panel.posted.find((message) => message.type === "init");
    assert.ok(init?.type === "init" && init.opened, "the first page's init carries the opening's timings");
    const { requestedAt, panelAt, readAt, renderedAt } = init.opened;
    assert.ok(clicked <= requestedAt && requestedAt <= panelAt && panelAt <= readAt && readAt <= renderedAt, JSON.stringify(init.opened));
  });
});
