// The acceptance path against the real Python server: list → resume (ready) → resume after a
// branch switch (needs_review) → fork → continue here → rename → archive, asserting what
// the Threads view, the dialogs and the restored views show.
import {
  activateExtension,
  harnessClient,
  findThreadNode,
  fromWebview,
  git,
  makeRepo,
  renderTree,
  serverCommand,
  shownTranscript,
  tempDir,
  vscodeStub,
  waitFor,
  type ActivatedExtension,
} from "../support/harness";
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { reportPath } from "../../src/sessions";

describe("resuming a thread from the Threads view", () => {
  const root = tempDir("sessiond-ext-flow-");
  const home = `${root.path}/home`;
  let repo = "";
  let extension: ActivatedExtension;
  let recordedThreadId = "";

  before(async () => {
    repo = makeRepo(root.path, "shop");
    // An agent harness records a thread through its own server process on the same data dir.
    const harness = harnessClient(home, repo);
    const older = await harness.request("thread/start", { cwd: repo, title: "older thread" });
    await harness.request("thread/close", { threadId: older.thread.threadId, sessionId: older.sessionId });
    const started = await harness.request("thread/start", { cwd: repo, title: "fix login" });
    recordedThreadId = started.thread.threadId;
    await harness.request("thread/record", {
      threadId: recordedThreadId,
      sessionId: started.sessionId,
      items: [
        { type: "turn", id: "t1-start", turnId: "t1", phase: "started" },
        { type: "message", id: "m1", turnId: "t1", role: "user", content: "the login form rejects valid passwords" },
        { type: "message", id: "m2", turnId: "t1", role: "assistant", content: "Found it: the hash compare is case-sensitive." },
        { type: "todos", id: "todos-1", items: [{ id: "1", content: "write a regression test", status: "in_progress" }] },
        { type: "cost", id: "cost-1", model: "model-a", inputTokens: 1200, outputTokens: 300, usd: 0.42 },
        { type: "operation", id: "op-1", operationId: "op1", tool: "bash", effect: "side_effect", state: "started" },
      ],
    });
    await harness.request("thread/close", { threadId: recordedThreadId, sessionId: started.sessionId });
    await harness.stop();
    extension = await activateExtension({ command: serverCommand(home), folders: [repo] });
  });

  after(async () => {
    await extension?.deactivate();
    root.remove();
  });

  it("lists the workspace's threads grouped by folder and branch, newest first", async () => {
    const lines = await renderTree(extension.api.threads);
    assert.equal(lines[0], "shop");
    assert.equal(lines[1], "  main — current", "the branch the folder is on");
    // The row carries the thread's spend, as the server totals it from its cost items.
    assert.match(lines[2]!, /^ {4}fix login — just now · \$0\.42$/);
    assert.match(lines[3]!, /^ {4}older thread — just now$/);
    assert.equal(lines.length, 4);
  });

  it("resumes a thread recorded here: transcript, todos, cost, and the operation to review", async () => {
    const node = await findThreadNode(extension.api.threads, "fix login");
    await vscodeStub.commands.get("sessiond.resumeThread")!(node);

    assert.equal(vscodeStub.messages.filter((m) => m.modal).length, 0, "no drift, so no modal");
    const transcript = await shownTranscript(extension.api, recordedThreadId);
    assert.equal(transcript.title, "fix login", "the transcript opens in a tab named after the thread");
    const texts = transcript.entries.map((entry) => entry.text);
    assert.ok(texts.includes("You the login form rejects valid passwords"), texts.join("\n"));
    assert.ok(texts.includes("Agent Found it: the hash compare is case-sensitive."));

    const todos = extension.api.todos.getChildren().map((todo) => extension.api.todos.getTreeItem(todo));
    assert.deepEqual(
      todos.map((item) => [item.label, item.description]),
      [["write a regression test", "in progress"]],
    );
    const cost = vscodeStub.statusBarItems.find((item) => item.visible);
    assert.equal(cost?.text, "$(credit-card) $0.42");

    // The operation to review is the banner at the top, and its button opens the report.
    assert.match(transcript.banner ?? "", /<strong>bash<\/strong> \(started\): needs review/);
    assert.ok(!vscodeStub.messages.some((m) => m.severity === "warning"), "said in the banner, not in a pop-up");
    await fromWebview(extension.api, recordedThreadId, { type: "report" });
    const report = vscodeStub.documents.find((d) => d.uri === `sessiond:/restore-report/${recordedThreadId}/Restore report: fix login`);
    assert.ok(report, "Show restore report opens it");
    assert.match(report.text, /`bash` \(op1\), started: \*\*needs_review\*\*/);
    assert.equal(extension.api.sessions.active?.thread.threadId, recordedThreadId);
    assert.equal(vscodeStub.context.get("sessiond.sessionActive"), true);
  });

  it("after a branch switch, shows the drift in a modal, and Cancel opens nothing", async () => {
    await extension.api.sessions.closeActive();
    git(repo, "checkout", "-q", "-b", "feature/login");
    vscodeStub.messages = [];
    vscodeStub.answers.push(() => "Cancel");
    await vscodeStub.commands.get("sessiond.resumeThread")!(await findThreadNode(extension.api.threads, "fix login"));

    const modal = vscodeStub.messages[0]!;
    assert.equal(modal.modal, true);
    assert.equal(modal.message, "“fix login” was recorded somewhere else. Continue it here?");
    assert.deepEqual(modal.buttons, ["Continue here", "Fork into a new thread", "Cancel"]);
    assert.match(modal.detail ?? "", /^Branch: main → feature\/login \(blocks\)$/m);
    assert.equal(extension.api.sessions.active, undefined, "needs_review opens no session");
  });

  it("Fork into a new thread starts a fork on the current branch, resumes it, and lists it", async () => {
    vscodeStub.messages = [];
    vscodeStub.answers.push(() => "Fork into a new thread");
    await vscodeStub.commands.get("sessiond.resumeThread")!(await findThreadNode(extension.api.threads, "fix login"));

    const active = extension.api.sessions.active;
    assert.ok(active, "the fork is open");
    assert.notEqual(active.thread.threadId, recordedThreadId);
    assert.equal(active.thread.forkedFrom?.["threadId"], recordedThreadId);
    assert.equal(active.thread.branch, "feature/login");
    const transcript = await shownTranscript(extension.api, active.thread.threadId);
    assert.ok(
      transcript.entries.some((entry) => entry.text === "You the login form rejects valid passwords"),
      "the fork carries the conversation",
    );
    // The server announces the fork (thread/started); the view shows it without a refresh.
    const lines = await waitFor("the fork in the tree", async () => {
      const rendered = await renderTree(extension.api.threads);
      return rendered.includes("  feature/login") ? rendered : undefined;
    });
    assert.equal(lines[1], "  feature/login", "the newest branch group comes first");
    assert.match(lines[2]!, /^ {4}fix login — just now · \$0\.42$/, "a fork keeps its thread's title");
  });

  it("Continue here resumes the original thread in the workspace as it is now", async () => {
    vscodeStub.messages = [];
    vscodeStub.answers.push(() => "Continue here");
    await vscodeStub.commands.get("sessiond.resumeThread")!(await findThreadNode(extension.api.threads, "fix login", recordedThreadId));
    assert.equal(vscodeStub.messages[0]?.modal, true);
    const active = extension.api.sessions.active;
    assert.equal(active?.thread.threadId, recordedThreadId);
    assert.ok(active?.sessionId, "a session is open after accepting the drift");
    assert.ok(!vscodeStub.messages.some((m) => m.severity === "error"), JSON.stringify(vscodeStub.messages));
  });

  it("Rename updates the row from the server's thread/updated notification", async () => {
    vscodeStub.inputs.push("login fix on the feature branch");
    await vscodeStub.commands.get("sessiond.renameThread")!(await findThreadNode(extension.api.threads, "older thread"));
    await waitFor("the new title", async () =>
      (await renderTree(extension.api.threads)).some((line) => line.includes("login fix on the feature branch")) || undefined,
    );
    assert.ok(!(await renderTree(extension.api.threads)).some((line) => line.includes("older thread")));
  });

  it("Archive removes the thread from the view; Show Archived lists it, marked archived", async () => {
    await vscodeStub.commands.get("sessiond.archiveThread")!(await findThreadNode(extension.api.threads, "fix login", recordedThreadId));
    // Its fork (same title, on feature/login) stays: only the original leaves the main group.
    await waitFor("the archived thread to leave the tree", async () =>
      (await renderTree(extension.api.threads)).filter((line) => line.includes("fix login")).length === 1 || undefined,
    );
    await assert.rejects(findThreadNode(extension.api.threads, "fix login", recordedThreadId));
    assert.ok(!vscodeStub.messages.some((m) => m.severity === "error"), JSON.stringify(vscodeStub.messages));
    await vscodeStub.commands.get("sessiond.toggleArchived")!();
    const archived = await renderTree(extension.api.threads);
    assert.ok(archived.some((line) => /^ {4}fix login — /.test(line)), archived.join("\n"));
    const row = extension.api.threads.getTreeItem(await findThreadNode(extension.api.threads, "fix login", recordedThreadId));
    assert.equal((row.iconPath as { id: string }).id, "archive", "marked archived");
    assert.equal(archived.filter((line) => line.startsWith("    ")).length, 1, "only archived threads are listed");
  });

  it("says in the banner that verification is invalidated when HEAD moved, and the report shows why", async () => {
    const client = extension.api.client;
    const started = await client.request("thread/start", { cwd: repo, title: "flaky tests" });
    const head = git(repo, "rev-parse", "HEAD");
    await client.request("thread/record", {
      threadId: started.thread.threadId,
      sessionId: started.sessionId,
      items: [{ type: "verifier", id: "v1", name: "pytest", passed: 7, total: 9, headSha: head }],
    });
    await client.request("thread/close", { threadId: started.thread.threadId, sessionId: started.sessionId });
    git(repo, "commit", "-q", "--allow-empty", "-m", "move HEAD");
    vscodeStub.messages = [];
    // Whether a moved HEAD blocks (modal) or only warns is the server's call; either way the
    // user continues here and then looks at the report.
    vscodeStub.answers.push((shown) => (shown.modal ? "Continue here" : undefined));
    await vscodeStub.commands.get("sessiond.resumeThread")!(started.thread);

    const transcript = await shownTranscript(extension.api, started.thread.threadId);
    assert.match(transcript.banner ?? "", /<strong>verifier invalidated<\/strong>: /, transcript.banner);
    await vscodeStub.commands.get("sessiond.showRestoreReport")!();
    const report = vscodeStub.documents.find((d) => d.uri === `sessiond:${reportPath(started.thread)}`);
    assert.match(report?.text ?? "", /- \*\*verifier\*\* invalidated: /);
    assert.match(report?.text ?? "", /- pytest: 7\/9 at [0-9a-f]{10}/);
  });
});
