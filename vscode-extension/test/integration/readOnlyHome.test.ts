// A read-only data directory (a backup, another machine's data mounted read-only): the real
// server lists and resumes its threads as read-only reports, and the extension says so in one
// warning, opens no session, and still shows the transcript. The directory is made read-only
// by a read-only bind mount in a private mount namespace (`unshare -m`), since the tests may
// run as root, which ignores permission bits (tests/support/confine.py does the same for Python).
import { activateExtension, harnessClient, findThreadNode, makeRepo, serverCommand, tempDir, vscodeStub, type ActivatedExtension, shownTranscript } from "../support/harness";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { after, before, describe, it } from "node:test";

const BIND_READ_ONLY = 'mount --bind -o ro "$1" "$1" && shift && exec "$@"';

/** `command` run where `dir` cannot be written, proven by a write that must fail there. */
function readOnly(dir: string, command: string[]): string[] {
  const prefix = ["unshare", "-m", "sh", "-c", BIND_READ_ONLY, "sh", dir];
  let failed = false;
  try {
    execFileSync(prefix[0]!, [...prefix.slice(1), "sh", "-c", `touch "${dir}/probe"`], { stdio: "ignore" });
  } catch {
    failed = true;
  }
  assert.ok(failed, `could not make ${dir} read-only here (unshare -m and a bind mount)`);
  return [...prefix, ...command];
}

describe("a read-only data directory", () => {
  const root = tempDir("sessiond-ext-readonly-");
  const home = `${root.path}/home`;
  let repo = "";
  let threadId = "";
  let extension: ActivatedExtension;

  before(async () => {
    repo = makeRepo(root.path, "shop");
    const harness = harnessClient(home, repo);
    const started = await harness.request("thread/start", { cwd: repo, title: "from the backup" });
    threadId = started.thread.threadId;
    await harness.request("thread/record", {
      threadId,
      sessionId: started.sessionId,
      items: [{ type: "message", id: "m1", role: "user", content: "restore the nightly job" }],
    });
    await harness.request("thread/close", { threadId, sessionId: started.sessionId });
    await harness.stop();
    extension = await activateExtension({ command: readOnly(home, serverCommand(home)), folders: [repo] });
  });

  after(async () => {
    await extension?.deactivate();
    root.remove();
  });

  it("says Resume cannot continue a thread there, opens no session, and still shows the transcript", async () => {
    vscodeStub.messages = [];
    await vscodeStub.commands.get("sessiond.resumeThread")!(await findThreadNode(extension.api.threads, "from the backup"));

    const warnings = vscodeStub.messages.filter((m) => m.severity === "warning");
    assert.equal(warnings.length, 1, "one warning, no drift modal");
    assert.equal(warnings[0]!.modal, false);
    assert.match(
      warnings[0]!.message,
      new RegExp(`^sessiond's data directory ${home} is read-only \\(.+\\): “from the backup” can be read \\(Open Transcript\\), not continued\\.$`),
    );
    assert.equal(extension.api.sessions.active, undefined, "no session opened");

    await vscodeStub.commands.get("sessiond.openTranscript")!(await findThreadNode(extension.api.threads, "from the backup"));
    const transcript = await shownTranscript(extension.api, threadId);
    assert.equal(transcript.title, "from the backup", "the transcript opens");
    assert.ok(transcript.entries.some((entry) => entry.text === "You restore the nightly job"));
  });
});
