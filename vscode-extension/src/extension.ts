// Entry point: wires the server connection to the views and commands.
import * as vscode from "vscode";
import { INSTALL_HINT, ServerStartError, SessiondClient } from "./client";
import { busyHolder, describeError } from "./errors";
import { INSTALL_COMMAND } from "./install";
import { threadLabel } from "./format";
import { exportTranscript } from "./exportTranscript";
import { AGENTS, type ProgressValue, type ThreadInfo, type WorkspaceFolder } from "./protocol";
import { gitBranch, ThreadsTreeProvider, type ThreadsNode } from "./threadsTree";
import { resumeInAgent } from "./handoff";
import { prefixProblem, resolveThread } from "./openThread";
import { type OpenAt, SessionController } from "./sessions";
import { type HitRow, matchedWords, ThreadSearch } from "./threadSearch";
import { BLOB_SCHEME, BlobDocuments } from "./transcript/blobs";
import { TranscriptPanels } from "./transcript/panel";
import { UsagePanel } from "./usagePanel";
import { CostStatusItem, DOCUMENT_SCHEME, ReadOnlyDocuments, TodosTreeProvider } from "./views";

export interface SessiondExtensionApi {
  client: SessiondClient;
  threads: ThreadsTreeProvider;
  todos: TodosTreeProvider;
  sessions: SessionController;
  documents: ReadOnlyDocuments;
  transcripts: TranscriptPanels;
  blobs: BlobDocuments;
  cost: CostStatusItem;
}


const EXTENSION_VERSION = "0.1.0";

export function serverCommand(configured: unknown): string[] {
  if (typeof configured === "string") return configured.trim().split(/\s+/).filter(Boolean);
  if (Array.isArray(configured) && configured.every((part) => typeof part === "string")) return configured;
  return ["sessiond", "serve", "--stdio"];
}

function protocolFolders(): WorkspaceFolder[] {
  return (vscode.workspace.workspaceFolders ?? []).map((folder) => ({
    path: folder.uri.fsPath,
    name: folder.name,
    trusted: vscode.workspace.isTrusted,
  }));
}

function configuration(): vscode.WorkspaceConfiguration {
  return vscode.workspace.getConfiguration("sessiond");
}

export async function activate(context: vscode.ExtensionContext): Promise<SessiondExtensionApi> {
  const output = vscode.window.createOutputChannel("sessiond");
  const client = new SessiondClient({
    command: serverCommand(configuration().get("serverCommand")),
    clientInfo: { name: "sessiond-vscode", version: EXTENSION_VERSION },
    workspaceFolders: protocolFolders,
    log: (line) => output.appendLine(line),
    connect: configuration().get<string>("connect") === "spawn" ? "spawn" : "auto",
  });
  const threads = new ThreadsTreeProvider(client, () => configuration().get<number>("threadsPageSize") ?? 50, undefined, gitBranch);
  const todos = new TodosTreeProvider();
  const documents = new ReadOnlyDocuments();
  const cost = new CostStatusItem();
  const blobs = new BlobDocuments(client);
  const transcripts = new TranscriptPanels(client, context.extensionUri, blobs);
  const sessions = new SessionController(client, documents, todos, cost, transcripts);
  const setFolders = () =>
    threads.setFolders((vscode.workspace.workspaceFolders ?? []).map((f) => ({ path: f.uri.fsPath, name: f.name })));
  setFolders();

  // A checkout in any folder moves the "current" branch and the needs-review marks.
  const heads = vscode.workspace.createFileSystemWatcher("**/.git/HEAD");
  const branchesMoved = () => void threads.refreshBranches();
  heads.onDidChange(branchesMoved);
  heads.onDidCreate(branchesMoved);

  const threadsView = vscode.window.createTreeView("sessiond.threads", { treeDataProvider: threads, showCollapseAll: true });
  const todosView = vscode.window.createTreeView("sessiond.todos", { treeDataProvider: todos });
  todosView.message = "Resume a thread to see its todos.";
  todos.onDidChangeTreeData(() => {
    todosView.message = todos.getChildren().length ? undefined : "No todos in this thread.";
  });

  /** Runs a user action; a failure becomes one readable error message, never an unhandled rejection. */
  const guarded =
    <A extends unknown[]>(action: string, run: (...args: A) => Promise<unknown>) =>
    async (...args: A): Promise<void> => {
      try {
        await run(...args);
      } catch (error) {
        await showFailure(action, error);
      }
    };
  // Tree commands get a node; commands run from code or tests may pass the ThreadInfo itself.
  const threadOf = (node: ThreadsNode | ThreadInfo | undefined): ThreadInfo | undefined => {
    if (!node) return undefined;
    if ("threadId" in node && typeof node.threadId === "string") return node as ThreadInfo;
    const treeNode = node as ThreadsNode;
    return treeNode.kind === "thread" ? treeNode.thread : undefined;
  };
  const withThread = (action: string, run: (thread: ThreadInfo) => Promise<unknown>) =>
    guarded(action, async (node?: ThreadsNode | ThreadInfo) => {
      const thread = threadOf(node);
      if (thread) await run(thread);
    });

  /** Actions that open a thread: a refusal because another window holds it marks its row. */
  const opening = (action: string, run: (thread: ThreadInfo) => Promise<unknown>) =>
    withThread(action, async (thread) => {
      try {
        await run(thread);
      } catch (error) {
        const holder = busyHolder(error);
        if (holder !== undefined) threads.setOpenElsewhere(thread.threadId, holder);
        throw error;
      }
    });

  const register = (id: string, handler: (...args: never[]) => unknown) =>
    context.subscriptions.push(vscode.commands.registerCommand(id, handler));
  register("sessiond.resumeThread", opening("resume the thread", (thread) => sessions.resume(thread)));
  // A second argument opens the transcript at a seq (a search hit): `{seq, highlight?}`.
  register(
    "sessiond.openTranscript",
    guarded("open the transcript", async (node?: ThreadsNode | ThreadInfo, at?: OpenAt) => {
      const thread = threadOf(node);
      if (thread) await sessions.openTranscript(thread, at);
    }),
  );
  register(
    "sessiond.loadEarlierMessages",
    guarded("load earlier messages", async (threadId?: string) => {
      const id = threadId ?? transcripts.active?.thread.threadId ?? sessions.active?.thread.threadId;
      if (id) await sessions.loadEarlierMessages(id);
    }),
  );
  // "Resume in …" in a transcript's title bar, one command per agent (a title is fixed; package.json's are generated from the schema's agents).
  for (const [agent, { resumeCommand }] of Object.entries(AGENTS)) {
    register(
      resumeCommand,
      guarded(`resume the thread in ${agent}`, async () => {
        const handoff = transcripts.active?.handoff;
        if (handoff?.agent === agent) await resumeInAgent(handoff);
      }),
    );
  }
  // From a thread's context menu (its node), or the view's title bar: the transcript open
  // here, else the thread the person picks.
  register(
    "sessiond.exportTranscript",
    guarded("export the transcript", async (node?: ThreadsNode | ThreadInfo) => {
      let thread = threadOf(node) ?? transcripts.active?.thread ?? sessions.active?.thread;
      if (!thread) {
        const page = await client.request("thread/list", { limit: 50, archived: threads.showArchived });
        const picked = await vscode.window.showQuickPick(
          page.threads.map((candidate) => ({ label: threadLabel(candidate), description: candidate.threadId.slice(0, 8), thread: candidate })),
          { placeHolder: "Export which thread?" },
        );
        thread = picked?.thread;
      }
      if (thread) await exportTranscript(client, thread);
    }),
  );
  register("sessiond.forkThread", opening("fork the thread", (thread) => sessions.forkAndResume(thread)));
  register(
    "sessiond.renameThread",
    withThread("rename the thread", async (thread) => {
      const title = await vscode.window.showInputBox({ prompt: "New title", value: thread.title ?? "" });
      // The tree updates from the server's thread/updated notification.
      if (title?.trim()) await client.request("thread/setTitle", { threadId: thread.threadId, title: title.trim() });
    }),
  );
  register(
    "sessiond.archiveThread",
    withThread("archive the thread", (thread) => client.request("thread/archive", { threadId: thread.threadId })),
  );
  register(
    "sessiond.unarchiveThread",
    withThread("unarchive the thread", (thread) => client.request("thread/unarchive", { threadId: thread.threadId })),
  );
  register(
    "sessiond.deleteThread",
    withThread("delete the thread", async (thread) => {
      const choice = await vscode.window.showWarningMessage(
        `Delete “${threadLabel(thread)}”? Its history cannot be recovered.`,
        { modal: true },
        "Delete",
      );
      if (choice === "Delete") await client.request("thread/delete", { threadId: thread.threadId });
    }),
  );
  register(
    "sessiond.loadMoreThreads",
    guarded("load more threads", async (node?: ThreadsNode) => {
      if (node?.kind === "loadMore") await threads.loadMore(node.group);
    }),
  );
  register("sessiond.refreshThreads", () => threads.refresh());
  // A thread by the id a person pasted, whole or a unique prefix (as `sessiond list` prints).
  register(
    "sessiond.openThread",
    guarded("open the thread", async () => {
      const typed = await vscode.window.showInputBox({
        prompt: "Thread id, or its first 4 or more digits (as sessiond list and search print them)",
        placeHolder: "594b6d02",
        validateInput: prefixProblem,
      });
      if (!typed?.trim() || prefixProblem(typed)) return;
      const found = await resolveThread(client, typed);
      if (found.kind === "none") {
        void vscode.window.showWarningMessage(found.message);
        return;
      }
      let thread = found.kind === "one" ? found.thread : undefined;
      if (found.kind === "several") {
        const chosen = await vscode.window.showQuickPick(
          found.threads.map((candidate) => ({ label: threadLabel(candidate), description: candidate.threadId, thread: candidate })),
          { placeHolder: `${found.threads.length}${found.more ? "+" : ""} threads start with ${typed.trim().toLowerCase()}: which one?` },
        );
        thread = chosen?.thread;
      }
      if (thread) await sessions.openTranscript(thread);
    }),
  );
  register(
    "sessiond.searchThreads",
    guarded("search threads", async () => {
      const search = await vscode.window.showInputBox({ prompt: "Search thread titles and messages", value: threads.search ?? "" });
      if (search === undefined) return;
      threads.setSearch(search);
      threadsView.description = threads.search ? `search: ${threads.search}` : undefined;
    }),
  );
  // Full-text search over every thread (thread/search), as the user types; a hit opens
  // the transcript at its record, its words marked.
  register(
    "sessiond.searchContent",
    guarded("search threads", async () => {
      const pick = vscode.window.createQuickPick<HitRow & vscode.QuickPickItem>();
      pick.placeholder = 'Search every thread: words, "a phrase", prefix*, -word';
      const search = new ThreadSearch(
        client,
        (view) => {
          pick.busy = view.busy;
          pick.items = view.rows.map((row) => ({ ...row, alwaysShow: true })); // already matched
          pick.title = view.message;
        },
        () => ({ archived: threads.showArchived }),
      );
      pick.onDidChangeValue((value) => search.changed(value));
      pick.onDidAccept(() => {
        const [chosen] = pick.selectedItems;
        if (!chosen) return;
        pick.hide();
        const at: OpenAt = { seq: chosen.hit.seq, highlight: matchedWords(chosen.hit) };
        void vscode.commands.executeCommand("sessiond.openTranscript", chosen.hit.thread, at);
      });
      pick.onDidHide(() => {
        search.dispose();
        pick.dispose();
      });
      pick.show();
    }),
  );
  register("sessiond.clearSearch", () => {
    threads.setSearch(undefined);
    threadsView.description = undefined;
  });
  register("sessiond.toggleArchived", () => {
    threads.setShowArchived(!threads.showArchived);
    threadsView.title = threads.showArchived ? "Archived Threads" : "Threads";
  });
  register(
    "sessiond.newThread",
    guarded("start a thread", async () => {
      const folders = vscode.workspace.workspaceFolders ?? [];
      const folder = folders.length > 1 ? await vscode.window.showWorkspaceFolderPick() : folders[0];
      if (!folder) {
        if (folders.length === 0) void vscode.window.showInformationMessage("Open a folder to start a thread in it.");
        return;
      }
      await sessions.newThread(folder.uri.fsPath);
    }),
  );
  // The folder-and-branch's session key (`workspace:<path>#<branch>`): its thread goes on,
  // or its first starts (thread/continue).
  register(
    "sessiond.continueInFolder",
    guarded("continue in this folder", async () => {
      const folders = vscode.workspace.workspaceFolders ?? [];
      const folder = folders.length > 1 ? await vscode.window.showWorkspaceFolderPick() : folders[0];
      if (!folder) {
        if (folders.length === 0) void vscode.window.showInformationMessage("Open a folder to continue a thread in it.");
        return;
      }
      await sessions.continueInFolder(folder.uri.fsPath, await gitBranch(folder.uri.fsPath));
    }),
  );
  register("sessiond.clearThread", guarded("clear the thread", () => sessions.clear()));
  register("sessiond.compactThread", guarded("compact the thread", () => sessions.compact()));
  register("sessiond.rewindToTurn", guarded("rewind the thread", () => sessions.rewindToTurn()));
  register(
    "sessiond.showRestoreReport",
    guarded("show the restore report", (threadId?: string) => sessions.showRestoreReport(typeof threadId === "string" ? threadId : undefined)),
  );
  const usage = new UsagePanel(client);
  context.subscriptions.push(usage);
  register("sessiond.showUsage", guarded("show usage", () => usage.show()));
  register(
    "sessiond.restartServer",
    guarded("restart the server", async () => {
      await client.stop();
      await client.start();
      threads.refresh();
    }),
  );

  context.subscriptions.push(
    threadsView,
    todosView,
    heads,
    sessions.onDidChangeActive((thread) => threads.setOpenHere(thread?.threadId)),
    cost,
    output,
    vscode.workspace.registerTextDocumentContentProvider(DOCUMENT_SCHEME, documents),
    vscode.workspace.registerTextDocumentContentProvider(BLOB_SCHEME, blobs),
    transcripts.onDidChangeActive((panel) => {
      void vscode.commands.executeCommand("setContext", "sessiond.transcriptAgent", panel?.handoff?.agent ?? "");
      void vscode.commands.executeCommand("setContext", "sessiond.transcriptHasReport", panel?.report !== undefined);
    }),
    client.onNotification("thread/updated", ({ thread, deleted }) => {
      threads.applyThreadChange(thread, deleted ?? false);
      sessions.applyThreadChange(thread, deleted ?? false);
    }),
    client.onNotification("thread/started", ({ thread }) => threads.applyThreadChange(thread, false, true)),
    client.onNotification("$/progress", (progress) => showProgress(progress.token, progress.value)),
    client.onStateChange((state, error) => {
      if (state === "restarting") output.appendLine("sessiond stopped unexpectedly; restarting it");
      if (state === "running") threads.setServerProblem(undefined);
      if (state === "failed") threads.setServerProblem(error instanceof ServerStartError && error.missing ? "missing" : "failed");
      if (state === "failed" && error) void showFailure("start the sessiond server", error);
    }),
    vscode.workspace.onDidChangeWorkspaceFolders((event) => {
      const toProtocol = (folder: vscode.WorkspaceFolder): WorkspaceFolder => ({
        path: folder.uri.fsPath,
        name: folder.name,
        trusted: vscode.workspace.isTrusted,
      });
      void client
        .changeWorkspaceFolders({ added: event.added.map(toProtocol), removed: event.removed.map(toProtocol) })
        .catch((error: unknown) => showFailure("update the workspace folders", error));
      setFolders();
    }),
    vscode.workspace.onDidGrantWorkspaceTrust(() => {
      // The server only runs workspace hooks for folders marked trusted: tell it they are now.
      const folders = protocolFolders();
      void client.changeWorkspaceFolders({ removed: folders, added: folders }).catch(() => undefined);
    }),
    vscode.workspace.onDidChangeConfiguration((event) => {
      if (event.affectsConfiguration("sessiond.serverCommand")) {
        void vscode.commands.executeCommand("sessiond.restartServer");
      }
    }),
    { dispose: () => void sessions.closeActive().finally(() => client.stop()) },
  );
  // A failure reaches the view through onStateChange("failed"): its welcome content says what to do.
  client.start().catch(() => undefined);
  return { client, threads, todos, sessions, documents, transcripts, blobs, cost };
}

const progressEnds = new Map<string, () => void>();
const progressReports = new Map<string, vscode.Progress<{ message?: string; increment?: number }>>();
const progressDone = new Map<string, number>();

/** `$/progress` begin/report/end as one VS Code progress notification per token. */
function showProgress(token: string, value: ProgressValue): void {
  if (value.kind === "begin") {
    void vscode.window.withProgress(
      { location: vscode.ProgressLocation.Notification, title: value.title ?? "sessiond" },
      (progress) =>
        new Promise<void>((resolve) => {
          progressReports.set(token, progress);
          progressEnds.set(token, resolve);
          progressDone.set(token, 0);
          if (value.message) progress.report({ message: value.message });
        }),
    );
    return;
  }
  const progress = progressReports.get(token);
  if (value.kind === "report" && progress) {
    const done = progressDone.get(token) ?? 0;
    const increment = value.percentage != null ? Math.max(0, value.percentage - done) : undefined;
    if (value.percentage != null) progressDone.set(token, value.percentage);
    progress.report({ ...(value.message ? { message: value.message } : {}), ...(increment !== undefined ? { increment } : {}) });
    return;
  }
  if (value.kind === "end") {
    progressEnds.get(token)?.();
    for (const map of [progressEnds, progressReports, progressDone]) map.delete(token);
  }
}

async function showFailure(action: string, error: unknown): Promise<void> {
  const message = describeError(action, error);
  if (error instanceof ServerStartError) {
    const choice = await vscode.window.showErrorMessage(message, "Copy Install Command", "Open Settings");
    if (choice === "Copy Install Command") await vscode.env.clipboard.writeText(INSTALL_COMMAND);
    if (choice === "Open Settings") await vscode.commands.executeCommand("workbench.action.openSettings", "sessiond.serverCommand");
    return;
  }
  void vscode.window.showErrorMessage(message);
}

export { INSTALL_HINT };

export async function deactivate(): Promise<void> {
  // Subscriptions (including the server's shutdown/exit) are disposed by VS Code.
}
