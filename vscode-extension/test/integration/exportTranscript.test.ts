// "Export Transcript…" against the real server: the thread's context menu asks the format
// and the file (a save dialog), then writes what `thread/export` answers, part by part; the
// encrypted page holds none of the thread's words.
import { activateExtension, findThreadNode, harnessClient, makeRepo, serverCommand, tempDir, vscodeStub, type ActivatedExtension } from "../support/harness";
import { Uri } from "../support/vscode";
import assert from "node:assert/strict";
import { existsSync, readFileSync, statSync } from "node:fs";
import * as path from "node:path";
import { after, before, describe, it } from "node:test";

describe("Export Transcript…", () => {
  const root = tempDir("sessiond-ext-export-");
  const home = `${root.path}/home`;
  let extension: ActivatedExtension;
  let threadId = "";
  let repo = "";

  before(async () => {
    repo = makeRepo(root.path, "shop");
    const harness = harnessClient(home, repo);
    const started = await harness.request("thread/start", { cwd: repo, title: "refund flow" });
    threadId = started.thread.threadId;
    await harness.request("thread/record", {
      threadId,
      sessionId: started.sessionId,
      items: [
        { type: "message", id: "m1", role: "user", content: "why does the okapi refund fail?" },
        { type: "operation", id: "o1", operationId: "run-1", tool: "shell", effect: "side_effect", state: "failed", command: "npm test", exitCode: 1, resultPersisted: true, result: "1 failing: refund okapi" },
        { type: "message", id: "m2", role: "assistant", content: "The refund amount is rounded twice." },
      ],
    });
    await harness.request("thread/close", { threadId, sessionId: started.sessionId });
    await harness.stop();
    extension = await activateExtension({ command: serverCommand(home), folders: [repo] });
  });

  after(async () => {
    await extension?.deactivate();
    root.remove();
  });

  it("saves the HTML page where the save dialog says, named after the thread", async () => {
    const target = path.join(root.path, "refund.html");
    let offered: string[] = [];
    let suggested = "";
    vscodeStub.quickPicks.push((items) => {
      offered = items.map((item) => item.label);
      return items.find((item) => item.label === "HTML");
    });
    vscodeStub.saveDialogs.push((options) => {
      suggested = options.defaultUri?.fsPath ?? "";
      return Uri.file(target);
    });
    await vscodeStub.commands.get("sessiond.exportTranscript")!(await findThreadNode(extension.api.threads, "refund flow"));
    assert.deepEqual(offered, ["HTML", "HTML, encrypted", "Markdown", "JSON"]);
    assert.equal(suggested, path.join(repo, `refund-flow-${threadId.slice(0, 8)}.html`));
    const page = readFileSync(target, "utf8");
    assert.match(page, /^<!DOCTYPE html>/);
    assert.ok(page.includes("why does the okapi refund fail?"));
    assert.ok(page.includes('<details class="e op failed">'), "the failed call, collapsed and marked");
    assert.equal(statSync(target).mode & 0o777, 0o600);
    assert.ok(!existsSync(`${target}.part`));
    assert.ok(vscodeStub.messages.some((m) => m.message === `Exported “refund flow” to ${target}.`));
  });

  it("encrypts with a passphrase asked twice, and writes JSON the server's items", async () => {
    const locked = path.join(root.path, "locked.html");
    vscodeStub.quickPicks.push((items) => items.find((item) => item.label === "HTML, encrypted"));
    vscodeStub.inputs.push("correct horse battery", "correct horse battery");
    vscodeStub.saveDialogs.push(() => Uri.file(locked));
    await vscodeStub.commands.get("sessiond.exportTranscript")!(await findThreadNode(extension.api.threads, "refund flow"));
    const page = readFileSync(locked, "utf8");
    assert.ok(page.includes('id="lock"'));
    for (const word of ["okapi", "refund flow", "npm test", "rounded twice"]) assert.ok(!page.includes(word), word);

    const json = path.join(root.path, "refund.json");
    vscodeStub.quickPicks.push((items) => items.find((item) => item.label === "JSON"));
    vscodeStub.saveDialogs.push(() => Uri.file(json));
    await vscodeStub.commands.get("sessiond.exportTranscript")!(await findThreadNode(extension.api.threads, "refund flow"));
    const data = JSON.parse(readFileSync(json, "utf8")) as { thread: { threadId: string }; items: { id: string }[] };
    assert.equal(data.thread.threadId, threadId);
    assert.deepEqual(data.items.filter((item) => ["m1", "o1", "m2"].includes(item.id)).map((item) => item.id), ["m1", "o1", "m2"]);
  });

  it("writes nothing when the save dialog is cancelled", async () => {
    vscodeStub.quickPicks.push((items) => items.find((item) => item.label === "Markdown"));
    await vscodeStub.commands.get("sessiond.exportTranscript")!(await findThreadNode(extension.api.threads, "refund flow"));
    assert.ok(!existsSync(path.join(repo, `refund-flow-${threadId.slice(0, 8)}.md`)));
  });
});
