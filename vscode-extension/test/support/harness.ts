// Shared set-up for tests: real git repos, a real server command, and the extension
// activated against the stubbed `vscode` module.
import { vscodeStub } from "./vscode";
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import type * as vscodeTypes from "vscode";
import { SessiondClient } from "../../src/client";
import { activate, type SessiondExtensionApi } from "../../src/extension";
import type { ThreadsNode, ThreadsTreeProvider } from "../../src/threadsTree";

/** The sessiond checkout this extension lives in (out/test/support → repo root). */
export const REPO_ROOT = path.resolve(__dirname, "..", "..", "..", "..");

export function tempDir(prefix: string): { path: string; remove(): void } {
  const dir = mkdtempSync(path.join(tmpdir(), prefix));
  return { path: dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
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
  const api = await activate({ subscriptions } as unknown as vscodeTypes.ExtensionContext);
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
export async function findThreadNode(provider: ThreadsTreeProvider, label: string): Promise<ThreadsNode> {
  const search = async (node: ThreadsNode | undefined): Promise<ThreadsNode | undefined> => {
    for (const child of await provider.getChildren(node)) {
      if (child.kind === "thread" && provider.getTreeItem(child).label === label) return child;
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
