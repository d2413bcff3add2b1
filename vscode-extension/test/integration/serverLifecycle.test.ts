// The server as a process the extension owns: paging and search through the real index,
// a restart after the server dies, and the message a user gets when it is not installed.
import { activateExtension, harnessClient, makeRepo, renderTree, serverCommand, tempDir, vscodeStub, waitFor, type ActivatedExtension } from "../support/harness";
import assert from "node:assert/strict";
import { rmSync } from "node:fs";
import { after, before, describe, it } from "node:test";

describe("the Threads view over many threads", () => {
  const root = tempDir("sessiond-ext-paging-");
  const home = `${root.path}/home`;
  let extension: ActivatedExtension;

  before(async () => {
    const repo = makeRepo(root.path, "app");
    const harness = harnessClient(home, repo);
    for (let n = 1; n <= 7; n++) {
      const started = await harness.request("thread/start", { cwd: repo, title: n === 4 ? "needle in the haystack" : `thread ${n}` });
      await harness.request("thread/close", { threadId: started.thread.threadId, sessionId: started.sessionId });
    }
    await harness.stop();
    // Without its index the server rebuilds it on the first list, reporting $/progress.
    for (const suffix of ["", "-wal", "-shm"]) rmSync(`${home}/index.sqlite3${suffix}`, { force: true });
    extension = await activateExtension({ command: serverCommand(home), folders: [repo], pageSize: 3 });
  });

  after(async () => {
    await extension?.deactivate();
    root.remove();
  });

  const threadRows = async () => (await renderTree(extension.api.threads)).filter((line) => line.startsWith("    ")).map((line) => line.trim().split(" — ")[0]);

  it("shows one page, then the next each time the user clicks Load more", async () => {
    assert.deepEqual(await threadRows(), ["thread 7", "thread 6", "thread 5"]);
    const indexing = await waitFor("the indexing progress to end", () => vscodeStub.progress.find((p) => p.done));
    assert.equal(indexing.title, "Indexing threads");
    assert.ok((await renderTree(extension.api.threads)).includes("  Load more…"));
    const loadMore = async () => {
      const folder = (await extension.api.threads.getChildren())[0]!;
      const node = (await extension.api.threads.getChildren(folder)).find((child) => child.kind === "loadMore");
      assert.ok(node, "a Load more row while the server has more");
      await vscodeStub.commands.get("sessiond.loadMoreThreads")!(node);
    };
    await loadMore();
    assert.deepEqual(await threadRows(), ["thread 7", "thread 6", "thread 5", "needle in the haystack", "thread 3", "thread 2"]);
    await loadMore();
    assert.deepEqual((await threadRows()).slice(-1), ["thread 1"]);
    assert.ok(!(await renderTree(extension.api.threads)).includes("  Load more…"), "no Load more after the last page");
  });

  it("searches through the server, and says so when nothing matches", async () => {
    vscodeStub.inputs.push("needle");
    await vscodeStub.commands.get("sessiond.searchThreads")!();
    assert.deepEqual(await threadRows(), ["needle in the haystack"]);
    assert.equal(vscodeStub.treeViews.get("sessiond.threads")?.description, "search: needle");
    vscodeStub.inputs.push("no such words");
    await vscodeStub.commands.get("sessiond.searchThreads")!();
    assert.deepEqual((await renderTree(extension.api.threads)).slice(1), ["  No threads match “no such words”"]);
    await vscodeStub.commands.get("sessiond.clearSearch")!();
    assert.equal((await threadRows()).length, 3);
  });

  it("starts the server again when it dies, and the view still lists threads", async () => {
    const firstPid = extension.api.client.pid;
    assert.ok(firstPid);
    process.kill(firstPid, "SIGKILL");
    await waitFor("a new server process", () => {
      const pid = extension.api.client.pid;
      return extension.api.client.state === "running" && pid !== firstPid ? pid : undefined;
    });
    assert.deepEqual(await threadRows(), ["thread 7", "thread 6", "thread 5"]);
  });
});

describe("when the server command is missing", () => {
  it("tells the user how to install it, and copies the install command", async () => {
    const extension = await activateExtension({
      command: ["sessiond-is-not-installed-here", "serve", "--stdio"],
      folders: [],
      answers: [(shown) => (shown.buttons.includes("Copy Install Command") ? "Copy Install Command" : undefined)],
    });
    try {
      const error = await waitFor("the error message", () => vscodeStub.messages.find((m) => m.severity === "error"));
      assert.match(error.message, /`sessiond-is-not-installed-here serve --stdio` was not found/);
      assert.match(error.message, /pip install \/path\/to\/sessiond/);
      assert.match(error.message, /not on PyPI/);
      assert.match(error.message, /sessiond\.serverCommand/);
      assert.deepEqual(error.buttons, ["Copy Install Command", "Open Settings"]);
      await waitFor("the clipboard", () => vscodeStub.clipboard || undefined);
      assert.equal(vscodeStub.clipboard, "pip install /path/to/sessiond");
      // The view is empty, so that its welcome content (chosen by this context key) shows how to install it.
      assert.deepEqual(await renderTree(extension.api.threads), []);
      assert.equal(vscodeStub.context.get("sessiond.serverProblem"), "missing");
    } finally {
      await extension.deactivate();
    }
  });

  it("says what went wrong when the command exists but is not a working server", async () => {
    const extension = await activateExtension({ command: [process.execPath, "-e", "console.error('boom: bad install'); process.exit(3)"], folders: [] });
    try {
      const error = await waitFor("the error message", () => vscodeStub.messages.find((m) => m.severity === "error"));
      assert.match(error.message, /did not start: boom: bad install/);
      assert.match(error.message, /pip install \/path\/to\/sessiond/);
      assert.equal(vscodeStub.context.get("sessiond.serverProblem"), "failed");
    } finally {
      await extension.deactivate();
    }
  });
});
