// The Threads view: workspace folder → branch → threads, newest first, one page at a time.
import * as vscode from "vscode";
import type { SessiondClient } from "./client";
import { describeError } from "./errors";
import { threadDescription, threadLabel } from "./format";
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
}

export type ThreadsNode =
  | { kind: "folder"; group: FolderGroup }
  | { kind: "branch"; group: FolderGroup; branch: string | null }
  | { kind: "thread"; thread: ThreadInfo }
  | { kind: "loadMore"; group: FolderGroup }
  | { kind: "notice"; text: string };

const NO_BRANCH = "(no branch)";

function newestFirst(a: ThreadInfo, b: ThreadInfo): number {
  return (b.updatedAt ?? b.createdAt ?? "").localeCompare(a.updatedAt ?? a.createdAt ?? "");
}

export class ThreadsTreeProvider implements vscode.TreeDataProvider<ThreadsNode> {
  private readonly changed = new vscode.EventEmitter<ThreadsNode | undefined>();
  readonly onDidChangeTreeData = this.changed.event;
  private groups: FolderGroup[] = [];
  private notice: string | undefined;
  search: string | undefined;
  showArchived = false;

  constructor(
    private readonly client: Pick<SessiondClient, "request">,
    private readonly pageSize: () => number,
    private readonly now: () => Date = () => new Date(),
  ) {}

  setFolders(folders: readonly FolderRef[]): void {
    const list: FolderRef[] = folders.length ? [...folders] : [{ path: null, name: "All threads" }];
    this.groups = list.map((folder) => ({ ...folder, threads: [], nextCursor: null, loaded: false, loading: undefined }));
    this.changed.fire(undefined);
  }

  /** Drops every loaded page; the view asks again for what is visible. */
  refresh(notice?: string): void {
    this.notice = notice;
    for (const group of this.groups) Object.assign(group, { threads: [], nextCursor: null, loaded: false, loading: undefined });
    this.changed.fire(undefined);
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
    const result = await this.client.request("thread/list", {
      ...(group.path !== null ? { workspaceFolder: group.path } : {}),
      archived: this.showArchived,
      ...(this.search ? { search: this.search } : {}),
      ...(group.nextCursor ? { cursor: group.nextCursor } : {}),
      limit: this.pageSize(),
    });
    const known = new Set(group.threads.map((thread) => thread.threadId));
    group.threads.push(...result.threads.filter((thread) => !known.has(thread.threadId)));
    group.nextCursor = result.nextCursor ?? null;
    group.loaded = true;
    this.changed.fire(undefined);
  }

  /** A thread/updated or thread/started notification: patch the loaded pages in place. */
  applyThreadChange(thread: ThreadInfo, deleted: boolean): void {
    let changed = false;
    for (const group of this.groups) {
      const index = group.threads.findIndex((known) => known.threadId === thread.threadId);
      const belongs =
        !deleted &&
        (thread.archived ?? false) === this.showArchived &&
        (group.path === null || thread.workspaceFolder === group.path);
      if (index >= 0) {
        if (belongs) group.threads[index] = { ...group.threads[index], ...thread };
        else group.threads.splice(index, 1);
        changed = true;
      } else if (belongs && group.loaded && !this.search) {
        // A new or newly visible thread is the most recently updated one: it goes on top.
        group.threads.unshift(thread);
        changed = true;
      }
    }
    if (changed) this.changed.fire(undefined);
  }

  /** Every thread currently loaded (for tests and for commands given a thread id). */
  loadedThreads(): ThreadInfo[] {
    return this.groups.flatMap((group) => group.threads);
  }

  async getChildren(node?: ThreadsNode): Promise<ThreadsNode[]> {
    if (!node) {
      const notice: ThreadsNode[] = this.notice ? [{ kind: "notice", text: this.notice }] : [];
      return [...notice, ...this.groups.map((group): ThreadsNode => ({ kind: "folder", group }))];
    }
    if (node.kind === "folder") {
      const { group } = node;
      if (!group.loaded) {
        try {
          await this.loadMore(group);
        } catch (error) {
          // The view shows why it is empty; the error dialog comes from whoever started the server.
          return [{ kind: "notice", text: describeError("list threads", error) }];
        }
      }
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
      return node.group.threads
        .filter((thread) => (thread.branch ?? null) === node.branch)
        .sort(newestFirst)
        .map((thread) => ({ kind: "thread", thread }));
    }
    return [];
  }

  getTreeItem(node: ThreadsNode): vscode.TreeItem {
    switch (node.kind) {
      case "folder": {
        const item = new vscode.TreeItem(node.group.name, vscode.TreeItemCollapsibleState.Expanded);
        item.iconPath = new vscode.ThemeIcon("root-folder");
        item.description = node.group.path ?? undefined;
        item.contextValue = "folder";
        return item;
      }
      case "branch": {
        const item = new vscode.TreeItem(node.branch ?? NO_BRANCH, vscode.TreeItemCollapsibleState.Expanded);
        item.iconPath = new vscode.ThemeIcon("git-branch");
        item.contextValue = "branch";
        return item;
      }
      case "thread": {
        const { thread } = node;
        const item = new vscode.TreeItem(threadLabel(thread), vscode.TreeItemCollapsibleState.None);
        item.id = thread.threadId;
        item.description = threadDescription(thread, this.now());
        item.tooltip = new vscode.MarkdownString(
          [
            `**${threadLabel(thread)}**`,
            thread.preview ? `\n\n${thread.preview}` : "",
            `\n\n\`${thread.threadId}\``,
            thread.cwd ? `\n\n${thread.cwd}` : "",
            thread.forkedFrom ? `\n\nforked from \`${String(thread.forkedFrom["threadId"])}\`` : "",
          ].join(""),
        );
        item.iconPath = new vscode.ThemeIcon(thread.archived ? "archive" : thread.forkedFrom ? "repo-forked" : "comment-discussion");
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
