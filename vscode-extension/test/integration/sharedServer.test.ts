// Windows sharing one server (`sessiond.connect: "auto"`): the first window's client has
// `sessiond client --spawn` start a lingering server, the second connects to the same
// process over its WebSocket and hears what the first records; a kill -9 of the shared
// server is replaced; `"spawn"` keeps a server of its own on stdio. Real processes.
import { makeRepo, REPO_ROOT, serverCommand, tempDir, waitFor } from "../support/harness";
import assert from "node:assert/strict";
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { existsSync, lstatSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import * as path from "node:path";
import { after, describe, it } from "node:test";
import { SessiondClient } from "../../src/client";
import type { ThreadStartedNotification } from "../../src/protocol";

describe("windows sharing one server", () => {
  const root = tempDir("sessiond-ext-shared-");
  const home = `${root.path}/home`;
  const repo = makeRepo(root.path, "app");
  const clients: SessiondClient[] = [];
  const servers = new Set<number>();

  const window = (connect: "auto" | "spawn") => {
    const client = new SessiondClient({
      command: serverCommand(home),
      clientInfo: { name: `window-${clients.length + 1}`, version: "1" },
      workspaceFolders: () => [{ path: repo, name: "app", trusted: true }],
      connect,
      restartDelayMs: 50,
    });
    clients.push(client);
    return client;
  };
  const discovered = () =>
    readdirSync(path.join(home, "servers"))
      .filter((name) => name.endsWith(".json"))
      .map((name) => JSON.parse(readFileSync(path.join(home, "servers", name), "utf8")) as { pid: number });

  after(async () => {
    for (const client of clients) await client.stop().catch(() => undefined);
    for (const record of discovered()) servers.add(record.pid);
    for (const pid of servers) {
      try {
        process.kill(pid, "SIGKILL"); // the lingering servers these tests started
      } catch {
        // already gone
      }
    }
    root.remove();
  });

  it("the second window connects to the server the first one started, and hears its threads", async () => {
    const first = window("auto");
    await first.start();
    assert.ok(first.isShared, "the first window started a shared server");
    const pid = first.pid!;
    servers.add(pid);
    assert.deepEqual(discovered().map((record) => record.pid), [pid]);
    const second = window("auto");
    await second.start();
    assert.ok(second.isShared);
    assert.equal(second.pid, pid, "one server for both windows");
    const heard: ThreadStartedNotification[] = [];
    second.onNotification("thread/started", (params) => heard.push(params));
    const started = await first.request("thread/start", { cwd: repo, title: "from window 1" });
    await waitFor("window 2 to hear of the thread", () => heard.find((n) => n.thread.threadId === started.thread.threadId));
    const listed = await second.request("thread/list", { limit: 10 });
    assert.deepEqual(listed.threads.map((t) => t.title), ["from window 1"]);
    await first.request("thread/close", { threadId: started.thread.threadId, sessionId: started.sessionId });
  });

  it("replaces a shared server killed with SIGKILL, and the window lists again", async () => {
    const client = clients[0]!;
    const killed = client.pid!;
    process.kill(killed, "SIGKILL");
    const pid = await waitFor("a new shared server", () => (client.state === "running" && client.pid !== killed ? client.pid : undefined));
    servers.add(pid!);
    assert.ok(client.isShared);
    assert.deepEqual(discovered().map((record) => record.pid), [pid]);
    const listed = await client.request("thread/list", { limit: 10 });
    assert.deepEqual(listed.threads.map((t) => t.title), ["from window 1"]);
  });

  it('keeps a server of its own with "spawn"', async () => {
    const own = window("spawn");
    await own.start();
    assert.ok(!own.isShared);
    assert.ok(!discovered().some((record) => record.pid === own.pid), "a stdio server publishes no discovery file");
  });
});

describe("two windows opening at once, no server running", () => {
  it("end with one server", async () => {
    const root = tempDir("sessiond-ext-race-");
    const home = `${root.path}/home`;
    const repo = makeRepo(root.path, "app");
    const make = () =>
      new SessiondClient({ command: serverCommand(home), clientInfo: { name: "racer", version: "1" }, workspaceFolders: () => [{ path: repo, name: "app" }], connect: "auto" });
    const [a, b] = [make(), make()];
    const started = new Set<number>();
    try {
      await Promise.all([a.start(), b.start()]);
      for (const pid of [a.pid, b.pid]) if (pid) started.add(pid);
      assert.ok(a.isShared && b.isShared);
      assert.equal(a.pid, b.pid, "one server for both");
      const files = readdirSync(path.join(home, "servers")).filter((name) => name.endsWith(".json"));
      assert.equal(files.length, 1);
    } finally {
      await a.stop();
      await b.stop();
      for (const pid of started) process.kill(pid, "SIGKILL"); // the server this test started
      root.remove();
    }
  });
});

// Issue 34: after the shared server died uncleanly, another local user may bind its port
// and be given its pid. The window must send such a stranger nothing (not the token, not
// its folders), and neither may it send anything to a process of its own that listens
// there without the token. Real processes: the stranger (tests/support/stranger.py) runs
// as `nobody` (root only: setpriv), or as this user.
describe("a stranger in a dead shared server's place", () => {
  const setpriv = ["/usr/bin/setpriv", "/bin/setpriv"].find((candidate) => existsSync(candidate));
  const asNobody = process.getuid?.() === 0 && setpriv ? [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"] : undefined;

  /** The stranger on `port`; resolves with its pid and what it heard (filled as it hears). */
  const stranger = async (port: number, prefix: string[]): Promise<{ pid: number; heard: string[]; child: ChildProcess }> => {
    // Its absolute path: run by another user through setpriv, a bare `python` finds no venv.
    const python = execFileSync(process.env["SESSIOND_PYTHON"] ?? "python", ["-c", "import sys; print(sys.executable)"], { encoding: "utf8" }).trim();
    const [program, ...args] = [...prefix, python, "-m", "tests.support.stranger", String(port)];
    const child = spawn(program!, args, { cwd: REPO_ROOT, env: process.env, stdio: ["ignore", "pipe", "inherit"] });
    const heard: string[] = [];
    let buffered = "";
    const ready = new Promise<number>((resolve, reject) => {
      child.stdout!.on("data", (chunk: Buffer) => {
        buffered += chunk.toString("utf8");
        for (let at = buffered.indexOf("\n"); at !== -1; at = buffered.indexOf("\n")) {
          const line = buffered.slice(0, at);
          buffered = buffered.slice(at + 1);
          const parsed = JSON.parse(line) as { ready?: number };
          if (parsed.ready !== undefined) resolve(parsed.ready);
          else heard.push(line);
        }
      });
      child.once("exit", (code) => reject(new Error(`the stranger exited (${code})`)));
    });
    return { pid: await ready, heard, child };
  };

  /** A window's server killed with SIGKILL: its discovery file stays, naming its port. */
  const deadServer = async (home: string, repo: string): Promise<{ file: string; record: { pid: number; port: number; token: string } }> => {
    const first = new SessiondClient({ command: serverCommand(home), clientInfo: { name: "first", version: "1" }, workspaceFolders: () => [{ path: repo, name: "app" }], connect: "auto" });
    await first.start();
    const pid = first.pid!;
    await first.stop(); // the server lingers for others; then it dies uncleanly
    process.kill(pid, "SIGKILL");
    await waitFor("the server to die", () => {
      try {
        process.kill(pid, 0);
        return readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.[0] === "Z" ? true : undefined;
      } catch {
        return true;
      }
    });
    const name = readdirSync(path.join(home, "servers")).find((entry) => entry.endsWith(".json"))!;
    const file = path.join(home, "servers", name);
    return { file, record: JSON.parse(readFileSync(file, "utf8")) as { pid: number; port: number; token: string } };
  };

  for (const who of ["another user (its pid and port)", "a process of ours without the token"] as const) {
    it(`sends ${who} nothing and starts a server of its own`, async (t) => {
      const prefix = who.startsWith("another") ? asNobody : [];
      if (!prefix) {
        t.skip("another uid needs root and setpriv");
        return;
      }
      const root = tempDir("sessiond-ext-stranger-");
      const home = `${root.path}/home`;
      const repo = makeRepo(root.path, "app");
      let squatter: ChildProcess | undefined;
      const window = new SessiondClient({ command: serverCommand(home), clientInfo: { name: "window", version: "1" }, workspaceFolders: () => [{ path: repo, name: "app" }], connect: "auto" });
      try {
        const { file, record } = await deadServer(home, repo);
        const found = await stranger(record.port, prefix);
        squatter = found.child;
        writeFileSync(file, JSON.stringify({ ...record, pid: found.pid })); // the pid it was given
        await window.start();
        assert.ok(window.isShared, "a shared server of our own");
        assert.ok(window.pid !== found.pid && window.pid !== record.pid);
        await new Promise((resolve) => setTimeout(resolve, 200)); // anything sent has arrived
        const heard = found.heard.join("\n");
        assert.ok(!heard.includes(record.token), "the token never reaches it");
        assert.ok(!heard.includes(repo), "nor the window's folders");
        assert.deepEqual(found.heard.filter((line) => line.startsWith('{"message"')), [], "not a frame");
        if (prefix.length) assert.deepEqual(found.heard, [], "another user's pid is stale: not even a connection");
        await window.request("thread/list", { limit: 10 });
      } finally {
        await window.stop();
        squatter?.kill("SIGKILL");
        root.remove();
      }
    });
  }

  it("connects over the Unix socket in the private data dir", async () => {
    const root = tempDir("sessiond-ext-unix-");
    const home = `${root.path}/home`;
    const repo = makeRepo(root.path, "app");
    const window = new SessiondClient({ command: serverCommand(home), clientInfo: { name: "window", version: "1" }, workspaceFolders: () => [{ path: repo, name: "app" }], connect: "auto", log: (line) => logged.push(line) });
    const logged: string[] = [];
    try {
      await window.start();
      const name = readdirSync(path.join(home, "servers")).find((entry) => entry.endsWith(".json"))!;
      const record = JSON.parse(readFileSync(path.join(home, "servers", name), "utf8")) as { socket: string; pid: number };
      assert.ok(lstatSync(path.join(home, "servers", record.socket)).isSocket());
      const peers = readFileSync(`/proc/${record.pid}/net/unix`, "utf8");
      assert.ok(peers.includes(record.socket), "the server listens on its socket");
      assert.equal(window.transport, "unix");
    } finally {
      await window.stop();
      root.remove();
    }
  });
});
