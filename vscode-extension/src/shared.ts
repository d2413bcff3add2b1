// One sessiond for every window: find the server already running for this user and data
// dir (its discovery file `servers/<port>.json`, 0600, holds its port and token), connect
// to it over its loopback WebSocket, else start `sessiond serve --ws 0 --linger 30 --shared`
// detached: that server takes the spawn lock (a flock, in the data dir) and leaves at once
// if another already answers, so two windows opening at once end with one server.
// The token is read from the file and sent in a header; it never reaches a command line.
// `ws` instead of a global WebSocket: the Node in VS Code 1.85 has none, and a browser-style
// WebSocket cannot send the Authorization header.
import { spawn } from "node:child_process";
import { closeSync, mkdirSync, openSync, readdirSync, readFileSync, statSync } from "node:fs";
import { homedir } from "node:os";
import * as path from "node:path";
import { AbstractMessageReader, AbstractMessageWriter, type DataCallback, type Message, type MessageReader, type MessageWriter } from "vscode-jsonrpc/node";
import WebSocket from "ws";

export type ConnectMode = "auto" | "spawn";

/** How long a server this extension starts stays once no window is connected. */
export const LINGER_SECONDS = 30;
const ANSWER_MS = 5000;

export interface ServerRecord {
  pid: number;
  host: string;
  port: number;
  url: string;
  token: string;
}

export interface SharedServerPlan {
  home: string;
  /** `… serve --ws 0 --linger 30 --shared`: a lingering server, unless one answers. */
  spawnCommand: string[];
}

/**
 * How this command's server can be shared, or undefined when it cannot: only a plain
 * `… serve --stdio` is; any other serve option (`--follow`, a frame
 * limit) makes a server unlike the shared one, so that window keeps its own.
 */
export function sharedServerPlan(command: readonly string[], env: NodeJS.ProcessEnv): SharedServerPlan | undefined {
  const serveAt = command.indexOf("serve");
  if (serveAt < 1) return undefined;
  const prefix = command.slice(0, serveAt);
  if (command.slice(serveAt + 1).some((arg) => arg !== "--stdio")) return undefined;
  let home: string | undefined;
  for (let n = 1; n < prefix.length; n++) {
    const arg = prefix[n]!;
    if (arg === "--home") home = prefix[n + 1];
    else if (arg.startsWith("--home=")) home = arg.slice("--home=".length);
  }
  home ??= env["SESSIOND_HOME"] || (env["XDG_STATE_HOME"] ? path.join(env["XDG_STATE_HOME"], "sessiond") : path.join(homedir(), ".local", "state", "sessiond"));
  return { home, spawnCommand: [...prefix, "serve", "--ws", "0", "--linger", String(LINGER_SECONDS), "--shared"] };
}

function pidAlive(pid: unknown): boolean {
  if (typeof pid !== "number" || !Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** The records of servers whose process is alive, newest first (a dead one's file is left
 * for `sessiond client` to remove: it checks the port too). */
export function liveServers(home: string): ServerRecord[] {
  const directory = path.join(home, "servers");
  let names: string[];
  try {
    names = readdirSync(directory).filter((name) => name.endsWith(".json") && !name.startsWith("."));
  } catch {
    return [];
  }
  const found: { at: number; record: ServerRecord }[] = [];
  for (const name of names) {
    try {
      const file = path.join(directory, name);
      const record = JSON.parse(readFileSync(file, "utf8")) as ServerRecord;
      if (typeof record.port === "number" && typeof record.token === "string" && pidAlive(record.pid)) {
        found.push({ at: statSync(file).mtimeMs, record });
      }
    } catch {
      // Unreadable or half-written: not a server to use.
    }
  }
  return found.sort((a, b) => b.at - a.at).map((entry) => entry.record);
}

/**
 * Starts the shared server, detached (its own session: it outlives this window), its stderr
 * appended to `servers/spawned.log`; resolves once it has published its discovery file, or
 * has left because another server answers (connect to that one).
 */
export function spawnShared(plan: SharedServerPlan, cwd: string | undefined, env: NodeJS.ProcessEnv): Promise<void> {
  const [program, ...args] = plan.spawnCommand;
  const directory = path.join(plan.home, "servers");
  mkdirSync(directory, { recursive: true, mode: 0o700 });
  const log = openSync(path.join(directory, "spawned.log"), "a", 0o600);
  const child = (() => {
    try {
      return spawn(program!, args, { cwd, env, detached: true, stdio: ["ignore", "ignore", log] });
    } finally {
      closeSync(log);
    }
  })();
  child.unref();
  return new Promise((resolve, reject) => {
    const tail = () => {
      try {
        return readFileSync(path.join(directory, "spawned.log"), "utf8").trim().split("\n").pop();
      } catch {
        return undefined;
      }
    };
    let poll: NodeJS.Timeout | undefined;
    const finish = (error?: Error) => {
      child.removeAllListeners();
      clearInterval(poll);
      clearTimeout(guard);
      if (error) reject(error);
      else resolve();
    };
    const guard = setTimeout(() => finish(new Error("the shared server published no port in 30 s")), 30_000);
    child.once("error", (error) => finish(error));
    child.once("exit", (code) => finish(code === 0 ? undefined : new Error(tail() || `exit ${code}`)));
    poll = setInterval(() => {
      if (liveServers(plan.home).some((record) => record.pid === child.pid)) finish();
    }, 5);
  });
}

/** An authenticated connection to `record`'s server, or an error (refused, wrong token, not sessiond). */
export function openSocket(record: ServerRecord): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const host = record.host.includes(":") ? `[${record.host}]` : record.host;
    const socket = new WebSocket(`ws://${host}:${record.port}`, {
      headers: { Authorization: `Bearer ${record.token}` },
      perMessageDeflate: false,
      handshakeTimeout: ANSWER_MS,
      maxPayload: 0,
    });
    socket.once("open", () => {
      socket.removeAllListeners("error");
      resolve(socket);
    });
    socket.once("error", (error) => reject(error));
  });
}

/** One JSON-RPC message per text frame, as the server sends them. */
class SocketReader extends AbstractMessageReader implements MessageReader {
  private callback: DataCallback | undefined;
  private readonly early: Message[] = [];

  constructor(socket: WebSocket) {
    super();
    socket.on("message", (data) => {
      try {
        const message = JSON.parse(data.toString()) as Message;
        if (this.callback) this.callback(message);
        else this.early.push(message);
      } catch (error) {
        this.fireError(error);
      }
    });
    socket.on("error", (error) => this.fireError(error));
    socket.on("close", () => this.fireClose());
  }

  listen(callback: DataCallback): { dispose(): void } {
    this.callback = callback;
    for (const message of this.early.splice(0)) callback(message);
    return { dispose: () => (this.callback = undefined) };
  }
}

class SocketWriter extends AbstractMessageWriter implements MessageWriter {
  constructor(private readonly socket: WebSocket) {
    super();
  }

  write(message: Message): Promise<void> {
    return new Promise((resolve, reject) => {
      this.socket.send(JSON.stringify(message), (error) => {
        if (error) {
          this.fireError([error, message, undefined]);
          reject(error);
        } else resolve();
      });
    });
  }

  end(): void {}
}

export function socketTransport(socket: WebSocket): { reader: MessageReader; writer: MessageWriter } {
  return { reader: new SocketReader(socket), writer: new SocketWriter(socket) };
}

export { ANSWER_MS };
