// "Search Threads" against the real server: a quick pick that searches every thread as the
// user types (thread/search), and a hit that opens the transcript at its record with the
// matched words marked; a malformed query shows the server's reason instead of rows.
import {
  activateExtension,
  harnessClient,
  makeRepo,
  serverCommand,
  shownTranscript,
  tempDir,
  vscodeStub,
  waitFor,
  type ActivatedExtension,
} from "../support/harness";
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { ToWebview } from "../../src/transcript/messages";
import type { WebviewPanel } from "../support/vscode";

describe("Search Threads", () => {
  const root = tempDir("sessiond-ext-search-");
  const home = `${root.path}/home`;
  let extension: ActivatedExtension;
  let needle = { threadId: "", seq: 0 };

  before(async () => {
    const repo = makeRepo(root.path, "zoo");
    const harness = harnessClient(home, repo);
    const other = await harness.request("thread/start", { cwd: repo, title: "unrelated" });
    await harness.request("thread/record", { threadId: other.thread.threadId, sessionId: other.sessionId, items: [{ type: "message", id: "u1", role: "user", content: "nothing to see" }] });
    const zoo = await harness.request("thread/start", { cwd: repo, title: "zoo inventory" });
    const filler = Array.from({ length: 300 }, (_, n) => ({ type: "message", id: `f${n}`, role: n % 2 ? "user" : "assistant", content: `count the animals, pen ${n}` }));
    const recorded = await harness.request("thread/record", {
      threadId: zoo.thread.threadId,
      sessionId: zoo.sessionId,
      items: [
        { type: "turn", id: "t1", turnId: "t1", phase: "started" },
        ...filler,
        { type: "message", id: "okapi", role: "assistant", content: "The okapi escaped from pen 12 overnight." },
        ...filler.map((f) => ({ ...f, id: `g${f.id}` })),
      ],
    });
    needle = { threadId: zoo.thread.threadId, seq: recorded.firstSeq! + 301 };
    await harness.stop();
    extension = await activateExtension({ command: serverCommand(home), folders: [repo] });
  });

  after(async () => {
    await extension?.deactivate();
    root.remove();
  });

  it("finds what was said as the user types, and opens the transcript at the hit, its words marked", async () => {
    await vscodeStub.commands.get("sessiond.searchContent")!();
    const pick = vscodeStub.createdQuickPicks.at(-1)!;
    assert.equal(pick.shown, true);
    pick.type("oka");
    pick.type("okapi esc*");
    const rows = await waitFor("the hit", () => (pick.items.length ? (pick.items as unknown as { label: string; detail: string; hit: { seq: number } }[]) : undefined));
    assert.deepEqual(rows.map((row) => [row.label, row.detail, row.hit.seq]), [["zoo inventory", "The ‹okapi› ‹escaped› from pen 12 overnight.", needle.seq]]);
    assert.equal(pick.busy, false);
    pick.accept(rows[0] as never);
    assert.equal(pick.shown, false);
    const shown = await waitFor("the transcript at the hit", async () => {
      if (!extension.api.transcripts.get(needle.threadId)) return undefined;
      const now = await shownTranscript(extension.api, needle.threadId);
      return now.focusSeq === undefined ? undefined : now;
    });
    assert.equal(shown.focusSeq, needle.seq);
    assert.ok(shown.entries.some((entry) => entry.seq === needle.seq && entry.text.includes("okapi escaped")));
    assert.equal(shown.hasEarlier, true, "opened at the hit, not at the start or the end");
    assert.equal(shown.hasLater, true);
    const panel = extension.api.transcripts.get(needle.threadId)!.panel as unknown as WebviewPanel;
    const initial = (panel.posted as ToWebview[]).find((message) => message.type === "page" && message.direction === "initial");
    assert.deepEqual(initial && "highlight" in initial ? initial.highlight : undefined, ["okapi", "escaped"]);
  });

  it("a malformed query says why instead of showing rows", async () => {
    await vscodeStub.commands.get("sessiond.searchContent")!();
    const pick = vscodeStub.createdQuickPicks.at(-1)!;
    pick.type('"okapi');
    const title = await waitFor("the reason", () => pick.title);
    assert.match(title, /unbalanced quote/);
    assert.deepEqual(pick.items, []);
    pick.hide();
    assert.equal(pick.disposed, true);
  });
});
