// Resume and what follows it: the drift modal, the restored views, and the commands that act
// on the open session (New Thread, Clear, Compact, Rewind to Turn).
import * as path from "node:path";
import * as vscode from "vscode";
import type { SessiondClient } from "./client";
import { renderRestoreReport } from "./documents";
import { errorKind } from "./errors";
import { agentName, driftDetail, threadLabel } from "./format";
import { resumeInAgent, resumeLabel } from "./handoff";
import type { Handoff, RestoreReport, ThreadContinueResult, ThreadInfo, TodoEntryState } from "./protocol";
import { costOf, todosOf } from "./subsystems";
import type { TranscriptPanels } from "./transcript/panel";
import type { CostStatusItem, ReadOnlyDocuments, TodosTreeProvider } from "./views";

type Item = Record<string, unknown>;

export const CONTINUE_HERE = "Continue here";
export const FORK_INSTEAD = "Fork into a new thread";
export const RESUME_CURRENT = "Resume the current thread";
export const RESUME_THIS_ONE = "Resume this one";

/** The session key of a folder and its branch: `workspace:<path>#<branch>` (no branch: the
 * folder alone), what "Continue in This Folder" continues. */
export function workspaceKey(folder: string, branch: string | undefined): string {
  return branch ? `workspace:${folder}#${branch}` : `workspace:${folder}`;
}

export interface ActiveSession {
  thread: ThreadInfo;
  sessionId: string;
  report: RestoreReport | undefined;
}

/** Where a transcript opens other than at its newest item: a search hit. */
export interface OpenAt {
  seq: number;
  /** Words to mark in the item at `seq`. */
  highlight?: string[];
}

export class SessionController {
  active: ActiveSession | undefined;
  private readonly activeChanged = new vscode.EventEmitter<ThreadInfo | undefined>();
  /** The thread open in this window changed (the Threads view marks it). */
  readonly onDidChangeActive = this.activeChanged.event;

  constructor(
    private readonly client: Pick<SessiondClient, "request">,
    private readonly documents: ReadOnlyDocuments,
    private readonly todos: TodosTreeProvider,
    private readonly cost: CostStatusItem,
    readonly transcripts: TranscriptPanels,
  ) {}

  /** Resume: ready → the restored views; needs_review → the drift modal decides. An imported
   * thread comes back with a handoff instead of a session: continue it in its own agent. */
  async resume(thread: ThreadInfo): Promise<RestoreReport | undefined> {
    const requestedAt = Date.now(); // the transcript's timings start here (TranscriptSource)
    if (thread.sessionKey) {
      // A thread a reset replaced: its key went on in a newer one, offered first.
      const current = await this.currentOfChain(thread);
      if (current && current.threadId !== thread.threadId) {
        const choice = await vscode.window.showInformationMessage(
          `“${threadLabel(thread)}” was replaced by “${threadLabel(current)}”${current.resetReason ? ` (${current.resetReason} reset)` : ""}: its conversation goes on there.`,
          { modal: true, detail: `Session key ${thread.sessionKey ?? ""}. Resuming this one continues the older conversation.` },
          { title: RESUME_CURRENT },
          { title: RESUME_THIS_ONE },
          { title: "Cancel", isCloseAffordance: true },
        );
        if (choice?.title === RESUME_CURRENT) return this.resume(current);
        if (choice?.title !== RESUME_THIS_ONE) return undefined;
      }
    }
    // The open session stays open until a new one replaces it (showRestored): a Cancel, a
    // refusal (ThreadBusy) or a failure leaves the user where they were.
    if (this.active?.thread.threadId === thread.threadId) await this.closeActive();
    // Its panel is made while the server restores the thread (VS Code loads the webview
    // meanwhile); closed again if the resume shows nothing in it, and before any question
    // the resume asks (no empty transcript behind the drift modal, none left after Cancel).
    const prepared = this.transcripts.prepare(thread);
    try {
      return await this.resumeShown(thread, requestedAt, prepared);
    } finally {
      prepared.discard();
    }
  }

  private async resumeShown(
    thread: ThreadInfo,
    requestedAt: number,
    prepared: { discard(): void },
  ): Promise<RestoreReport | undefined> {
    const report = await this.client.request("thread/resume", { threadId: thread.threadId });
    if (report.status !== "ready" || report.readOnly) prepared.discard();
    if (report.readOnly) {
      // No session can open on a read-only data directory; the drift modal would not help.
      const { path, reason } = report.readOnly;
      void vscode.window.showWarningMessage(
        `sessiond's data directory ${path} is read-only (${reason}): “${threadLabel(report.thread)}” can be read (Open Transcript), not continued.`,
      );
      return report;
    }
    if (report.status === "ready") {
      await (report.handoff ? this.showHandoff(report, report.handoff, requestedAt) : this.showRestored(report, requestedAt));
      return report;
    }
    const choice = await vscode.window.showWarningMessage(
      `“${threadLabel(report.thread)}” was recorded somewhere else. Continue it here?`,
      { modal: true, detail: driftDetail(report.environment.drift ?? []) },
      { title: CONTINUE_HERE },
      { title: FORK_INSTEAD },
      { title: "Cancel", isCloseAffordance: true },
    );
    if (choice?.title === CONTINUE_HERE) {
      const accepted = await this.client.request("thread/resume", {
        threadId: thread.threadId,
        cwd: currentCwdFor(report.thread),
        acceptDrift: true,
      });
      await (accepted.handoff ? this.showHandoff(accepted, accepted.handoff) : this.showRestored(accepted));
      return accepted;
    }
    if (choice?.title === FORK_INSTEAD) return this.forkAndResume(report.thread);
    return undefined;
  }

  /** The newest thread of `thread`'s reset chain: its key's threads (`thread/list
   * {sessionKey}`), followed from it by `nextThreadId` or a successor's `previousThreadId`. */
  async currentOfChain(thread: ThreadInfo): Promise<ThreadInfo | undefined> {
    if (!thread.sessionKey) return undefined;
    const byId = new Map<string, ThreadInfo>();
    let cursor: string | null = null;
    do {
      const page: { threads: ThreadInfo[]; nextCursor?: string | null } = await this.client.request("thread/list", {
        sessionKey: thread.sessionKey,
        limit: 200,
        ...(cursor ? { cursor } : {}),
      });
      for (const found of page.threads) if (found.sessionKey === thread.sessionKey) byId.set(found.threadId, found);
      cursor = page.nextCursor ?? null;
    } while (cursor !== null);
    const successorOf = new Map<string, string>();
    for (const found of byId.values()) if (found.previousThreadId) successorOf.set(found.previousThreadId, found.threadId);
    let current = byId.get(thread.threadId) ?? thread;
    for (let steps = 0; steps < byId.size; steps++) {
      const next = current.nextThreadId ?? successorOf.get(current.threadId);
      const found = next ? byId.get(next) : undefined;
      if (!found) break;
      current = found;
    }
    return current;
  }

  /** Continue in This Folder: the folder-and-branch's session key goes on in its current
   * thread (resumed, or this window's session simply kept), or starts its first. The
   * freshness policy is the data directory's (`none` unless sessions.toml says otherwise:
   * in an editor the person decides). */
  async continueInFolder(folder: string, branch: string | undefined): Promise<ThreadContinueResult> {
    const requestedAt = Date.now();
    const answer = await this.client.request("thread/continue", { sessionKey: workspaceKey(folder, branch), cwd: folder });
    const report = answer.restore ?? undefined;
    if (report && report.status !== "ready") {
      await this.resume(answer.thread); // drift: the modal decides, as for a resume
      return answer;
    }
    if (report) {
      await this.showRestored(report, requestedAt);
    } else if (answer.sessionId) {
      if (this.active?.thread.threadId !== answer.thread.threadId) await this.closeActive();
      const kept = this.active?.thread.threadId === answer.thread.threadId ? this.active.report : undefined;
      this.active = { thread: answer.thread, sessionId: answer.sessionId, report: kept };
      if (!kept) {
        this.todos.set((answer.carried ?? []).includes("todos") ? await this.recordedTodos(answer.thread.threadId) : []);
        this.cost.show(undefined);
      }
      await this.setSessionContext();
      await this.transcripts.show({ thread: answer.thread, report: kept, requestedAt });
    }
    if (answer.reason === "reset") {
      void vscode.window.showInformationMessage(
        `A new thread continues this folder (${answer.resetReason ?? "reset"}): the previous one is under it in the Threads view.`,
      );
    }
    return answer;
  }

  /** The newest todo list recorded in a thread that was just started (a reset carries it). */
  private async recordedTodos(threadId: string): Promise<TodoEntryState[]> {
    const page = await this.client.request("thread/read", { threadId, limit: 50 });
    const lists = page.items.filter((item) => item["type"] === "todos");
    const last = lists.at(-1)?.["items"];
    if (!Array.isArray(last)) return [];
    return last.flatMap((raw: unknown) => {
      const entry = raw as Record<string, unknown>;
      if (typeof entry["content"] !== "string") return [];
      const status = ["pending", "in_progress", "completed"].includes(entry["status"] as string)
        ? (entry["status"] as TodoEntryState["status"])
        : "pending";
      return [{ id: String(entry["id"] ?? entry["content"]), content: entry["content"], status }];
    });
  }

  /** A fork is a new thread bound to the workspace as it is now; resuming it opens it here. */
  async forkAndResume(thread: ThreadInfo): Promise<RestoreReport | undefined> {
    await this.closeActive();
    const fork = await this.client.request("thread/fork", { threadId: thread.threadId });
    const report = await this.client.request("thread/resume", {
      threadId: fork.thread.threadId,
      cwd: currentCwdFor(fork.thread),
    });
    if (report.status !== "ready") {
      void vscode.window.showWarningMessage(`The fork of “${threadLabel(thread)}” also needs review; resume it from the Threads view.`);
      return report;
    }
    await this.showRestored(report);
    return report;
  }

  async newThread(cwd: string): Promise<void> {
    const title = await vscode.window.showInputBox({ prompt: "Title of the new thread (optional)" });
    if (title === undefined) return;
    await this.closeActive();
    const started = await this.client.request("thread/start", { cwd, ...(title.trim() ? { title: title.trim() } : {}) });
    this.active = { thread: started.thread, sessionId: started.sessionId, report: undefined };
    this.todos.set([]);
    this.cost.show(undefined);
    await this.setSessionContext();
    await this.transcripts.show({ thread: started.thread });
  }

  async clear(): Promise<void> {
    const active = this.requireActive();
    if (!active) return;
    const result = await this.client.request("thread/clear", { threadId: active.thread.threadId, sessionId: active.sessionId });
    // Clear keeps todos and cost; only the conversation starts again (its boundary shows where).
    active.sessionId = result.sessionId;
    await this.reloadTranscript(active);
    void vscode.window.showInformationMessage(`Cleared “${threadLabel(active.thread)}”: a new session starts with an empty conversation.`);
  }

  async compact(): Promise<void> {
    const active = this.requireActive();
    if (!active) return;
    const summary = await vscode.window.showInputBox({
      prompt: "Summary that replaces the conversation so far",
      placeHolder: "What was done, what is left, decisions made…",
      validateInput: (value) => (value.trim() ? undefined : "A compact needs a summary"),
    });
    if (!summary?.trim()) return;
    await this.client.request("thread/compact", {
      threadId: active.thread.threadId,
      sessionId: active.sessionId,
      summary: summary.trim(),
    });
    await this.reloadTranscript(active);
  }

  async rewindToTurn(): Promise<void> {
    const active = this.requireActive();
    if (!active) return;
    const turns = userTurns(this.transcripts.get(active.thread.threadId)?.loadedItems() ?? active.report?.messages.items ?? []);
    if (turns.length === 0) {
      void vscode.window.showInformationMessage("This thread has no turns to rewind to.");
      return;
    }
    const turn = await vscode.window.showQuickPick(
      turns.map((entry) => ({ label: entry.text, description: entry.turnId, turnId: entry.turnId })),
      { placeHolder: "Rewind to the end of this turn; later turns are undone" },
    );
    if (!turn) return;
    const scope = await vscode.window.showQuickPick(
      [
        { label: "Files and conversation", files: true, conversation: true },
        { label: "Conversation only", files: false, conversation: true },
        { label: "Files only", files: true, conversation: false },
      ],
      { placeHolder: "What to rewind" },
    );
    if (!scope) return;
    const params = {
      threadId: active.thread.threadId,
      sessionId: active.sessionId,
      toTurnId: turn.turnId,
      files: scope.files,
      conversation: scope.conversation,
    };
    let result;
    try {
      result = await this.client.request("thread/rewind", params);
    } catch (error) {
      if (errorKind(error) !== "ConflictingOperation") throw error;
      const force = await vscode.window.showWarningMessage(
        "Some files changed since the agent last edited them. Rewinding overwrites those changes.",
        { modal: true, detail: error instanceof Error ? error.message : String(error) },
        "Rewind anyway",
      );
      if (force !== "Rewind anyway") return;
      result = await this.client.request("thread/rewind", { ...params, force: true });
    }
    if (result.conversation) await this.reloadTranscript(active);
    const files = result.files.length;
    void vscode.window.showInformationMessage(
      `Rewound to the end of “${turn.label}”${scope.conversation ? "" : " (files only)"}${files ? `; ${files} file${files === 1 ? "" : "s"} restored` : ""}.`,
    );
  }

  /** A thread's transcript without opening a session: its newest items, or those around a
   * seq (a search hit); the rest load as the reader scrolls. */
  async openTranscript(thread: ThreadInfo, at?: OpenAt): Promise<void> {
    const requestedAt = Date.now();
    const report = this.active?.thread.threadId === thread.threadId ? this.active.report : undefined;
    await this.transcripts.show({ thread, report, atSeq: at?.seq, highlight: at?.highlight, requestedAt });
  }

  /** "Load earlier messages": the page before the first item the transcript shows. */
  async loadEarlierMessages(threadId: string): Promise<void> {
    await this.transcripts.get(threadId)?.loadEarlier();
  }

  /** The restore report of the open session, or of the transcript `threadId` (an imported
   * thread's resume opens no session). */
  async showRestoreReport(threadId?: string): Promise<void> {
    const shown = threadId ?? this.transcripts.active?.thread.threadId;
    const report = (shown ? this.transcripts.get(shown)?.report : undefined) ?? this.active?.report;
    if (!report) {
      void vscode.window.showInformationMessage("Resume a thread to see its restore report.");
      return;
    }
    await this.documents.show(reportPath(report.thread), renderRestoreReport(report));
  }

  /** Keeps the open session's thread current when the server says it changed. */
  applyThreadChange(thread: ThreadInfo, deleted: boolean): void {
    if (this.active?.thread.threadId !== thread.threadId) return;
    if (deleted || thread.archived) {
      this.active = undefined;
      this.todos.set([]);
      this.cost.show(undefined);
      void this.setSessionContext();
      return;
    }
    this.active.thread = { ...this.active.thread, ...thread };
    this.transcripts.get(thread.threadId)?.setThread(thread);
  }

  async closeActive(): Promise<void> {
    const active = this.active;
    if (!active) return;
    this.active = undefined;
    await this.setSessionContext();
    try {
      await this.client.request("thread/close", { threadId: active.thread.threadId, sessionId: active.sessionId });
    } catch (error) {
      // A session that was already superseded or deleted has nothing left to release.
      if (!["StaleSession", "ThreadNotFound", "ThreadArchived"].includes(errorKind(error) ?? "")) throw error;
    }
  }

  private async showRestored(report: RestoreReport, requestedAt?: number): Promise<void> {
    await this.closeActive();
    const sessionId = report.session.sessionId;
    if (!sessionId) throw new Error("the server reported ready without opening a session");
    this.active = { thread: report.thread, sessionId, report };
    // Opens at the newest item; drift, invalidated state and operations to review are the
    // banner at its top. Started first: its webview loads while the other views fill.
    const shown = this.transcripts.show({ thread: report.thread, report, requestedAt });
    this.todos.set(todosOf(report));
    this.cost.show(costOf(report));
    await this.setSessionContext();
    await shown;
  }

  /** An imported thread: its restored views (read-only: no session opened) and the offer to
   * continue in the agent that keeps the session (also in the transcript's title bar). */
  private async showHandoff(report: RestoreReport, handoff: Handoff, requestedAt?: number): Promise<void> {
    await this.closeActive(); // the views now show this thread: the one open before is released
    const shown = this.transcripts.show({ thread: report.thread, report, handoff, requestedAt });
    this.todos.set(todosOf(report));
    this.cost.show(costOf(report));
    await this.setSessionContext();
    await shown;
    const agent = agentName(handoff.agent);
    const choice = await vscode.window.showInformationMessage(
      `“${threadLabel(report.thread)}” is a ${agent} session: sessiond shows it, ${agent} continues it.`,
      resumeLabel(handoff),
    );
    if (choice === resumeLabel(handoff)) await resumeInAgent(handoff);
  }

  private async reloadTranscript(active: ActiveSession): Promise<void> {
    const panel = this.transcripts.get(active.thread.threadId);
    await (panel ? panel.reload() : this.transcripts.show({ thread: active.thread, report: active.report }));
  }

  private requireActive(): ActiveSession | undefined {
    if (!this.active) void vscode.window.showInformationMessage("Resume or start a thread first.");
    return this.active;
  }

  private async setSessionContext(): Promise<void> {
    this.activeChanged.fire(this.active?.thread);
    await vscode.commands.executeCommand("setContext", "sessiond.sessionActive", this.active !== undefined);
  }
}

/** Where "here" is: the thread's own directory when it lies in an open folder, else the first folder. */
export function currentCwdFor(thread: ThreadInfo): string | undefined {
  const folders = (vscode.workspace.workspaceFolders ?? []).map((folder) => folder.uri.fsPath);
  const inside = (dir: string) => folders.some((folder) => !path.relative(folder, dir).startsWith(".."));
  if (thread.cwd && inside(thread.cwd)) return thread.cwd;
  return folders[0] ?? thread.cwd ?? undefined;
}

export function reportPath(thread: ThreadInfo): string {
  return `/restore-report/${thread.threadId}/${tabName(`Restore report: ${threadLabel(thread)}`)}`;
}

/** A title as one path segment: no separators or control characters, not too long. */
function tabName(title: string): string {
  const name = title.replace(/[\\/\u0000-\u001f\u007f]+/g, " ").trim();
  return name.length > 60 ? `${name.slice(0, 59)}…` : name || "untitled";
}

function userTurns(items: readonly Item[]): { turnId: string; text: string }[] {
  const seen = new Set<string>();
  const turns: { turnId: string; text: string }[] = [];
  for (const item of items) {
    const turnId = item["turnId"];
    if (item["type"] !== "message" || item["role"] !== "user" || typeof turnId !== "string" || seen.has(turnId)) continue;
    seen.add(turnId);
    const content = typeof item["content"] === "string" ? item["content"] : "(message)";
    turns.push({ turnId, text: content.split("\n")[0]!.slice(0, 80) });
  }
  return turns.reverse();
}
