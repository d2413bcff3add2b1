// What the browser run stands on: the server installed from a wheel into a fresh venv (as a
// user installs it), git repositories with threads recorded through that real server, the
// .vsix built from this checkout, and code-server with that extension on 127.0.0.1.
import { execFileSync, spawn } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { randomUUID } from "node:crypto";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

export const EXTENSION_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..");
export const REPO_ROOT = path.dirname(EXTENSION_DIR);
const require = createRequire(path.join(EXTENSION_DIR, "package.json"));

function run(command, args, options = {}) {
  console.error(`[e2e] $ ${command} ${args.join(" ")}`);
  return execFileSync(command, args, { stdio: ["ignore", "pipe", "inherit"], encoding: "utf8", ...options });
}

export function git(cwd, ...args) {
  return execFileSync("git", args, { cwd, encoding: "utf8" }).trim();
}

export function makeRunDir() {
  const root = mkdtempSync(path.join(tmpdir(), "sessiond-e2e-"));
  for (const dir of ["screenshots", "home", "work", "vscode/user-data", "vscode/extensions", "xdg/config", "xdg/data", "xdg/cache"]) {
    mkdirSync(path.join(root, dir), { recursive: true });
  }
  return root;
}

/** A git repository with one commit on `main`. */
export function makeRepo(parent, name) {
  const repo = path.join(parent, name);
  mkdirSync(repo, { recursive: true });
  git(repo, "init", "-q", "-b", "main");
  git(repo, "config", "user.email", "e2e@example.invalid");
  git(repo, "config", "user.name", "e2e");
  writeFileSync(path.join(repo, "README.md"), `# ${name}\n`);
  git(repo, "add", ".");
  git(repo, "commit", "-q", "-m", "init");
  return repo;
}

/** `pip wheel` of this checkout, installed with its dependencies into a new venv. */
export function installServerFromWheel(root) {
  const wheels = path.join(root, "wheel");
  run("python3", ["-m", "pip", "wheel", "-q", "--no-deps", "-w", wheels, REPO_ROOT], {
    env: { ...process.env, PIP_DISABLE_PIP_VERSION_CHECK: "1" },
  });
  const wheel = readdirSync(wheels).find((name) => name.endsWith(".whl"));
  if (!wheel) throw new Error(`no wheel in ${wheels}`);
  const venv = path.join(root, "venv");
  run("python3", ["-m", "venv", venv]);
  run(path.join(venv, "bin/pip"), ["install", "-q", "--disable-pip-version-check", path.join(wheels, wheel)]);
  return path.join(venv, "bin/sessiond");
}

/** `npm run bundle && npm run package` (after `npm ci` if needed): the same .vsix a user installs. */
export function buildVsix() {
  if (!existsSync(path.join(EXTENSION_DIR, "node_modules"))) {
    run("npm", ["ci", "--no-audit", "--no-fund"], { cwd: EXTENSION_DIR, stdio: ["ignore", "inherit", "inherit"] });
  }
  run("npm", ["run", "--silent", "bundle"], { cwd: EXTENSION_DIR, stdio: ["ignore", "inherit", "inherit"] });
  run("npm", ["run", "--silent", "package"], { cwd: EXTENSION_DIR, stdio: ["ignore", "inherit", "inherit"] });
  const { name, version } = require("./package.json");
  return path.join(EXTENSION_DIR, `${name}-${version}.vsix`);
}

/**
 * The baseline the transcript's opening is set beside: test/e2e/empty-webview, an extension
 * that only opens an empty webview, packaged into the run directory (never into sessiond's
 * .vsix). Its timings are VS Code's webview machinery alone.
 */
export function buildEmptyWebviewVsix(root) {
  const source = path.join(root, "empty-webview");
  cpSync(path.join(EXTENSION_DIR, "test/e2e/empty-webview"), source, { recursive: true });
  const vsix = path.join(root, "empty-webview.vsix");
  run(path.join(EXTENSION_DIR, "node_modules/.bin/vsce"), ["package", "--skip-license", "--allow-missing-repository", "--out", vsix], { cwd: source, stdio: ["ignore", "ignore", "inherit"] });
  return vsix;
}

/** A JSON-RPC client of the installed server over its stdio pipe: an agent harness recording. */
export class Harness {
  constructor(sessiond, home, folders) {
    const rpc = require("vscode-jsonrpc/node");
    this.child = spawn(sessiond, ["--home", home, "serve", "--stdio"], { stdio: ["pipe", "pipe", "inherit"] });
    this.connection = rpc.createMessageConnection(new rpc.StreamMessageReader(this.child.stdout), new rpc.StreamMessageWriter(this.child.stdin));
    this.connection.listen();
    this.ready = this.connection
      .sendRequest("initialize", {
        protocolVersion: 1,
        clientInfo: { name: "e2e-harness", version: "1" },
        workspaceFolders: folders.map((folder) => ({ path: folder, name: path.basename(folder), trusted: true })),
      })
      .then(() => this.connection.sendNotification("initialized", {}));
  }

  async request(method, params) {
    await this.ready;
    return this.connection.sendRequest(method, params);
  }

  /** thread/start, record the items in batches, thread/close: a finished agent session. */
  async recordThread(cwd, title, items) {
    const { thread, sessionId } = await this.request("thread/start", { cwd, title });
    for (let start = 0; start < items.length; start += 500) {
      await this.request("thread/record", { threadId: thread.threadId, sessionId, items: items.slice(start, start + 500) });
    }
    await this.request("thread/close", { threadId: thread.threadId, sessionId });
    return thread.threadId;
  }

  async stop() {
    const exited = new Promise((resolve) => this.child.once("exit", resolve));
    await this.request("shutdown", null).catch(() => undefined);
    await this.connection.sendNotification("exit").catch(() => undefined);
    this.connection.dispose();
    await exited;
  }
}

/** A conversation of `count` messages in turns of two: user, then assistant. */
export function conversation(prefix, count) {
  const items = [];
  for (let index = 1; index <= count; index++) {
    const turnId = `${prefix}-t${Math.ceil(index / 2)}`;
    const role = index % 2 === 1 ? "user" : "assistant";
    items.push({ type: "message", id: `${prefix}-m${index}`, turnId, role, content: `${prefix} message ${index} (${role})` });
  }
  return items;
}

/**
 * A Claude Code transcript as Claude Code writes it (~/.claude/projects/<cwd, non-alphanumerics
 * as "-">/<sessionId>.jsonl): a question, an answer with its usage, a TodoWrite and its result.
 */
export function writeClaudeSession(projects, cwd, branch, sessionId, question) {
  let parent = null;
  let clock = Date.parse("2026-11-02T09:30:00Z");
  const entry = (type, message, extra = {}) => {
    clock += 7000;
    const uuid = randomUUID();
    const line = { parentUuid: parent, isSidechain: false, userType: "external", cwd, sessionId, version: "2.1.37", gitBranch: branch, type, message, uuid, timestamp: new Date(clock).toISOString(), ...extra };
    parent = uuid;
    return line;
  };
  const usage = { input_tokens: 12, cache_creation_input_tokens: 0, cache_read_input_tokens: 4000, output_tokens: 80, service_tier: "standard" };
  const assistant = (content) =>
    entry("assistant", { model: "claude-sonnet-4-5-20250929", id: `msg_${randomUUID().slice(0, 8)}`, type: "message", role: "assistant", content, stop_reason: "end_turn", usage });
  const todos = [{ content: "write the toggle test", status: "in_progress", activeForm: "writing the toggle test" }];
  const lines = [
    { type: "permission-mode", permissionMode: "acceptEdits", sessionId },
    entry("user", { role: "user", content: question }, { permissionMode: "acceptEdits" }),
    assistant([{ type: "text", text: "The toggle goes in the header; the theme is a CSS variable." }]),
    assistant([{ type: "tool_use", id: "toolu_e2e1", name: "TodoWrite", input: { todos } }]),
    entry("user", { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_e2e1", content: "Todos have been modified successfully" }] }, { toolUseResult: { oldTodos: [], newTodos: todos } }),
  ];
  const file = path.join(projects, cwd.replace(/[^A-Za-z0-9]/g, "-"), `${sessionId}.jsonl`);
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, lines.map((line) => `${JSON.stringify(line)}\n`).join(""));
  return file;
}

/**
 * A stand-in for an agent's CLI in ~/bin: it only writes down where and how it was started.
 * VS Code takes its PATH from the user's login shell, so ~/bin is put on it the way Debian's
 * default ~/.profile does.
 */
export function writeAgentStub(home, name, log) {
  const binDir = path.join(home, "bin");
  mkdirSync(binDir, { recursive: true });
  writeFileSync(path.join(home, ".profile"), 'if [ -d "$HOME/bin" ] ; then PATH="$HOME/bin:$PATH"; fi\n');
  const file = path.join(binDir, name);
  writeFileSync(file, `#!/bin/sh\nprintf '%s %s\\n' "$PWD" "$*" >> '${log}'\n`, { mode: 0o755 });
  return file;
}

function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

/** code-server on 127.0.0.1 with its own user data, extensions (`vsix`: one or a list) and XDG dirs under `root`. */
export async function startCodeServer(tools, { root, vsix, sessiond, home, log }) {
  const userData = path.join(root, "vscode/user-data");
  const extensions = path.join(root, "vscode/extensions");
  const env = {
    ...process.env,
    PATH: `${tools.nodeBin}:${process.env.PATH}`,
    HOME: root,
    XDG_CONFIG_HOME: path.join(root, "xdg/config"),
    XDG_DATA_HOME: path.join(root, "xdg/data"),
    XDG_CACHE_HOME: path.join(root, "xdg/cache"),
    SESSIOND_HOME: home,
  };
  delete env.VSCODE_IPC_HOOK_CLI;
  const common = ["--user-data-dir", userData, "--extensions-dir", extensions];
  for (const each of [vsix].flat()) run(tools.codeServer, [...common, "--install-extension", each], { env, stdio: ["ignore", "inherit", "inherit"] });
  mkdirSync(path.join(userData, "User"), { recursive: true });
  writeFileSync(
    path.join(userData, "User/settings.json"),
    JSON.stringify(
      {
        // The server the user installed, also serving WebSocket clients (sessiond client).
        "sessiond.serverCommand": [sessiond, "serve", "--stdio", "--ws", "0"],
        "workbench.startupEditor": "none",
        "workbench.tips.enabled": false,
        "workbench.enableExperiments": false,
        "security.workspace.trust.enabled": false,
        "telemetry.telemetryLevel": "off",
        "update.mode": "none",
        "extensions.autoCheckUpdates": false,
        "extensions.ignoreRecommendations": true,
        "chat.disableAIFeatures": true,
        "git.enabled": false,
        "window.menuBarVisibility": "compact",
        "workbench.secondarySideBar.defaultVisibility": "hidden",
      },
      null,
      2,
    ),
  );
  const port = await freePort();
  const child = spawn(
    tools.codeServer,
    [
      ...common,
      "--bind-addr",
      `127.0.0.1:${port}`,
      "--auth",
      "none",
      "--disable-telemetry",
      "--disable-update-check",
      "--disable-workspace-trust",
      "--disable-getting-started-override",
      "--ignore-last-opened",
    ],
    { env, stdio: ["ignore", "pipe", "pipe"], detached: true },
  );
  const output = [];
  const listening = new Promise((resolve, reject) => {
    const onData = (chunk) => {
      const text = chunk.toString("utf8");
      output.push(text);
      log?.(text);
      if (/HTTP server listening on/.test(output.join(""))) resolve();
    };
    child.stdout.on("data", onData);
    child.stderr.on("data", onData);
    child.once("exit", (code, signal) => reject(new Error(`code-server exited (${code ?? signal}):\n${output.join("")}`)));
    // A hang guard, not a performance limit: it starts in seconds.
    setTimeout(() => reject(new Error(`code-server did not listen within 2 minutes:\n${output.join("")}`)), 120_000).unref();
  });
  /** Kills code-server and everything it started (extension host, sessiond), by group. */
  const stop = () => {
    try {
      process.kill(-child.pid, "SIGKILL");
    } catch {
      // Already gone.
    }
  };
  // Also when this process is interrupted or ends without reaching the suite's `after`.
  process.once("exit", stop);
  for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) {
    process.once(signal, () => {
      stop();
      process.exit(128 + (signal === "SIGINT" ? 2 : signal === "SIGTERM" ? 15 : 1));
    });
  }
  try {
    await listening;
  } catch (error) {
    stop();
    throw error;
  }
  return { url: `http://127.0.0.1:${port}`, stop };
}
