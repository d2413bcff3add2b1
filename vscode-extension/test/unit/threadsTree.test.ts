// The Threads view's own logic: grouping, order, paging, and patching from notifications.
// Its thread/list source is a list in memory here; the real server is in test/integration.
import { vscodeStub } from "../support/vscode";
import { readFileSync } from "node:fs";
import * as path from "node:path";
import assert from "node:assert/strict";
import { beforeEach, describe, it } from "node:test";
import type { ThreadInfo, ThreadListParams, ThreadListResult } from "../../src/protocol";
import { ThreadsTreeProvider } from "../../src/threadsTree";
import { TreeItemCollapsibleState } from "../support/vscode";
import { renderTree } from "../support/harness";

const FOLDER = "/work/shop";

function thread(id: string, minute: number, branch: string | null, extra: Partial<ThreadInfo> = {}): ThreadInfo {
  const at = `2026-03-10T11:${String(minute).padStart(2, "0")}:00Z`;
  return { threadId: id, title: id, workspaceFolder: FOLDER, branch, updatedAt: at, createdAt: at, itemCount: 0, ...extra };
}

/** Pages newest-first with a keyset cursor, like the server; records what it was asked. */
function pagedSource(threads: ThreadInfo[]) {
  const calls: ThreadListParams[] = [];
  const source = {
    calls,
    async request(_method: "thread/list", params: ThreadListParams): Promise<ThreadListResult> {
      calls.push(params);
      const sorted = threads.filter((t) => (t.archived ?? false) === (params.archived ?? false)).sort((a, b) => b.updatedAt!.localeCompare(a.updatedAt!));
      const start = params.cursor ? Number(params.cursor) : 0;
      const limit = params.limit ?? 50;
      const page = sorted.slice(start, start + limit);
      return { threads: page, nextCursor: start + limit < sorted.length ? String(start + limit) : null };
    },
  };
  return source;
}

describe("ThreadsTreeProvider", () => {
  const now = () => new Date("2026-03-10T12:00:00Z");
  let source: ReturnType<typeof pagedSource>;
  let tree: ThreadsTreeProvider;

  beforeEach(() => {
    source = pagedSource([thread("a", 1, "main"), thread("b", 5, "feature"), thread("c", 9, "main"), thread("d", 3, null)]);
    tree = new ThreadsTreeProvider(source as never, () => 3, now);
    tree.setFolders([{ path: FOLDER, name: "shop" }]);
  });

  it("groups by branch, the branch with the newest thread first, threads newest first, and asks for the folder's threads only", async () => {
    assert.deepEqual(await renderTree(tree), [
      "shop",
      "  main",
      "    c — 51 min ago",
      "  feature",
      "    b — 55 min ago",
      "  (no branch)",
      "    d — 57 min ago",
      "  Load more…",
    ]);
    assert.deepEqual(source.calls[0], { workspaceFolder: FOLDER, archived: false, limit: 3 });
  });

  it("Load more passes the cursor and adds the next page to the groups", async () => {
    const folder = (await tree.getChildren())[0]!;
    const loadMore = (await tree.getChildren(folder)).find((n) => n.kind === "loadMore");
    assert.ok(loadMore?.kind === "loadMore");
    await tree.loadMore(loadMore.group);
    assert.equal(source.calls[1]?.cursor, "3");
    const lines = await renderTree(tree);
    assert.deepEqual(lines.slice(1, 4), ["  main", "    c — 51 min ago", "    a — 59 min ago"]);
    assert.ok(!lines.includes("  Load more…"));
  });

  it("moves an updated thread to its new place, and drops deleted or archived ones", async () => {
    await renderTree(tree);
    tree.applyThreadChange({ ...thread("b", 59, "feature"), title: "b renamed", itemCount: 4 }, false);
    tree.applyThreadChange(thread("c", 9, "main"), true);
    let lines = await renderTree(tree);
    assert.deepEqual(lines.slice(1, 3), ["  feature", "    b renamed — 1 min ago"]);
    assert.ok(!lines.some((line) => line.includes("    c —")));
    tree.applyThreadChange({ ...thread("b", 59, "feature"), archived: true }, false);
    lines = await renderTree(tree);
    assert.ok(!lines.some((line) => line.includes("b renamed")));
  });

  it("patches in place a sub-agent's thread the server listed at the top (its parent is not stored)", async () => {
    source = pagedSource([thread("orphan", 5, "main", { parentThreadId: "gone" })]);
    tree = new ThreadsTreeProvider(source as never, () => 3, now);
    tree.setFolders([{ path: FOLDER, name: "shop" }]);
    assert.deepEqual(await renderTree(tree), ["shop", "  main", "    orphan — 55 min ago"]);
    tree.applyThreadChange(thread("orphan", 59, "main", { parentThreadId: "gone", title: "orphan, renamed" }), false);
    assert.deepEqual(await renderTree(tree), ["shop", "  main", "    orphan, renamed — 1 min ago"]);
  });

  it("puts a thread started elsewhere on top of its folder, and ignores other folders' threads", async () => {
    await renderTree(tree);
    tree.applyThreadChange(thread("new", 59, "main"), false);
    tree.applyThreadChange({ ...thread("elsewhere", 59, "main"), workspaceFolder: "/other" }, false);
    const lines = await renderTree(tree);
    assert.deepEqual(lines.slice(1, 3), ["  main", "    new — 1 min ago"]);
    assert.ok(!lines.some((line) => line.includes("elsewhere")));
  });

  it("keeps a thread an agent recorded outside any editor (no workspaceFolder, cwd in the folder) when it changes, as the server lists it", async () => {
    const outside = { workspaceFolder: null, cwd: `${FOLDER}/src` };
    source = pagedSource([thread("terminal", 5, "main", outside)]);
    tree = new ThreadsTreeProvider(source as never, () => 3, now, async () => "main");
    tree.setFolders([{ path: FOLDER, name: "shop" }]);
    assert.deepEqual(await renderTree(tree), ["shop", "  main — current", "    terminal — 55 min ago"]);
    // Resumed here: the server says it was updated; it stays, marked as the branch's thread.
    tree.applyThreadChange(thread("terminal", 59, "main", outside), false);
    tree.setOpenHere("terminal");
    assert.deepEqual(await renderTree(tree), ["shop", "  main — current", "    terminal — 1 min ago"]);
    assert.equal(tree.stateOf(thread("terminal", 59, "main", outside)).currentBranch, "main");
    // A sibling directory whose name starts the same is not inside the folder.
    tree.applyThreadChange(thread("sibling", 59, "main", { workspaceFolder: null, cwd: `${FOLDER}-old` }), false);
    assert.ok(!(await renderTree(tree)).some((line) => line.includes("sibling")));
  });

  it("nests sub-agent threads under their parent, listed when it is expanded, and keeps them there as they change", async () => {
    const parent = thread("parent", 5, "main", { childCount: 1 });
    const child = thread("sub-agent", 6, "main", { parentThreadId: "parent" });
    const calls: ThreadListParams[] = [];
    const nested = {
      async request(_method: "thread/list", params: ThreadListParams): Promise<ThreadListResult> {
        calls.push(params);
        // As the server lists them: top-level threads, or one thread's children.
        const threads = params.parentThreadId ? [child].filter((t) => t.parentThreadId === params.parentThreadId) : [parent];
        return { threads, nextCursor: null };
      },
    };
    tree = new ThreadsTreeProvider(nested as never, () => 3, now);
    tree.setFolders([{ path: FOLDER, name: "shop" }]);
    assert.deepEqual(await renderTree(tree), ["shop", "  main", "    parent — 55 min ago", "      sub-agent — 54 min ago"]);
    const parentNode = (await tree.getChildren((await tree.getChildren((await tree.getChildren())[0]))[0]))[0]!;
    assert.equal(tree.getTreeItem(parentNode).collapsibleState, TreeItemCollapsibleState.Collapsed);
    assert.deepEqual(calls.slice(1), [{ parentThreadId: "parent", limit: 200 }]);
    // A notification counts no children (null): the parent keeps its count; a child's change
    // stays under the parent, and a new sub-agent started there is listed there.
    tree.applyThreadChange({ ...parent, updatedAt: "2026-03-10T11:58:00Z", childCount: null }, false);
    tree.applyThreadChange({ ...child, title: "sub-agent, renamed" }, false);
    tree.applyThreadChange(thread("second", 59, "main", { parentThreadId: "parent" }), false, true);
    assert.deepEqual(await renderTree(tree), [
      "shop",
      "  main",
      "    parent — 2 min ago",
      "      second — 1 min ago",
      "      sub-agent, renamed — 54 min ago",
    ]);
    assert.equal(tree.loadedThreads().find((t) => t.threadId === "parent")?.childCount, 2);
  });

  it("drops a page asked for before a refresh instead of mixing it into the new listing", async () => {
    let release: (() => void) | undefined;
    const slow = {
      calls: 0,
      async request(_method: "thread/list", params: ThreadListParams): Promise<ThreadListResult> {
        slow.calls++;
        if (slow.calls === 1) {
          await new Promise<void>((resolve) => (release = resolve));
          return { threads: [thread("stale", 1, "old-branch")], nextCursor: null };
        }
        return source.request("thread/list", params);
      },
    };
    tree = new ThreadsTreeProvider(slow as never, () => 3, now, async () => "main");
    tree.setFolders([{ path: FOLDER, name: "shop" }]);
    const first = tree.getChildren();
    await new Promise((resolve) => setImmediate(resolve));
    tree.refresh(); // e.g. the server (re)started while the first listing was in flight
    release!();
    await first;
    const lines = await renderTree(tree);
    assert.ok(!lines.some((line) => line.includes("stale") || line.includes("old-branch")), lines.join("\n"));
    assert.deepEqual(lines.slice(0, 3), ["shop", "  main — current", "    c — 51 min ago"], "the branch read by the new listing");
  });

  it("marks the folder's current branch, and flags threads recorded on another one as needing review", async () => {
    tree = new ThreadsTreeProvider(source as never, () => 3, now, async (folder) => (folder === FOLDER ? "feature" : undefined));
    tree.setFolders([{ path: FOLDER, name: "shop" }]);
    const rows = await rowsOf(tree);
    assert.equal(rows.find((row) => row.label === "feature")?.description, "current");
    assert.equal(rows.find((row) => row.label === "main")?.description, undefined);
    assert.equal(rows.find((row) => row.label === "b")?.icon, "comment-discussion", "b is on the current branch");
    assert.equal(rows.find((row) => row.label === "c")?.icon, "warning", "c was recorded on main");
    assert.equal(rows.find((row) => row.label === "d")?.icon, "comment-discussion", "d has no branch to drift from");
  });

  it("moves the current-branch mark and the review flags when the folder switches branches", async () => {
    let checkedOut = "main";
    tree = new ThreadsTreeProvider(source as never, () => 3, now, async () => checkedOut);
    tree.setFolders([{ path: FOLDER, name: "shop" }]);
    let rows = await rowsOf(tree);
    assert.equal(rows.find((row) => row.label === "c")?.icon, "comment-discussion");
    checkedOut = "feature";
    await tree.refreshBranches();
    rows = await rowsOf(tree);
    assert.equal(rows.find((row) => row.label === "feature")?.description, "current");
    assert.equal(rows.find((row) => row.label === "main")?.description, undefined);
    assert.equal(rows.find((row) => row.label === "c")?.icon, "warning", "c was recorded on main");
    assert.equal(rows.find((row) => row.label === "b")?.icon, "comment-discussion");
    assert.equal(source.calls.length, 1, "the threads were not listed again");
  });

  it("shows which thread is open in this window, and which one another window holds", async () => {
    await renderTree(tree);
    tree.setOpenHere("c");
    tree.setOpenElsewhere("b", "nvim-sessiond (connection 2, pid 7)");
    let rows = await rowsOf(tree);
    assert.equal(rows.find((row) => row.label === "c")?.icon, "debug-start");
    assert.equal(rows.find((row) => row.label === "b")?.icon, "lock");
    assert.match(rows.find((row) => row.label === "b")?.tooltip ?? "", /Open elsewhere: nvim-sessiond \(connection 2, pid 7\)/);
    tree.setOpenHere("b"); // resumed here after the other window let go
    rows = await rowsOf(tree);
    assert.equal(rows.find((row) => row.label === "b")?.icon, "debug-start");
    assert.equal(rows.find((row) => row.label === "c")?.icon, "comment-discussion");
  });

  it("is empty when the workspace has no threads, so the welcome view says what to do next", async () => {
    source = pagedSource([]);
    tree = new ThreadsTreeProvider(source as never, () => 3, now);
    tree.setFolders([{ path: FOLDER, name: "shop" }]);
    assert.deepEqual(await tree.getChildren(), []);
    assert.equal(vscodeStub.context.get("sessiond.noThreads"), true);
    assert.match(welcomeFor("!sessiond.serverProblem && sessiond.noThreads"), /No threads yet in this workspace[\s\S]*\(command:sessiond\.newThread\)/);
    tree.applyThreadChange(thread("first", 59, "main"), false);
    assert.deepEqual(await renderTree(tree), ["shop", "  main", "    first — 1 min ago"]);
    assert.equal(vscodeStub.context.get("sessiond.noThreads"), false);
  });

  it("is empty while the server is missing or failed, and the welcome view says how to fix each", async () => {
    tree.setServerProblem("missing");
    assert.deepEqual(await tree.getChildren(), []);
    assert.equal(source.calls.length, 0, "nothing is asked of a server that is not there");
    assert.equal(vscodeStub.context.get("sessiond.serverProblem"), "missing");
    assert.match(welcomeFor("sessiond.serverProblem == missing"), /pip install \/path\/to\/sessiond[\s\S]*\(command:sessiond\.restartServer\)/);
    tree.setServerProblem("failed");
    assert.equal(vscodeStub.context.get("sessiond.serverProblem"), "failed");
    assert.match(welcomeFor("sessiond.serverProblem == failed"), /did not start[\s\S]*sessiond\.serverCommand/);
    tree.setServerProblem(undefined);
    assert.equal(vscodeStub.context.get("sessiond.serverProblem"), "");
    assert.equal((await renderTree(tree))[0], "shop");
  });
});

/** The Threads view's welcome content shown under `when` (package.json viewsWelcome). */
function welcomeFor(when: string): string {
  const manifest = JSON.parse(readFileSync(path.join(__dirname, "..", "..", "..", "package.json"), "utf8")) as {
    contributes: { viewsWelcome: { view: string; when?: string; contents: string }[] };
  };
  const entry = manifest.contributes.viewsWelcome.find((candidate) => candidate.view === "sessiond.threads" && candidate.when === when);
  assert.ok(entry, `a welcome entry for ${when}`);
  return entry.contents;
}

/** Every row with what VS Code draws from its TreeItem. */
async function rowsOf(tree: ThreadsTreeProvider): Promise<{ label: string; description?: string; icon?: string; tooltip?: string }[]> {
  const rows: { label: string; description?: string; icon?: string; tooltip?: string }[] = [];
  const walk = async (node?: Parameters<ThreadsTreeProvider["getChildren"]>[0]): Promise<void> => {
    for (const child of await tree.getChildren(node)) {
      const item = tree.getTreeItem(child);
      const tooltip = item.tooltip as { value?: string } | string | undefined;
      rows.push({
        label: item.label as string,
        ...(item.description !== undefined ? { description: item.description as string } : {}),
        ...(item.iconPath ? { icon: (item.iconPath as { id: string }).id } : {}),
        ...(tooltip !== undefined ? { tooltip: typeof tooltip === "string" ? tooltip : (tooltip.value ?? "") } : {}),
      });
      await walk(child);
    }
  };
  await walk();
  return rows;
}
