// Windows sharing one server (`sessiond.connect: "auto"`): the first window's client has
// `sessiond client --spawn` start a lingering server, the second connects to the same
// process over its WebSocket and hears what the first records; a kill -9 of the shared
// server is replaced; `"spawn"` keeps a server of its own on stdio. Real processes.
import { makeRepo, serverCommand, tempDir, waitFor } from "../support/harness";
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
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
