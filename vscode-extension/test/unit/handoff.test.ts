// "Resume in Claude Code" / "Resume in Codex" / "Resume in Gemini CLI": the agent's own resume in an integrated terminal,
// or a clear message when the agent is not installed. Real files on a real PATH.
import { vscodeStub } from "../support/vscode";
import assert from "node:assert/strict";
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { afterEach, beforeEach, describe, it } from "node:test";
import { findExecutable, resumeInAgent, resumeLabel, shellLine } from "../../src/handoff";
import type { Handoff } from "../../src/protocol";

const CLAUDE: Handoff = { agent: "claude-code", command: ["claude", "--resume", "0d3c5f0e-5b7a-4e57-9c3f-1f2d3e4a5b6c"], cwd: "/work/shop" };
const CODEX: Handoff = { agent: "codex", command: ["codex", "resume", "7f1e2d3c-4b5a-4968-8776-655443322110"], cwd: "/work/api" };
const GEMINI: Handoff = { agent: "gemini", command: ["gemini", "--resume", "891dd06b-6547-4859-aa58-e9adc5a74de2"], cwd: "/work/web" };

describe("resuming an imported thread in its agent", () => {
  let bin = "";
  let savedPath: string | undefined;

  beforeEach(() => {
    vscodeStub.reset();
    bin = mkdtempSync(path.join(tmpdir(), "sessiond-handoff-"));
    savedPath = process.env["PATH"];
  });

  afterEach(() => {
    process.env["PATH"] = savedPath;
    rmSync(bin, { recursive: true, force: true });
  });

  function install(program: string): string {
    const file = path.join(bin, program);
    writeFileSync(file, "#!/bin/sh\nexit 0\n");
    chmodSync(file, 0o755);
    return file;
  }

  it("finds an agent only as an executable file on PATH", () => {
    const claude = install("claude");
    writeFileSync(path.join(bin, "codex"), "not executable");
    mkdirSync(path.join(bin, "dir-not-program"));
    assert.equal(findExecutable("claude", bin), claude);
    assert.equal(findExecutable("codex", bin), undefined);
    assert.equal(findExecutable("dir-not-program", bin), undefined);
    assert.equal(findExecutable("claude", ""), undefined);
  });

  it("opens a terminal in the session's directory running the agent's own resume", async () => {
    install("claude");
    install("codex");
    install("gemini");
    process.env["PATH"] = bin;
    for (const handoff of [CLAUDE, CODEX, GEMINI]) await resumeInAgent(handoff);
    assert.deepEqual(vscodeStub.terminals, [
      { name: "Claude Code", cwd: "/work/shop", shown: true, sent: [`claude --resume ${CLAUDE.command[2]}`] },
      { name: "Codex", cwd: "/work/api", shown: true, sent: [`codex resume ${CODEX.command[2]}`] },
      { name: "Gemini CLI", cwd: "/work/web", shown: true, sent: [`gemini --resume ${GEMINI.command[2]}`] },
    ]);
    assert.deepEqual(vscodeStub.messages, []);
    assert.equal(resumeLabel(CLAUDE), "Resume in Claude Code");
    assert.equal(resumeLabel(CODEX), "Resume in Codex");
    assert.equal(resumeLabel(GEMINI), "Resume in Gemini CLI");
  });

  it("says the agent is not installed, and how to install it, instead of opening a terminal", async () => {
    process.env["PATH"] = bin;
    vscodeStub.answers.push(() => "Copy Install Command");
    assert.equal(await resumeInAgent(CODEX), undefined);
    assert.deepEqual(vscodeStub.terminals, []);
    const [shown] = vscodeStub.messages;
    assert.equal(shown?.severity, "error");
    assert.match(shown!.message, /^Codex is not installed here: `codex` is not on PATH\./);
    assert.equal(vscodeStub.clipboard, "npm install -g @openai/codex");
  });

  it("tells how to install Gemini CLI when `gemini` is not on PATH", async () => {
    process.env["PATH"] = bin;
    vscodeStub.answers.push(() => "Copy Install Command");
    assert.equal(await resumeInAgent(GEMINI), undefined);
    assert.deepEqual(vscodeStub.terminals, []);
    assert.match(vscodeStub.messages[0]!.message, /^Gemini CLI is not installed here: `gemini` is not on PATH\..*Resume in Gemini CLI again\.$/);
    assert.equal(vscodeStub.clipboard, "npm install -g @google/gemini-cli");
  });

  it("quotes only what a shell would split", () => {
    assert.equal(shellLine(["claude", "--resume", "abc-123"]), "claude --resume abc-123");
    assert.equal(shellLine(["codex", "resume", "my session's name"]), "codex resume 'my session'\\''s name'");
  });
});
