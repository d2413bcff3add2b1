// An imported Claude Code session against the real Python server: `sessiond import claude`
// turns a transcript into a thread; Resume shows what came back (read-only: no session is
// opened) and offers "Resume in Claude Code", which runs the agent's own resume in a terminal.
import { activateExtension, findThreadNode, makeRepo, serverCommand, tempDir, vscodeStub, type ActivatedExtension, shownTranscript } from "../support/harness";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { chmodSync, mkdirSync, writeFileSync } from "node:fs";
import * as path from "node:path";
import { after, before, describe, it } from "node:test";

const SESSION = "5b0e8c4a-2f1d-4c3b-9a8e-7d6c5b4a3f21";

function transcript(cwd: string): string {
  const base = { cwd, sessionId: SESSION, gitBranch: "main", version: "2.1.37", isSidechain: false, userType: "external" };
  const lines = [
    { ...base, type: "user", uuid: "u1", parentUuid: null, timestamp: "2026-05-04T09:30:00.000Z", permissionMode: "default", message: { role: "user", content: "Make checkout idempotent" } },
    { ...base, type: "assistant", uuid: "a1", parentUuid: "u1", timestamp: "2026-05-04T09:30:05.000Z", message: { id: "msg_1", model: "claude-sonnet-4-5-20250929", role: "assistant", content: [{ type: "tool_use", id: "toolu_1", name: "TodoWrite", input: { todos: [{ content: "Add an idempotency key", status: "in_progress", activeForm: "Adding" }] } }], usage: { input_tokens: 900, output_tokens: 120 } } },
    { ...base, type: "user", uuid: "u2", parentUuid: "a1", timestamp: "2026-05-04T09:30:06.000Z", message: { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_1", content: "Todos have been modified successfully" }] }, toolUseResult: { oldTodos: [], newTodos: [] } },
    { ...base, type: "assistant", uuid: "a2", parentUuid: "u2", timestamp: "2026-05-04T09:30:09.000Z", message: { id: "msg_2", model: "claude-sonnet-4-5-20250929", role: "assistant", content: [{ type: "text", text: "Started with the idempotency key." }], usage: { input_tokens: 950, output_tokens: 40 } } },
  ];
  return lines.map((line) => JSON.stringify(line)).join("\n") + "\n";
}

describe("an imported Claude Code session", () => {
  const root = tempDir("sessiond-ext-import-");
  const home = `${root.path}/home`;
  const bin = `${root.path}/bin`;
  const savedPath = process.env["PATH"];
  let repo = "";
  let extension: ActivatedExtension;

  before(async () => {
    repo = makeRepo(root.path, "shop");
    const projects = path.join(root.path, "claude", "projects");
    mkdirSync(path.join(projects, "-shop"), { recursive: true });
    writeFileSync(path.join(projects, "-shop", `${SESSION}.jsonl`), transcript(repo));
    const [python, ...rest] = serverCommand(home);
    execFileSync(python!, [...rest.slice(0, rest.indexOf("serve")), "import", "claude", "--from", projects]);
    mkdirSync(bin);
    extension = await activateExtension({ command: serverCommand(home), folders: [repo] });
  });

  after(async () => {
    process.env["PATH"] = savedPath;
    await extension?.deactivate();
    root.remove();
  });

  it("resumes read-only and hands over to Claude Code in a terminal in the session's directory", async () => {
    const claude = path.join(bin, "claude");
    writeFileSync(claude, "#!/bin/sh\nexit 0\n");
    chmodSync(claude, 0o755);
    process.env["PATH"] = [bin, savedPath].join(path.delimiter);
    vscodeStub.answers.push((shown) => (shown.buttons.includes("Resume in Claude Code") ? "Resume in Claude Code" : undefined));
    await vscodeStub.commands.get("sessiond.resumeThread")!(await findThreadNode(extension.api.threads, "Make checkout idempotent"));

    const offer = vscodeStub.messages.find((m) => m.buttons.includes("Resume in Claude Code"));
    assert.equal(offer?.message, "“Make checkout idempotent” is a Claude Code session: sessiond shows it, Claude Code continues it.");
    const thread = await findThreadNode(extension.api.threads, "Make checkout idempotent");
    assert.ok(thread.kind === "thread");
    const shown = await shownTranscript(extension.api, thread.thread.threadId);
    const texts = shown.entries.map((entry) => entry.text);
    assert.ok(texts.includes("You Make checkout idempotent"), texts.join("\n"));
    assert.ok(texts.includes("Claude Code Started with the idempotency key."), "the agent's words, under its name");
    assert.match(shown.notice ?? "", /Resume in Claude Code \(in the title bar\) continues it there/);
    assert.equal(vscodeStub.context.get("sessiond.transcriptAgent"), "claude-code", "the title bar offers Resume in Claude Code");
    const todos = extension.api.todos.getChildren().map((todo) => todo.content);
    assert.deepEqual(todos, ["Add an idempotency key"]);
    assert.deepEqual(vscodeStub.terminals, [{ name: "Claude Code", cwd: repo, shown: true, sent: [`claude --resume ${SESSION}`] }]);
    assert.equal(extension.api.sessions.active, undefined, "no sessiond session is opened for a mirror");
    assert.equal(vscodeStub.context.get("sessiond.sessionActive"), false);
  });

  it("Resume in Claude Code in the transcript's title bar runs the same handoff", async () => {
    vscodeStub.terminals = [];
    await vscodeStub.commands.get("sessiond.resumeInClaudeCode")!();
    assert.deepEqual(vscodeStub.terminals, [{ name: "Claude Code", cwd: repo, shown: true, sent: [`claude --resume ${SESSION}`] }]);
    await vscodeStub.commands.get("sessiond.resumeInCodex")!();
    assert.equal(vscodeStub.terminals.length, 1, "the Codex action does nothing for a Claude Code session");
  });

  it("says Claude Code is not installed when it is not on PATH", async () => {
    process.env["PATH"] = path.join(root.path, "empty"); // the server is running: only the extension looks
    vscodeStub.messages = [];
    vscodeStub.terminals = [];
    vscodeStub.answers.push((shown) => (shown.buttons.includes("Resume in Claude Code") ? "Resume in Claude Code" : undefined));
    await vscodeStub.commands.get("sessiond.resumeThread")!(await findThreadNode(extension.api.threads, "Make checkout idempotent"));
    const error = vscodeStub.messages.find((m) => m.severity === "error");
    assert.match(error?.message ?? "", /^Claude Code is not installed here: `claude` is not on PATH\./);
    assert.deepEqual(vscodeStub.terminals, []);
  });
});
