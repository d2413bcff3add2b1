// The Threads view: workspace folder → branch → threads, newest first, one page at a time;
// a thread's sub-agent threads (childCount) nested under it, listed when it is expanded; a
// session key's reset chain as one row, the thread that goes on, with the threads it
// replaced under it (newest first).
import { execFile } from "node:child_process";
import * as vscode from "vscode";
import type { SessiondClient } from "./client";
import { describeError } from "./errors";
import { threadDescription, threadIcon, threadLabel, threadTooltip, type ThreadState } from "./format";
import type { ThreadInfo } from "./protocol";

export interface FolderRef {
  /** null: no folder is open, so the group lists every thread. */
  path: string | null;
  name: string;
}

interface FolderGroup extends FolderRef {
  threads: ThreadInfo[];
  nextCursor: string | null;
  loaded: boolean;
  loading: Promise<void> | undefined;
  /** Why the first page could not be listed; shown in place of the threads. */
  error: string | undefined;
  /** The branch the folder is on now (read with each first page). */
  currentBranch: string | undefined;
}

/** Why the view is empty and shows its welcome content instead (package.json viewsWelcome). */
export type ServerProblem = "missing" | "failed";

export type ThreadsNode =
  | { kind: "folder"; group: FolderGroup }
  | { kind: "branch"; group: FolderGroup; branch: string | null }
  /** `chainOf`: shown under the thread (its id) that replaced it, in a reset chain. */
  | { kind: "thread"; thread: ThreadInfo; chainOf?: string }
  | { kind: "loadMore"; group: FolderGroup }
  | { kind: "notice"; text: string };

const NO_BRANCH = "(no branch)";
/** A group's pages, before the first is loaded (a new array each time: groups never share one). */
function unloaded(): Omit<FolderGroup, keyof FolderRef> {
  return { threads: [], nextCursor: null, loaded: false, loading: undefined, error: undefined, currentBranch: undefined };
}

/** The branch checked out in `folder`, or undefined (not a repository, detached HEAD, no git). */
export function gitBranch(folder: string): Promise<string | undefined> {
  return new Promise((resolve) => {
    execFile("git", ["rev-parse", "--abbrev-ref", "HEAD"], { cwd: folder, timeout: 5000 }, (error, stdout) => {
      const branch = stdout.trim();
      resolve(error || !branch || branch === "HEAD" ? undefined : branch);
    });
  });
}

/**
 * Whether `folder`'s group shows the thread: thread/list's own rule (its workspaceFolder, or a
 * cwd at or under the folder). A thread recorded where no editor had the folder open (an
 * agent in a terminal) has no workspaceFolder, yet the folder lists it: a change to it must
 * not take it out of the view.
 */
export function inFolder(thread: ThreadInfo, folder: string): boolean {
  const base = folder.replace(/\/+$/, "");
  return thread.workspaceFolder === folder || thread.cwd === folder || (thread.cwd ?? "").startsWith(`${base}/`);
}

/** A notification's ThreadInfo over the listed one: it counts no children (null), so the
 * listing's count stays. */
function merged(listed: ThreadInfo, update: ThreadInfo): ThreadInfo {
  return { ...listed, ...update, childCount: update.childCount ?? listed.childCount ?? null };
}

/** The loaded threads another loaded thread replaced (a reset): they are shown under it. */
export function replacedAmong(threads: readonly ThreadInfo[]): Set<string> {
  const ids = new Set(threads.map((thread) => thread.threadId));
  const replaced = new Set<string>();
  for (const thread of threads) {
    if (thread.previousThreadId && ids.has(thread.previousThreadId)) replaced.add(thread.previousThreadId);
    if (thread.nextThreadId && ids.has(thread.nextThreadId)) replaced.add(thread.threadId);
  }
  return replaced;
}

function newestFirst(a: ThreadInfo, b: ThreadInfo): number {
  return (b.updatedAt ?? b.createdAt ?? "").localeCompare(a.updatedAt ?? a.createdAt ?? "");
}

export class ThreadsTreeProvider implements vscode.TreeDataProvider<ThreadsNode> {
  private readonly changed = new vscode.EventEmitter<ThreadsNode | undefined>();
  readonly onDidChangeTreeData = this.changed.event;
  private groups: FolderGroup[] = [];
  /** Bumped by every refresh: a page asked for before it is dropped, not mixed into the new one. */
  private generation = 0;
  private serverProblem: ServerProblem | undefined;
  private empty: boolean | undefined;
  private openHere: string | undefined;
  private readonly openElsewhere = new Map<string, string>();
  /** Sub-agent threads by parent id, as `thread/list {parentThreadId}` gave them. */
  private readonly children = new Map<string, ThreadInfo[]>();
  /** The threads each chain's newest one replaced, newest first, by its id. */
  private readonly chains = new Map<string, ThreadInfo[]>();
  search: string | undefined;
  showArchived = false;

  constructor(
    private readonly client: Pick<SessiondClient, "request">,
    private readonly pageSize: () => number,
    private readonly now: () => Date = () => new Date(),
    private readonly currentBranch: (folder: string) => Promise<string | undefined> = async () => undefined,
  ) {}

  setFolders(folders: readonly FolderRef[]): void {
    const list: FolderRef[] = folders.length ? [...folders] : [{ path: null, name: "All threads" }];
    this.groups = list.map((folder) => ({ ...folder, ...unloaded() }));
    this.generation++;
    this.changed.fire(undefined);
  }

  /** Drops every loaded page and what refusals said; the view asks again for what is visible. */
  refresh(): void {
    this.openElsewhere.clear();
    this.children.clear();
    this.chains.clear();
    for (const group of this.groups) Object.assign(group, unloaded());
    this.generation++;
    this.changed.fire(undefined);
  }

  /** A folder switched branches (its .git/HEAD changed): its marks follow, its pages stay. */
  async refreshBranches(): Promise<void> {
    const groups = this.groups.filter((group) => group.loaded && group.path !== null);
    const branches = await Promise.all(groups.map((group) => this.currentBranch(group.path!)));
    if (groups.some((group, index) => group.currentBranch !== branches[index])) {
      groups.forEach((group, index) => (group.currentBranch = branches[index]));
      this.changed.fire(undefined);
    }
  }

  /** The server is missing or did not start (the view shows how to fix it), or runs again. */
  setServerProblem(problem: ServerProblem | undefined): void {
    this.serverProblem = problem;
    void vscode.commands.executeCommand("setContext", "sessiond.serverProblem", problem ?? "");
    this.refresh();
  }

  /** The thread resumed in this window (its row says so), or none. */
  setOpenHere(threadId: string | undefined): void {
    this.openHere = threadId;
    if (threadId) this.openElsewhere.delete(threadId);
    this.changed.fire(undefined);
  }

  /** A resume was refused because `holder` has the thread open (ThreadBusy). */
  setOpenElsewhere(threadId: string, holder: string): void {
    this.openElsewhere.set(threadId, holder);
    this.changed.fire(undefined);
  }

  stateOf(thread: ThreadInfo): ThreadState {
    const group = this.groups.find((candidate) => candidate.path !== null && inFolder(thread, candidate.path));
    return {
      openHere: this.openHere === thread.threadId,
      ...(this.openElsewhere.has(thread.threadId) ? { openElsewhere: this.openElsewhere.get(thread.threadId) } : {}),
      ...(group?.currentBranch ? { currentBranch: group.currentBranch } : {}),
    };
  }

  setSearch(search: string | undefined): void {
    this.search = search?.trim() || undefined;
    void vscode.commands.executeCommand("setContext", "sessiond.searchActive", this.search !== undefined);
    this.refresh();
  }

  setShowArchived(showArchived: boolean): void {
    this.showArchived = showArchived;
    this.refresh();
  }

  async loadMore(group: FolderGroup): Promise<void> {
    if (group.loading) return group.loading;
    if (group.loaded && group.nextCursor === null) return;
    group.loading = this.fetchPage(group).finally(() => {
      group.loading = undefined;
    });
    return group.loading;
  }

  private async fetchPage(group: FolderGroup): Promise<void> {
    const generation = this.generation;
    const currentBranch = !group.loaded && group.path !== null ? await this.currentBranch(group.path) : group.currentBranch;
    const result = await this.client.request("thread/list", {
      ...(group.path !== null ? { workspaceFolder: group.path } : {}),
      archived: this.showArchived,
      ...(this.search ? { search: this.search } : {}),
      ...(group.nextCursor ? { cursor: group.nextCursor } : {}),
      limit: this.pageSize(),
    });
    if (generation !== this.generation) return;
    group.currentBranch = currentBranch;
    const known = new Set(group.threads.map((thread) => thread.threadId));
    group.threads.push(...result.threads.filter((thread) => !known.has(thread.threadId)));
    group.nextCursor = result.nextCursor ?? null;
    group.loaded = true;
    this.changed.fire(undefined);
  }

  /** A thread/updated or thread/started (`started`) notification: patch the loaded pages in
   * place. A sub-agent's thread goes under its parent, never among the top-level ones,
   * unless the server listed it there (its parent is not stored). */
  applyThreadChange(thread: ThreadInfo, deleted: boolean, started = false): void {
    if (thread.sessionKey || deleted) this.chains.clear(); // a chain may have grown or lost one
    const atTop = this.groups.some((group) => group.threads.some((known) => known.threadId === thread.threadId));
    if (thread.parentThreadId && !atTop) {
      this.applyChildChange(thread.parentThreadId, thread, deleted, started);
      return;
    }
    let changed = false;
    for (const group of this.groups) {
      const index = group.threads.findIndex((known) => known.threadId === thread.threadId);
      const belongs =
        !deleted &&
        (thread.archived ?? false) === this.showArchived &&
        (group.path === null || inFolder(thread, group.path));
      if (index >= 0) {
        if (belongs) group.threads[index] = merged(group.threads[index]!, thread);
        else group.threads.splice(index, 1);
        if (!belongs) this.openElsewhere.delete(thread.threadId);
        changed = true;
      } else if (belongs && group.loaded && !this.search) {
        // A new or newly visible thread is the most recently updated one: it goes on top.
        group.threads.unshift(thread);
        changed = true;
      }
    }
    if (changed) this.changed.fire(undefined);
  }

  /** A sub-agent's thread changed: patched under its parent when the parent's children are
   * listed, and the parent's count follows (a thread/started one counts before they are). */
  private applyChildChange(parentId: string, thread: ThreadInfo, deleted: boolean, started: boolean): void {
    const visible = !deleted && !(thread.archived ?? false);
    const listed = this.children.get(parentId);
    if (listed) {
      const index = listed.findIndex((child) => child.threadId === thread.threadId);
      if (index >= 0 && visible) listed[index] = merged(listed[index]!, thread);
      else if (index >= 0) listed.splice(index, 1);
      else if (visible) listed.unshift(thread);
    }
    for (const parent of this.allThreads()) {
      if (parent.threadId !== parentId) continue;
      if (listed) parent.childCount = listed.length;
      else if (started) parent.childCount = (parent.childCount ?? 0) + 1;
    }
    this.changed.fire(undefined);
  }

  /** Every thread currently loaded (for tests and for commands given a thread id). */
  loadedThreads(): ThreadInfo[] {
    return this.allThreads();
  }

  private allThreads(): ThreadInfo[] {
    return [...this.groups.flatMap((group) => group.threads), ...[...this.children.values()].flat()];
  }

  /** A thread's sub-agent threads, newest first (every page, asked for once). */
  private async childrenOf(thread: ThreadInfo): Promise<ThreadInfo[]> {
    const cached = this.children.get(thread.threadId);
    if (cached) return cached;
    const generation = this.generation;
    const found: ThreadInfo[] = [];
    let cursor: string | null = null;
    do {
      const page: { threads: ThreadInfo[]; nextCursor?: string | null } = await this.client.request("thread/list", {
        parentThreadId: thread.threadId,
        ...(cursor ? { cursor } : {}),
        limit: 200,
      });
      found.push(...page.threads);
      cursor = page.nextCursor ?? null;
    } while (cursor !== null);
    if (generation === this.generation) this.children.set(thread.threadId, found);
    return found;
  }

  /** The threads `head` replaced, newest first: followed by `previousThreadId`, from the
   * loaded rows, else from its key's threads (`thread/list {sessionKey}`, every page). */
  private async chainOf(head: ThreadInfo): Promise<ThreadInfo[]> {
    const cached = this.chains.get(head.threadId);
    if (cached) return cached;
    const generation = this.generation;
    const byId = new Map(this.allThreads().map((thread) => [thread.threadId, thread] as const));
    if (head.sessionKey && !this.chainLoaded(head, byId)) {
      let cursor: string | null = null;
      do {
        const page: { threads: ThreadInfo[]; nextCursor?: string | null } = await this.client.request("thread/list", {
          sessionKey: head.sessionKey,
          archived: this.showArchived,
          ...(cursor ? { cursor } : {}),
          limit: 200,
        });
        for (const thread of page.threads) byId.set(thread.threadId, thread);
        cursor = page.nextCursor ?? null;
      } while (cursor !== null);
    }
    const chain: ThreadInfo[] = [];
    const seen = new Set([head.threadId]);
    for (let previous = head.previousThreadId; previous && !seen.has(previous); ) {
      const thread = byId.get(previous);
      if (!thread) break;
      seen.add(previous);
      chain.push(thread);
      previous = thread.previousThreadId;
    }
    if (generation === this.generation) this.chains.set(head.threadId, chain);
    return chain;
  }

  private chainLoaded(head: ThreadInfo, byId: Map<string, ThreadInfo>): boolean {
    for (let previous = head.previousThreadId; previous; previous = byId.get(previous)?.previousThreadId) {
      if (!byId.has(previous)) return false;
    }
    return true;
  }

  async getChildren(node?: ThreadsNode): Promise<ThreadsNode[]> {
    if (!node) {
      // No server, or no thread anywhere: nothing, so that the view's welcome content says
      // what to do next. Otherwise every folder's first page, so that we know which.
      if (this.serverProblem) return [];
      await Promise.all(this.groups.map((group) => this.loadFirstPage(group)));
      const empty =
        !this.search && !this.showArchived && this.groups.every((group) => group.loaded && !group.error && group.threads.length === 0);
      if (empty !== this.empty) {
        this.empty = empty;
        void vscode.commands.executeCommand("setContext", "sessiond.noThreads", empty);
      }
      return empty ? [] : this.groups.map((group): ThreadsNode => ({ kind: "folder", group }));
    }
    if (node.kind === "folder") {
      const { group } = node;
      await this.loadFirstPage(group);
      if (group.error) return [{ kind: "notice", text: group.error }];
      const branches = new Map<string | null, ThreadInfo>();
      for (const thread of [...group.threads].sort(newestFirst)) {
        if (!branches.has(thread.branch ?? null)) branches.set(thread.branch ?? null, thread);
      }
      const children: ThreadsNode[] = [...branches.keys()].map((branch) => ({ kind: "branch", group, branch }));
      if (group.nextCursor !== null) children.push({ kind: "loadMore", group });
      if (children.length === 0) {
        children.push({ kind: "notice", text: this.search ? `No threads match “${this.search}”` : "No threads" });
      }
      return children;
    }
    if (node.kind === "branch") {
      const replaced = replacedAmong(node.group.threads);
      return node.group.threads
        .filter((thread) => (thread.branch ?? null) === node.branch && !replaced.has(thread.threadId))
        .sort(newestFirst)
        .map((thread) => ({ kind: "thread", thread }));
    }
    if (node.kind !== "thread") return [];
    const nodes: ThreadsNode[] = [];
    if (!node.chainOf && node.thread.previousThreadId) {
      try {
        const chain = await this.chainOf(node.thread);
        nodes.push(...chain.map((thread): ThreadsNode => ({ kind: "thread", thread, chainOf: node.thread.threadId })));
      } catch (error) {
        nodes.push({ kind: "notice", text: describeError("list the threads this one replaced", error) });
      }
    }
    if ((node.thread.childCount ?? 0) > 0) {
      try {
        const children = await this.childrenOf(node.thread);
        nodes.push(...[...children].sort(newestFirst).map((thread): ThreadsNode => ({ kind: "thread", thread })));
      } catch (error) {
        nodes.push({ kind: "notice", text: describeError("list sub-agent threads", error) });
      }
    }
    return nodes;
  }

  /** A failure is kept on the group (shown as its notice); the error dialog comes from whoever started the server. */
  private async loadFirstPage(group: FolderGroup): Promise<void> {
    if (group.loaded || group.error) return;
    try {
      await this.loadMore(group);
    } catch (error) {
      group.error = describeError("list threads", error);
    }
  }

  getTreeItem(node: ThreadsNode): vscode.TreeItem {
    switch (node.kind) {
      case "folder": {
        const item = new vscode.TreeItem(node.group.name, vscode.TreeItemCollapsibleState.Expanded);
        item.iconPath = new vscode.ThemeIcon("root-folder");
        // The path would push everything else out of a narrow side bar: it is in the tooltip.
        item.tooltip = node.group.path ?? undefined;
        item.contextValue = "folder";
        return item;
      }
      case "branch": {
        const item = new vscode.TreeItem(node.branch ?? NO_BRANCH, vscode.TreeItemCollapsibleState.Expanded);
        item.iconPath = new vscode.ThemeIcon("git-branch");
        if (node.branch !== null && node.branch === node.group.currentBranch) item.description = "current";
        item.contextValue = "branch";
        return item;
      }
      case "thread": {
        const { thread } = node;
        const chained = !node.chainOf && !!thread.previousThreadId;
        const nested =
          (thread.childCount ?? 0) > 0 || chained ? vscode.TreeItemCollapsibleState.Collapsed : vscode.TreeItemCollapsibleState.None;
        const item = new vscode.TreeItem(threadLabel(thread), nested);
        // A replaced thread under the one that replaced it: an id of its own there.
        item.id = node.chainOf ? `${node.chainOf}/${thread.threadId}` : thread.threadId;
        const described = threadDescription(thread, this.now());
        const reset = chained && thread.resetReason ? `new after ${thread.resetReason} reset` : "";
        item.description = [node.chainOf ? "replaced" : "", described, reset].filter(Boolean).join(" · ");
        const state = this.stateOf(thread);
        item.tooltip = new vscode.MarkdownString(threadTooltip(thread, this.now(), state), true);
        item.iconPath = new vscode.ThemeIcon(threadIcon(thread, state));
        item.contextValue = thread.archived ? "thread.archived" : "thread";
        item.command = { command: "sessiond.openTranscript", title: "Open Transcript", arguments: [node] };
        return item;
      }
      case "loadMore": {
        const item = new vscode.TreeItem("Load more…", vscode.TreeItemCollapsibleState.None);
        item.iconPath = new vscode.ThemeIcon("ellipsis");
        item.contextValue = "loadMore";
        item.command = { command: "sessiond.loadMoreThreads", title: "Load More Threads", arguments: [node] };
        return item;
      }
      case "notice": {
        const item = new vscode.TreeItem(node.text, vscode.TreeItemCollapsibleState.None);
        item.iconPath = new vscode.ThemeIcon("info");
        item.contextValue = "notice";
        return item;
      }
    }
  }
}
