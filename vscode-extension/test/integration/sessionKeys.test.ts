// Session keys in the editor, against the real server: Continue in This Folder continues the
// folder-and-branch's key, a reset chain is one row with the threads it replaced under it,
// and Resume on a replaced thread offers the one that goes on.
import {
  activateExtension,
  git,
  harnessClient,
  makeRepo,
  renderTree,
  serverCommand,
  tempDir,
  vscodeStub,
  type ActivatedExtension,
} from "../support/harness";
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { ThreadInfo } from "../../src/protocol";

describe("session keys", () => {
  const root = tempDir("sessiond-ext-keys-");
  const home = `${root.path}/home`;
  let extension: ActivatedExtension;
  let repo = "";
  const chain: ThreadInfo[] = [];

  before(async () => {
    repo = makeRepo(root.path, "bot");
    // A harness's conversation reset twice: first → second → third, each replacing the last.
    const harness = harnessClient(home, repo);
    const stale = { reset: "idle" as const, idleMinutes: 0.000001 }; // any pause is longer
    for (const [title, policy] of [["first", undefined], ["second", stale], ["third", stale]] as const) {
      const answer = await harness.request("thread/continue", {
        sessionKey: "direct:ana",
        cwd: repo,
        title,
        ...(policy ? { policy } : {}),
      });
      assert.equal(answer.reason, policy ? "reset" : "startup");
      chain.push(answer.thread);
    }
    await harness.stop();
    extension = await activateExtension({ command: serverCommand(home), folders: [repo] });
  });

  after(async () => {
    await extension?.deactivate();
    root.remove();
  });

  it("shows a reset chain as one row with the threads it replaced under it", async () => {
    extension.api.threads.refresh();
    const lines = await renderTree(extension.api.threads);
    const third = lines.findIndex((line) => /^ {4}third — just now · new after idle reset$/.test(line));
    assert.ok(third >= 0, lines.join("\n"));
    assert.match(lines[third + 1]!, /^ {6}second — replaced · just now · new after idle reset$|^ {6}second — replaced · just now$/);
    assert.match(lines[third + 2]!, /^ {6}first — replaced · just now$/);
    assert.equal(lines.filter((line) => /\b(first|second) —/.test(line)).length, 2, "each once, under the third");
  });

  it("Resume on a replaced thread offers the current one", async () => {
    let offered: string[] = [];
    vscodeStub.answers.push((shown) => {
      offered = shown.buttons;
      return "Resume the current thread";
    });
    await extension.api.sessions.resume({ ...chain[0]!, nextThreadId: chain[1]!.threadId });
    assert.deepEqual(offered, ["Resume the current thread", "Resume this one", "Cancel"]);
    assert.equal(extension.api.sessions.active?.thread.threadId, chain[2]!.threadId);
    vscodeStub.answers.push(() => "Resume this one");
    await extension.api.sessions.resume(chain[1]!);
    assert.equal(extension.api.sessions.active?.thread.threadId, chain[1]!.threadId);
  });

  it("Continue in This Folder continues the folder-and-branch's thread, per branch", async () => {
    const run = vscodeStub.commands.get("sessiond.continueInFolder")!;
    await run();
    const first = extension.api.sessions.active;
    assert.ok(first, JSON.stringify(vscodeStub.messages));
    assert.equal(first.thread.sessionKey, `workspace:${repo}#main`);
    await run(); // the key's thread, with this window's session: it simply goes on
    assert.equal(extension.api.sessions.active?.thread.threadId, first.thread.threadId);
    assert.equal(extension.api.sessions.active?.sessionId, first.sessionId);
    git(repo, "checkout", "-q", "-b", "feature");
    await run();
    const feature = extension.api.sessions.active;
    assert.equal(feature?.thread.sessionKey, `workspace:${repo}#feature`);
    assert.notEqual(feature?.thread.threadId, first.thread.threadId);
    git(repo, "checkout", "-q", "main");
    await run(); // main's thread again, resumed (this window had let it go)
    assert.equal(extension.api.sessions.active?.thread.threadId, first.thread.threadId);
    assert.ok(!vscodeStub.messages.some((m) => m.severity === "error"), JSON.stringify(vscodeStub.messages));
  });
});
