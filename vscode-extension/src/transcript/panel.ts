// The transcript of a thread in a webview panel: it opens at the newest item (or at a given
// seq: a search hit), asks the server for the page before or after what it shows as the
// reader scrolls (thread/read beforeSeq / afterSeq: never the whole thread), follows what is
// recorded while it is open, and opens the diff of a recorded edit. One panel per thread.
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import * as vscode from "vscode";
import type { SessiondClient } from "../client";
import { describeError } from "../errors";
import { agentName, threadLabel } from "../format";
import type { Handoff, RestoreReport, ThreadInfo } from "../protocol";
import type { BlobDocuments } from "./blobs";
import { renderBanner, renderEntry, type RenderContext } from "./html";
import type { FromWebview, OpenTimings, PageMessage, ShownEntry, ToWebview } from "./messages";
import { NO_CHILDREN, type ChildThread, type Children, type Entry, type Item } from "./model";
import { TranscriptWindow } from "./window";

export const TRANSCRIPT_VIEW = "sessiond.transcript";
/** Items per page, in either direction (thread/read's `limit`). */
export const PAGE = 200;
/** Items a transcript keeps loaded at most (ten pages): the far end is let go past it. */
export const MAX_LOADED = 10 * PAGE;
/** `beforeSeq` past any thread's end: the newest page. */
const NEWEST = Number.MAX_SAFE_INTEGER;

/** What a transcript opens with. */
export interface TranscriptSource {
  thread: ThreadInfo;
  /** The resume's answer: its warnings become the banner, its pending operations are marked. */
  report?: RestoreReport | undefined;
  /** An imported thread's own agent, for "Resume in …" in the view's title. */
  handoff?: Handoff | undefined;
  /** Open at this seq instead of the newest item (a search hit), with these words marked. */
  atSeq?: number | undefined;
  highlight?: string[] | undefined;
  /** When the person's command (Resume, Open Transcript) started, Date.now(): the opening's
   * timings start there (else when the panel is created). */
  requestedAt?: number | undefined;
}

type Client = Pick<SessiondClient, "request" | "onNotification" | "onStateChange">;

export class TranscriptPanel {
  readonly panel: vscode.WebviewPanel;
  private source: TranscriptSource;
  private window = new TranscriptWindow(null, null);
  /** Sub-agents' transcripts opened in their calls' blocks, by thread id: each pages on its own. */
  private children = new Map<string, TranscriptWindow>();
  /** Page loads and live appends, one at a time, in order. */
  private queue: Promise<unknown> = Promise.resolve();
  private readonly subscriptions: { dispose(): unknown }[] = [];
  private subscribed = false;
  private disposed = false;
  /** "ready"s from the webview: a second one means it loaded again and shows nothing. */
  private readies = 0;
  /** When the panel was created, and whether its first opening has been timed. */
  private readonly createdAt: number;
  private timed = false;

  constructor(
    private readonly client: Client,
    private readonly extensionUri: vscode.Uri,
    private readonly blobs: BlobDocuments,
    source: TranscriptSource,
    private readonly onDispose: (panel: TranscriptPanel) => void,
  ) {
    this.source = source;
    const dist = vscode.Uri.joinPath(extensionUri, "dist");
    this.panel = vscode.window.createWebviewPanel(TRANSCRIPT_VIEW, threadLabel(source.thread), vscode.ViewColumn.Active, {
      enableScripts: true,
      retainContextWhenHidden: true,
      localResourceRoots: [dist],
    });
    this.panel.iconPath = vscode.Uri.joinPath(extensionUri, "media", "threads.svg");
    this.panel.webview.html = this.html();
    this.createdAt = Date.now();
    this.subscriptions.push(
      // The promise is for tests (they wait on what a message does); VS Code ignores it.
      this.panel.webview.onDidReceiveMessage((message: FromWebview) => this.received(message)),
      this.panel.onDidDispose(() => this.dispose()),
      client.onNotification("item/recorded", ({ threadId, items }) => {
        if (threadId === this.thread.threadId) void this.enqueue(() => this.live(items));
      }),
      // A restarted server has no subscriptions: follow the thread again.
      client.onStateChange((state) => {
        if (state === "running" && this.subscribed) void client.request("thread/subscribe", { threadId: this.thread.threadId }).catch(() => undefined);
      }),
    );
  }

  get thread(): ThreadInfo {
    return this.source.thread;
  }

  get handoff(): Handoff | undefined {
    return this.source.handoff;
  }

  get report(): RestoreReport | undefined {
    return this.source.report;
  }

  /** The loaded items (the turns Rewind to Turn offers). */
  loadedItems(): readonly Item[] {
    return this.window.loadedItems();
  }

  /** Whether anything was ever shown in it (a panel made ahead of its content may not be). */
  opened = false;

  /** Shows `source` from its newest item (or its seq); resolves once the page is sent. */
  open(source: TranscriptSource): Promise<void> {
    this.opened = true;
    this.source = source;
    this.panel.title = threadLabel(source.thread);
    return this.enqueue(() => this.first());
  }

  /** The thread changed under the view (clear, compact, rewind): its newest part again. */
  reload(report?: RestoreReport): Promise<void> {
    return this.open({ thread: this.thread, report: report ?? this.report, handoff: this.handoff });
  }

  setThread(thread: ThreadInfo): void {
    this.source = { ...this.source, thread: { ...this.source.thread, ...thread } };
    this.panel.title = threadLabel(this.source.thread);
  }

  /** The page before the first item shown ("Load earlier messages", or scrolling up). */
  loadEarlier(): Promise<void> {
    return this.enqueue(() => this.page("earlier"));
  }

  loadLater(): Promise<void> {
    return this.enqueue(() => this.page("later"));
  }

  reveal(): void {
    this.panel.reveal(undefined, false);
  }

  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    for (const subscription of this.subscriptions) subscription.dispose();
    if (this.subscribed) void this.client.request("thread/unsubscribe", { threadId: this.thread.threadId }).catch(() => undefined);
    this.panel.dispose();
    this.onDispose(this);
  }

  private enqueue<T>(work: () => Promise<T>): Promise<T> {
    const next = this.queue.then(work, work);
    this.queue = next.catch(() => undefined);
    return next;
  }

  private async first(): Promise<void> {
    const { thread, atSeq, report, requestedAt } = this.source;
    const startedAt = this.timed ? Date.now() : this.createdAt;
    const recovery = new Map((report?.pendingOperations ?? []).map((op) => [op.operationId, op.recovery]));
    const children = listChildren(this.client, thread);
    this.children = new Map();
    if (atSeq !== undefined) {
      const [before, after] = await Promise.all([
        this.client.request("thread/read", { threadId: thread.threadId, beforeSeq: atSeq + 1, limit: PAGE / 2 }),
        this.client.request("thread/read", { threadId: thread.threadId, afterSeq: atSeq, limit: PAGE / 2 }),
      ]);
      this.window = new TranscriptWindow(before.nextBeforeSeq ?? null, after.nextAfterSeq ?? null, recovery, MAX_LOADED);
      this.window.addEarlier(before.items, before.nextBeforeSeq ?? null);
      this.window.addLater(after.items, after.nextAfterSeq ?? null);
    } else {
      const page = await this.client.request("thread/read", { threadId: thread.threadId, beforeSeq: NEWEST, limit: PAGE });
      this.window = new TranscriptWindow(page.nextBeforeSeq ?? null, null, recovery, MAX_LOADED);
      this.window.addEarlier(page.items, page.nextBeforeSeq ?? null);
    }
    this.window.children = await children;
    const readAt = Date.now();
    const page = this.pageMessage("initial");
    const opened: OpenTimings = { requestedAt: requestedAt ?? startedAt, panelAt: startedAt, readAt, renderedAt: Date.now() };
    this.timed = true;
    this.send({ ...this.init(), opened });
    this.send(page);
    if (!this.subscribed) {
      this.subscribed = true;
      // Items recorded from now on (another client, another process) join the view.
      await this.client.request("thread/subscribe", { threadId: thread.threadId }).catch(() => (this.subscribed = false));
    }
  }

  private async page(direction: "earlier" | "later"): Promise<void> {
    const { threadId } = this.thread;
    const cursor = direction === "earlier" ? this.window.earlier : this.window.later;
    if (cursor === null) return this.sendPage(direction);
    try {
      if (direction === "earlier") {
        const page = await this.client.request("thread/read", { threadId, beforeSeq: cursor, limit: PAGE });
        this.window.addEarlier(page.items, page.nextBeforeSeq ?? null);
      } else {
        const page = await this.client.request("thread/read", { threadId, afterSeq: cursor, limit: PAGE });
        this.window.addLater(page.items, page.nextAfterSeq ?? null);
      }
    } catch (error) {
      this.send({ type: "failed", direction, message: describeError(`load ${direction} items`, error) });
      return;
    }
    this.sendPage(direction);
  }

  /** Queued like the pages (a first load queued before it replaces the window it reads). */
  private async live(items: readonly Item[]): Promise<void> {
    if (this.window.later !== null) return; // not at the end: paging forward brings them
    this.window.addLater(items, null);
    this.sendPage("live");
  }

  private async received(message: FromWebview): Promise<void> {
    try {
      switch (message.type) {
        case "ready":
          if (this.readies++ === 0) return;
          // The webview loaded again (VS Code may reload one): it shows nothing, so
          // everything loaded goes again.
          await this.enqueue(async () => {
            this.window.forgetShown();
            this.send(this.init());
            this.sendPage("initial");
          });
          return;
        case "earlier":
          return await this.loadEarlier();
        case "later":
          return await this.loadLater();
        case "diff":
          return await this.openDiff(message.key, message.threadId);
        case "child":
          return await this.enqueue(() => this.childPage(message.threadId));
        case "report":
          await vscode.commands.executeCommand("sessiond.showRestoreReport", this.thread.threadId);
          return;
      }
    } catch (error) {
      void vscode.window.showErrorMessage(describeError(message.type === "diff" ? "open the diff" : "update the transcript", error));
    }
  }

  /** Open diff on an edit entry (of a sub-agent's transcript when `childId` is given); one
   * whose contents the store lacks says so in place. */
  private async openDiff(key: string, childId?: string): Promise<void> {
    const window = childId ? this.children.get(childId) : this.window;
    const entry = window?.entry(key);
    if (!window || entry?.kind !== "edit") return;
    const thread = childId ? { ...this.thread, threadId: childId } : this.thread;
    if (await this.blobs.openDiff(thread, entry)) return;
    window.markNotRecorded(key);
    await this.enqueue(async () => (childId ? this.sendChild(childId, window) : this.sendPage("live")));
  }

  /** The next page of a sub-agent's transcript, from its start, into its block. */
  private async childPage(threadId: string): Promise<void> {
    let window = this.children.get(threadId);
    if (!window) {
      window = new TranscriptWindow(null, 0);
      this.children.set(threadId, window);
    }
    if (window.later === null) return this.sendChild(threadId, window);
    try {
      const page = await this.client.request("thread/read", { threadId, afterSeq: window.later, limit: PAGE });
      window.addLater(page.items, page.nextAfterSeq ?? null);
    } catch (error) {
      this.send({ type: "child", threadId, back: [], updates: [], hasMore: window.later !== null, failed: describeError("load the sub-agent's transcript", error) });
      return;
    }
    this.sendChild(threadId, window);
  }

  private sendChild(threadId: string, window: TranscriptWindow): void {
    const shown = this.shown(threadId);
    const change = window.change();
    const entries = change.reset ?? change.back;
    this.send({
      type: "child",
      threadId,
      back: entries.map(shown),
      updates: change.reset ? [] : change.updates.map(shown),
      ...(change.reset ? { reset: true } : {}),
      hasMore: window.later !== null,
    });
  }

  private shown(childId?: string): (entry: Entry) => ShownEntry {
    const context: RenderContext = {
      cwd: this.thread.cwd ?? undefined,
      agent: this.thread.origin ? agentName(this.thread.origin.agent) : "Agent",
      ...(childId ? { threadId: childId } : {}),
    };
    return (entry) => ({ key: entry.key, seq: entry.seq, html: renderEntry(entry, context) });
  }

  private init(): Extract<ToWebview, { type: "init" }> {
    const { report, thread } = this.source;
    const agent = this.source.handoff ? agentName(this.source.handoff.agent) : undefined;
    const notice = agent ? `A ${agent} session, shown read-only: Resume in ${agent} (in the title bar) continues it there.` : undefined;
    return { type: "init", threadId: thread.threadId, title: threadLabel(thread), banner: report ? renderBanner(report) : undefined, notice };
  }

  private sendPage(direction: PageMessage["direction"]): void {
    this.send(this.pageMessage(direction));
  }

  private pageMessage(direction: PageMessage["direction"]): PageMessage {
    const shown = this.shown();
    const change = this.window.change();
    const message: PageMessage = {
      type: "page",
      direction,
      front: change.front.map(shown),
      back: change.back.map(shown),
      updates: change.updates.map(shown),
      removes: change.removes,
      ...(change.reset ? { reset: change.reset.map(shown) } : {}),
      hasEarlier: this.window.earlier !== null,
      hasLater: this.window.later !== null,
    };
    if (direction === "initial" && this.source.atSeq !== undefined) {
      message.focusSeq = this.source.atSeq;
      if (this.source.highlight) message.highlight = this.source.highlight;
    }
    return message;
  }

  /**
   * Posted at once, not after the webview's "ready": VS Code holds what is posted before the
   * webview has loaded and hands it over once its document (and so its script, which listens
   * from the start) has — waiting for "ready" would add a round trip before the first page.
   */
  private send(message: ToWebview): void {
    if (!this.disposed) void this.panel.webview.postMessage(message);
  }

  private html(): string {
    const webview = this.panel.webview;
    const nonce = randomBytes(16).toString("base64");
    const csp = `default-src 'none'; style-src 'nonce-${nonce}'; img-src ${webview.cspSource} data:; script-src 'nonce-${nonce}';`;
    return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="${csp}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<style nonce="${nonce}">${inlineAsset(this.extensionUri, "webview.css")}</style>
<title>Transcript</title>
</head>
<body>
<div id="banner" hidden></div>
<p id="notice" class="notice" hidden></p>
<p id="earlier" class="end" role="status"></p>
<div id="feed" role="feed" aria-busy="true" aria-label="Transcript"></div>
<p id="later" class="end" role="status"></p>
<script nonce="${nonce}">${inlineAsset(this.extensionUri, "webview.js")}</script>
</body>
</html>`;
  }
}

const inlined = new Map<string, string>();

/**
 * The webview's script or stylesheet (dist/, ~6 KiB each), read once, to be written into its
 * HTML: loaded as files, each would come through VS Code's webview service worker and the
 * remote file system after the HTML (~30 ms in the e2e run, on the way to the first page).
 */
function inlineAsset(extensionUri: vscode.Uri, name: "webview.js" | "webview.css"): string {
  let text = inlined.get(name);
  if (text === undefined) {
    text = readFileSync(vscode.Uri.joinPath(extensionUri, "dist", name).fsPath, "utf8");
    // Either would end the element it is written into (esbuild escapes them in strings).
    if (/<\/(script|style)/i.test(text)) throw new Error(`dist/${name} cannot be written into the transcript's HTML: it holds a closing tag`);
    inlined.set(name, text);
  }
  return text;
}

/**
 * The thread's sub-agents (`thread/list {parentThreadId}`), unless a listing counted none
 * (`childCount` is counted by thread/list only: a resume's ThreadInfo does not say). Only
 * threads naming this one as their parent are taken, whatever the server answers.
 */
async function listChildren(client: Client, thread: ThreadInfo): Promise<Children> {
  if (thread.childCount === 0) return NO_CHILDREN;
  const listed = await client.request("thread/list", { parentThreadId: thread.threadId, limit: 200 }).catch(() => undefined);
  const byOperation = new Map<string, ChildThread>();
  const byThread = new Map<string, ChildThread>();
  const unanchored: ChildThread[] = [];
  for (const info of listed?.threads ?? []) {
    if (info.parentThreadId !== thread.threadId) continue;
    const child: ChildThread = { threadId: info.threadId, title: info.title ?? (info.preview || undefined), itemCount: info.itemCount, costUsd: info.costUsd };
    byThread.set(child.threadId, child);
    if (info.parentOperationId) byOperation.set(info.parentOperationId, child);
    else unanchored.push(child);
  }
  return { byOperation, byThread, unanchored };
}

/** Every open transcript, one per thread, and which one is in front. */
export class TranscriptPanels {
  private readonly panels = new Map<string, TranscriptPanel>();
  private readonly activeChanged = new vscode.EventEmitter<TranscriptPanel | undefined>();
  /** The transcript in front changed (the title's "Resume in …" follows it). */
  readonly onDidChangeActive = this.activeChanged.event;
  active: TranscriptPanel | undefined;

  constructor(
    private readonly client: Client,
    private readonly extensionUri: vscode.Uri,
    private readonly blobs: BlobDocuments,
  ) {}

  /** Opens (or brings forward and reloads) the thread's transcript. */
  async show(source: TranscriptSource): Promise<TranscriptPanel> {
    let panel = this.panels.get(source.thread.threadId);
    if (panel) {
      panel.reveal();
    } else {
      panel = this.create(source);
    }
    const opening = panel.open(source); // its source (handoff, report) first: `active` tells it
    this.setActive(panel);
    await opening;
    return panel;
  }

  /**
   * The thread's panel made now, empty, while what it will show is still on its way (a
   * resume): VS Code loads a new webview's host page meanwhile (0.1–0.4 s, most of a
   * window's first transcript). `discard` closes it again unless something was shown in it
   * (the resume was refused, cancelled, or went elsewhere).
   */
  prepare(thread: ThreadInfo): { discard(): void } {
    if (this.panels.has(thread.threadId)) return { discard: () => undefined };
    const panel = this.create({ thread });
    this.setActive(panel);
    let discarded = false;
    return {
      discard: () => {
        if (!panel.opened && !discarded) panel.dispose();
        discarded = true;
      },
    };
  }

  private create(source: TranscriptSource): TranscriptPanel {
    const panel = new TranscriptPanel(this.client, this.extensionUri, this.blobs, source, (gone) => {
      this.panels.delete(gone.thread.threadId);
      if (this.active === gone) this.setActive(undefined);
    });
    panel.panel.onDidChangeViewState(({ webviewPanel }) => {
      if (webviewPanel.active) this.setActive(panel);
      else if (this.active === panel) this.setActive(undefined);
    });
    this.panels.set(source.thread.threadId, panel);
    return panel;
  }

  get(threadId: string): TranscriptPanel | undefined {
    return this.panels.get(threadId);
  }

  close(threadId: string): void {
    this.panels.get(threadId)?.dispose();
  }

  private setActive(panel: TranscriptPanel | undefined): void {
    this.active = panel;
    this.activeChanged.fire(panel);
  }
}
