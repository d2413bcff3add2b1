// Resume shows the newest end of a long transcript at once; "Load earlier messages" at its
// top brings the earlier ones, a page at a time, down to the start — against the real server.
import { activateExtension, harnessClient, makeRepo, serverCommand, tempDir, vscodeStub, type ActivatedExtension } from "../support/harness";
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { EARLIER_PAGE } from "../../src/sessions";
import { LOAD_EARLIER_COMMAND } from "../../src/transcriptLens";

const MESSAGES = 450;

describe("a long transcript", () => {
  const root = tempDir("sessiond-ext-paging-");
  const home = `${root.path}/home`;
  let extension: ActivatedExtension;
  let threadId = "";
  const uri = () => `sessiond:/transcript/${threadId}/long thread`;
  const shownLast = () => vscodeStub.documents.filter((d) => d.uri === uri()).at(-1);
  const transcript = () => shownLast()?.text ?? "";
  const lastLine = () => transcript().split("\n").length - 1;
  const shown = () => [...transcript().matchAll(/^message (\d+)$/gm)].map((match) => Number(match[1]));
  const range = (from: number, to: number) => Array.from({ length: to - from }, (_, n) => from + n);

  before(async () => {
    const repo = makeRepo(root.path, "long");
    const harness = harnessClient(home, repo);
    const started = await harness.request("thread/start", { cwd: repo, title: "long thread" });
    threadId = started.thread.threadId;
    const message = (n: number) => ({ type: "message", id: `m${n}`, role: n % 2 ? "assistant" : "user", content: `message ${n}` });
    await harness.request("thread/record", { threadId, sessionId: started.sessionId, items: [message(0), ...range(1, MESSAGES).map(message)] });
    await harness.request("thread/close", { threadId, sessionId: started.sessionId });
    await harness.stop();
    extension = await activateExtension({ command: serverCommand(home), folders: [repo] });
  });

  after(async () => {
    await extension?.deactivate();
    root.remove();
  });

  it("opens on Resume with the newest messages, and Load earlier messages above them", async () => {
    await extension.api.sessions.resume((await extension.api.client.request("thread/list", {})).threads[0]!);
    assert.deepEqual(shown(), range(MESSAGES - EARLIER_PAGE, MESSAGES));
    // Hundreds of lines down: the editor is scrolled there, the cursor at the end.
    assert.equal(shownLast()?.revealedLine, lastLine(), "the newest message is on screen");
    assert.equal(shownLast()?.cursorLine, lastLine());
    assert.match(transcript(), /Load earlier messages/);
    const lenses = vscodeStub.codeLensesOf(uri());
    assert.deepEqual(
      lenses.map((lens) => [lens.range.start.line, lens.command?.title, lens.command?.command, lens.command?.arguments]),
      [[0, "Load earlier messages", LOAD_EARLIER_COMMAND, [threadId]]],
    );
  });

  it("loads earlier messages on demand, a page at a time, until the first one", async () => {
    const lens = vscodeStub.codeLensesOf(uri())[0]!;
    await vscodeStub.commands.get(lens.command!.command)!(...(lens.command!.arguments ?? []));
    // A page is 200 items of any kind: the session's start record is one of them.
    assert.deepEqual(shown(), range(MESSAGES - 2 * EARLIER_PAGE, MESSAGES));
    assert.equal(shownLast()?.revealedLine, undefined, "the view stays at the top, where the reader clicked");
    assert.equal(vscodeStub.codeLensesOf(uri()).length, 1);

    await vscodeStub.commands.get(LOAD_EARLIER_COMMAND)!(threadId);
    assert.deepEqual(shown(), range(0, MESSAGES), "every message, oldest first, each once");
    assert.deepEqual(vscodeStub.codeLensesOf(uri()), [], "nothing earlier is left to load");
    assert.doesNotMatch(transcript(), /Load earlier messages/);
    assert.ok(!vscodeStub.messages.some((m) => m.severity === "error"), JSON.stringify(vscodeStub.messages));
  });

  it("opens at the newest end from Open Transcript too, without a session", async () => {
    await extension.api.sessions.closeActive();
    await extension.api.sessions.openTranscript((await extension.api.client.request("thread/list", {})).threads[0]!);
    assert.equal(shown().at(-1), MESSAGES - 1);
    assert.ok(shown().length < MESSAGES, "only the newest page");
    assert.equal(shownLast()?.revealedLine, lastLine(), "the newest message is on screen");
  });
});
