// The Threads view's own logic: grouping, order, paging, and patching from notifications.
// Its thread/list source is a list in memory here; the real server is in test/integration.
import "../support/vscode";
import assert from "node:assert/strict";
import { beforeEach, describe, it } from "node:test";
import type { ThreadInfo, ThreadListParams, ThreadListResult } from "../../src/protocol";
import { ThreadsTreeProvider } from "../../src/threadsTree";
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
      `shop — ${FOLDER}`,
      "  main",
      "    c — 51 min ago · main · 0 items",
      "  feature",
      "    b — 55 min ago · feature · 0 items",
      "  (no branch)",
      "    d — 57 min ago · 0 items",
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
    assert.deepEqual(lines.slice(1, 4), ["  main", "    c — 51 min ago · main · 0 items", "    a — 59 min ago · main · 0 items"]);
    assert.ok(!lines.includes("  Load more…"));
  });

  it("moves an updated thread to its new place, and drops deleted or archived ones", async () => {
    await renderTree(tree);
    tree.applyThreadChange({ ...thread("b", 59, "feature"), title: "b renamed", itemCount: 4 }, false);
    tree.applyThreadChange(thread("c", 9, "main"), true);
    let lines = await renderTree(tree);
    assert.deepEqual(lines.slice(1, 3), ["  feature", "    b renamed — 1 min ago · feature · 4 items"]);
    assert.ok(!lines.some((line) => line.includes("    c —")));
    tree.applyThreadChange({ ...thread("b", 59, "feature"), archived: true }, false);
    lines = await renderTree(tree);
    assert.ok(!lines.some((line) => line.includes("b renamed")));
  });

  it("puts a thread started elsewhere on top of its folder, and ignores other folders' threads", async () => {
    await renderTree(tree);
    tree.applyThreadChange(thread("new", 59, "main"), false);
    tree.applyThreadChange({ ...thread("elsewhere", 59, "main"), workspaceFolder: "/other" }, false);
    const lines = await renderTree(tree);
    assert.deepEqual(lines.slice(1, 3), ["  main", "    new — 1 min ago · main · 0 items"]);
    assert.ok(!lines.some((line) => line.includes("elsewhere")));
  });
});
