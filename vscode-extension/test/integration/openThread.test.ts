// "Open Thread…" against the real server: the id a person copied, whole or a unique prefix
// of 4 or more digits (as `sessiond list` and `search` print it), opens that thread's
// transcript; a prefix several threads start with offers them to choose from; one no
// thread starts with says so.
import { activateExtension, makeRepo, serverCommand, tempDir, vscodeStub, waitFor, type ActivatedExtension } from "../support/harness";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { after, before, describe, it } from "node:test";
import { prefixProblem } from "../../src/openThread";

const THREADS: Record<string, string> = {
  "abcd0000-0000-4000-8000-000000000001": "first",
  "abcd0000-0000-4000-8000-000000000002": "second",
  "abce0000-0000-4000-8000-000000000003": "third",
};

/** A thread file as docs/storage.md describes it, with a chosen id (prefixes that collide). */
function writeThread(home: string, threadId: string, title: string, cwd: string): void {
  const meta = {
    v: 1, seq: 1, ts: "2026-03-10T12:00:00.000000Z", type: "session_meta",
    sessionId: "6c1d0000-0000-4000-8000-000000000000", id: "meta", threadId, source: "startup",
    reason: "user", cwd, title,
  };
  const message = { v: 1, seq: 2, ts: "2026-03-10T12:00:01.000000Z", type: "message", sessionId: meta.sessionId, id: "m1", role: "user", content: `about the ${title} thing` };
  const dir = path.join(home, "threads", threadId.slice(0, 2));
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  fs.writeFileSync(path.join(dir, `${threadId}.jsonl`), `${JSON.stringify(meta)}\n${JSON.stringify(message)}\n`);
}

describe("Open Thread…", () => {
  const root = tempDir("sessiond-ext-open-");
  const home = `${root.path}/home`;
  let extension: ActivatedExtension;

  before(async () => {
    const repo = makeRepo(root.path, "shop");
    fs.mkdirSync(home, { mode: 0o700 });
    for (const [threadId, title] of Object.entries(THREADS)) writeThread(home, threadId, title, repo);
    extension = await activateExtension({ command: serverCommand(home), folders: [repo] });
  });

  after(async () => {
    await extension?.deactivate();
    root.remove();
  });

  it("opens the transcript of the one thread a prefix names, typed in any case", async () => {
    vscodeStub.inputs.push("ABCE");
    await vscodeStub.commands.get("sessiond.openThread")!();
    const opened = await waitFor("the transcript", () => extension.api.transcripts.get("abce0000-0000-4000-8000-000000000003"));
    assert.ok(opened);
    assert.ok(!vscodeStub.messages.some((m) => m.severity !== "information"), JSON.stringify(vscodeStub.messages));
  });

  it("offers the threads an ambiguous prefix names, by title, and opens the one chosen", async () => {
    let offered: string[] = [];
    vscodeStub.inputs.push("abcd");
    vscodeStub.quickPicks.push((items) => {
      offered = items.map((item) => item.label);
      return items.find((item) => item.label === "second");
    });
    await vscodeStub.commands.get("sessiond.openThread")!();
    assert.deepEqual(offered, ["first", "second"]);
    await waitFor("the chosen transcript", () => extension.api.transcripts.get("abcd0000-0000-4000-8000-000000000002"));
    assert.equal(extension.api.transcripts.get("abcd0000-0000-4000-8000-000000000001"), undefined);
  });

  it("says when no thread id starts with what was typed", async () => {
    vscodeStub.inputs.push("abcf");
    await vscodeStub.commands.get("sessiond.openThread")!();
    assert.deepEqual(
      vscodeStub.messages.map((m) => [m.severity, m.message]).filter(([, message]) => message?.includes("abcf")),
      [["warning", "No thread id starts with abcf."]],
    );
  });

  it("checks what is typed before asking: hex digits, at least 4", () => {
    assert.equal(prefixProblem("594b6d02"), undefined);
    assert.equal(prefixProblem("594b6d02-1f3a"), undefined);
    assert.equal(prefixProblem("594"), "Type at least 4 digits of the id.");
    assert.equal(prefixProblem("../etc"), "A thread id has only the digits 0-9, a-f and hyphens.");
  });
});
