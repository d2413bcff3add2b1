// Shared set-up for tests: real git repos, a real server command, and the extension
// activated against the stubbed `vscode` module.
import { Uri, vscodeStub, type WebviewPanel } from "./vscode";
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import type * as vscodeTypes from "vscode";
import { SessiondClient } from "../../src/client";
import { activate, type SessiondExtensionApi } from "../../src/extension";
import type { ThreadsNode, ThreadsTreeProvider } from "../../src/threadsTree";
import type { FromWebview, PageMessage, ShownEntry, ToWebview } from "../../src/transcript/messages";
import { textOf } from "./text";

export { textOf };

/** The sessiond checkout this extension lives in (out/test/support → repo root). */
export const REPO_ROOT = path.resolve(__dirname, "..", "..", "..", "..");
export const EXTENSION_DIR = path.join(REPO_ROOT, "vscode-extension");

export function tempDir(prefix: string): { path: string; remove(): void } {
  const dir = mkdtempSync(path.join(tmpdir(), prefix));
  return {
    path: dir,
    remove: () => {
      stopSharedServers(dir);
      rmSync(dir, { recursive: true, force: true, maxRetries: 5, retryDelay: 100 });
    },
  };
}

/** Shared servers (`sessiond.connect: "auto"`) outlive the window that started them by
 * their grace period, still writing in their data dir: a test's clean-up ends every one a
 * discovery file under `dir` names (`<home>/servers/*.json`, at most two levels down)
 * before the directory goes. */
function stopSharedServers(dir: string): void {
  const homes = [dir, ...subdirs(dir), ...subdirs(dir).flatMap(subdirs)];
  const pids = homes.flatMap((home) => {
    const servers = path.join(home, "servers");
    if (!existsSync(servers)) return [];
    return readdirSync(servers).filter((name) => name.endsWith(".json")).flatMap((name) => {
      try {
        const pid = (JSON.parse(readFileSync(path.join(servers, name), "utf8")) as { pid?: unknown }).pid;
        return typeof pid === "number" && Number.isInteger(pid) && pid > 0 ? [pid] : [];
      } catch {
        return []; // half written or already gone
      }
    });
  });
  for (const pid of pids) signal(pid, "SIGKILL");
  const sleeper = new Int32Array(new SharedArrayBuffer(4));
  for (let waited = 0; waited < 5000 && pids.some(running); waited += 20) Atomics.wait(sleeper, 0, 0, 20);
}

/** Alive and not a zombie (a server this process spawned is reaped only once its event
 * loop runs again, which the wait above does not let it). */
function running(pid: number): boolean {
  if (!signal(pid, 0)) return false;
  try {
    return readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.[0] !== "Z";
  } catch {
    return false;
  }
}

function subdirs(dir: string): string[] {
  try {
    return readdirSync(dir, { withFileTypes: true }).filter((entry) => entry.isDirectory()).map((entry) => path.join(dir, entry.name));
  } catch {
    return [];
  }
}

function signal(pid: number, name: NodeJS.Signals | 0): boolean {
  try {
    process.kill(pid, name);
    return true;
  } catch {
    return false;
  }
}

export function git(cwd: string, ...args: string[]): string {
  return execFileSync("git", args, { cwd, encoding: "utf8" }).trim();
}

/** A real git repository with one commit on `main`. */
export function makeRepo(parent: string, name: string): string {
  const repo = path.join(parent, name);
  execFileSync("mkdir", ["-p", repo]);
  git(repo, "init", "-q", "-b", "main");
  git(repo, "config", "user.email", "test@example.invalid");
  git(repo, "config", "user.name", "test");
  writeFileSync(path.join(repo, "README"), name);
  git(repo, "add", ".");
  git(repo, "commit", "-q", "-m", "init");
  return repo;
}

/** The real server from this checkout, on its own data directory. */
export function serverCommand(home: string): string[] {
  process.env["PYTHONPATH"] = [REPO_ROOT, process.env["PYTHONPATH"]].filter(Boolean).join(path.delimiter);
  process.env["SESSIOND_DURABILITY"] = "none";
  return [process.env["SESSIOND_PYTHON"] ?? "python", "-m", "server.cli", "--home", home, "serve", "--stdio"];
}

/** An agent harness recording through its own server process on the data dir `home`, with
 * `repo` open as a trusted folder (what seeds a test's threads). */
export function harnessClient(home: string, repo: string): SessiondClient {
  return new SessiondClient({
    command: serverCommand(home),
    clientInfo: { name: "test-harness", version: "1" },
    workspaceFolders: () => [{ path: repo, name: path.basename(repo), trusted: true }],
  });
}

export interface ActivatedExtension {
  api: SessiondExtensionApi;
  deactivate(): Promise<void>;
}

export async function activateExtension(options: {
  command: string[];
  folders: string[];
  pageSize?: number;
  /** Buttons for the first dialogs, in order (a dialog can appear while activating). */
  answers?: ((shown: import("./vscode").ShownMessage) => string | undefined)[];
}): Promise<ActivatedExtension> {
  vscodeStub.reset();
  vscodeStub.answers.push(...(options.answers ?? []));
  vscodeStub.configuration.set("sessiond.serverCommand", options.command);
  if (options.pageSize) vscodeStub.configuration.set("sessiond.threadsPageSize", options.pageSize);
  vscodeStub.setWorkspaceFolders(options.folders);
  const subscriptions: { dispose(): unknown }[] = [];
  const extensionUri = Uri.file(EXTENSION_DIR);
  const api = await activate({ subscriptions, extensionUri } as unknown as vscodeTypes.ExtensionContext);
  return {
    api,
    deactivate: async () => {
      await api.sessions.closeActive().catch(() => undefined);
      for (const subscription of subscriptions) subscription.dispose();
      await api.client.stop();
    },
  };
}

/** The Threads view as a user reads it: one line per row, indented by depth. */
export async function renderTree(provider: ThreadsTreeProvider): Promise<string[]> {
  const lines: string[] = [];
  const walk = async (node: ThreadsNode | undefined, depth: number): Promise<void> => {
    for (const child of await provider.getChildren(node)) {
      const item = provider.getTreeItem(child);
      lines.push(`${"  ".repeat(depth)}${item.label as string}${item.description ? ` — ${item.description as string}` : ""}`);
      await walk(child, depth + 1);
    }
  };
  await walk(undefined, 0);
  return lines;
}

/** The tree node of the thread shown with this label, as the tree hands it to commands. */
/** The row of the thread labelled `label` (or, when `threadId` is given, of that thread among
 * those so labelled: a fork keeps its thread's title). */
export async function findThreadNode(provider: ThreadsTreeProvider, label: string, threadId?: string): Promise<ThreadsNode> {
  const search = async (node: ThreadsNode | undefined): Promise<ThreadsNode | undefined> => {
    for (const child of await provider.getChildren(node)) {
      if (
        child.kind === "thread" &&
        provider.getTreeItem(child).label === label &&
        (threadId === undefined || child.thread.threadId === threadId)
      )
        return child;
      const found = await search(child);
      if (found) return found;
    }
    return undefined;
  };
  const found = await search(undefined);
  if (!found) throw new Error(`no thread labelled ${label} in:\n${(await renderTree(provider)).join("\n")}`);
  return found;
}

export async function waitFor<T>(what: string, probe: () => T | undefined | Promise<T | undefined>, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

export { vscodeStub };

/** One entry as the transcript's webview shows it. */
export interface ShownTranscriptEntry {
  key: string;
  seq: number;
  html: string;
  /** What a person reads: the HTML without tags, entities decoded, spaces collapsed. */
  text: string;
}

export interface ShownTranscript {
  title: string;
  banner: string | undefined;
  notice: string | undefined;
  entries: ShownTranscriptEntry[];
  hasEarlier: boolean;
  hasLater: boolean;
  focusSeq: number | undefined;
  /** Every page message, in order (direction, sizes). */
  pages: PageMessage[];
}

/** The transcript webview of `threadId` sends `message`, as its script does on a click or scroll. */
export async function fromWebview(api: SessiondExtensionApi, threadId: string, message: FromWebview): Promise<void> {
  const panel = api.transcripts.get(threadId)?.panel as unknown as WebviewPanel | undefined;
  if (!panel) throw new Error(`no transcript is open for ${threadId}`);
  await panel.send(message);
}

/**
 * What the transcript webview of `threadId` shows, rebuilt from the messages the extension
 * posted to it, applied as the webview's script applies them (test/e2e checks the real one).
 * The first call answers as the webview's script does when it loads ("ready").
 */
export async function shownTranscript(api: SessiondExtensionApi, threadId: string): Promise<ShownTranscript> {
  const panel = api.transcripts.get(threadId)?.panel as unknown as WebviewPanel | undefined;
  if (!panel) throw new Error(`no transcript is open for ${threadId}`);
  if (!(panel as { e2eReady?: boolean }).e2eReady) {
    (panel as { e2eReady?: boolean }).e2eReady = true;
    await panel.send({ type: "ready" });
  }
  await new Promise((resolve) => setImmediate(resolve)); // posts wait for the ready's promise
  const shown: ShownTranscript = { title: panel.title, banner: undefined, notice: undefined, entries: [], hasEarlier: false, hasLater: false, focusSeq: undefined, pages: [] };
  for (const message of panel.posted as ToWebview[]) {
    if (message.type === "init") {
      shown.banner = message.banner;
      shown.notice = message.notice;
    }
    if (message.type !== "page") continue;
    shown.pages.push(message);
    const entry = (e: ShownEntry): ShownTranscriptEntry => ({ ...e, text: textOf(e.html) });
    if (message.reset) {
      shown.entries = message.reset.map(entry);
    } else {
      shown.entries = shown.entries.filter((e) => !message.removes.includes(e.key));
      shown.entries = shown.entries.map((e) => {
        const update = message.updates.find((u) => u.key === e.key);
        return update ? entry(update) : e;
      });
      shown.entries = [...message.front.map(entry), ...shown.entries, ...message.back.map(entry)];
    }
    shown.hasEarlier = message.hasEarlier;
    shown.hasLater = message.hasLater;
    if (message.direction === "initial") shown.focusSeq = message.focusSeq;
  }
  return shown;
}
