// The commands that act on the open session — Rewind to Turn, Compact, Clear, New Thread —
// against the real server, asserting the transcript and views a user sees after each.
import {
  activateExtension,
  harnessClient,
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

describe("commands on the open session", () => {
  const root = tempDir("sessiond-ext-commands-");
  const home = `${root.path}/home`;
  let extension: ActivatedExtension;
  let threadId = "";
  /** The entries the transcript shows, as text, "(undone)" after those a rewind went back past. */
  const transcript = async () =>
    (await shownTranscript(extension.api, threadId)).entries.map((entry) => `${entry.text}${/^<article class="[^"]* undone"/.test(entry.html) ? " (undone)" : ""}`);

  before(async () => {
    const repo = makeRepo(root.path, "api");
    const harness = harnessClient(home, repo);
    const started = await harness.request("thread/start", { cwd: repo, title: "rate limiter" });
    threadId = started.thread.threadId;
    const turn = (n: number, ask: string, answer: string) => [
      { type: "turn", id: `t${n}-start`, turnId: `t${n}`, phase: "started" },
      { type: "message", id: `ask-${n}`, turnId: `t${n}`, role: "user", content: ask },
      { type: "message", id: `answer-${n}`, turnId: `t${n}`, role: "assistant", content: answer },
      { type: "turn", id: `t${n}-end`, turnId: `t${n}`, phase: "completed" },
    ];
    const todos = { type: "todos", id: "todos-1", items: [{ id: "1", content: "document the limits", status: "pending" }] };
    await harness.request("thread/record", {
      threadId,
      sessionId: started.sessionId,
      items: [todos, ...turn(1, "add a token bucket", "Added TokenBucket."), ...turn(2, "make it per-user", "Keyed buckets by user id.")],
    });
    await harness.request("thread/close", { threadId, sessionId: started.sessionId });
    await harness.stop();
    extension = await activateExtension({ command: serverCommand(home), folders: [repo] });
    await extension.api.sessions.resume(extension.api.threads.loadedThreads()[0] ?? (await loadFirstThread()));
  });

  async function loadFirstThread() {
    await renderTree(extension.api.threads);
    const thread = extension.api.threads.loadedThreads()[0];
    assert.ok(thread);
    return thread;
  }

  after(async () => {
    await extension?.deactivate();
    root.remove();
  });

  it("Rewind to Turn offers the user's requests, newest first, and marks the later turns undone", async () => {
    let offered: string[] = [];
    vscodeStub.quickPicks.push((items) => {
      offered = items.map((item) => item.label);
      return items.find((item) => item.label === "add a token bucket");
    });
    vscodeStub.quickPicks.push((items) => items.find((item) => item.label === "Conversation only"));
    await vscodeStub.commands.get("sessiond.rewindToTurn")!();
    assert.deepEqual(offered, ["make it per-user", "add a token bucket"]);
    const shown = await transcript();
    assert.ok(shown.includes("Agent Added TokenBucket."), shown.join("\n"));
    assert.ok(shown.includes("undone You make it per-user (undone)"), "still readable, marked undone");
    assert.match(shown.at(-1)!, /^Rewound to the end of turn t1/);
    assert.ok(vscodeStub.messages.some((m) => m.message === "Rewound to the end of “add a token bucket”."), JSON.stringify(vscodeStub.messages));
  });

  it("Compact asks for the summary and shows it where the agent continues from", async () => {
    vscodeStub.inputs.push("Built a token bucket rate limiter.");
    await vscodeStub.commands.get("sessiond.compactThread")!();
    const shown = await transcript();
    assert.equal(shown.at(-1), "Compacted: the agent continues from this summary, not from what is above Built a token bucket rate limiter.");
    assert.ok(shown.includes("You add a token bucket"), "what came before stays readable above it");
  });

  it("Clear starts a new session with an empty conversation and keeps the todos", async () => {
    const before = extension.api.sessions.active?.sessionId;
    await vscodeStub.commands.get("sessiond.clearThread")!();
    assert.ok(!vscodeStub.messages.some((m) => m.severity === "error"), JSON.stringify(vscodeStub.messages));
    assert.notEqual(extension.api.sessions.active?.sessionId, before);
    assert.equal((await transcript()).at(-1), "Conversation cleared: the agent does not see anything above this line");
    assert.deepEqual(
      extension.api.todos.getChildren().map((todo) => todo.content),
      ["document the limits"],
    );
  });

  it("New Thread starts a thread in the workspace folder and lists it", async () => {
    vscodeStub.inputs.push("add metrics");
    await vscodeStub.commands.get("sessiond.newThread")!();
    assert.equal(extension.api.sessions.active?.thread.title, "add metrics");
    await waitFor("the new thread in the tree", async () =>
      (await renderTree(extension.api.threads)).some((line) => /^ {4}add metrics — just now$/.test(line)) || undefined,
    );
  });
});
