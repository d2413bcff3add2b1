// One sessiond for every window: find the server already running for this user and data
// dir (its discovery file `servers/<port>.json`, 0600, holds its socket, port and token),
// connect to it over its Unix socket in that private directory (else its loopback port),
// else start `sessiond serve --ws 0 --linger 30 --shared` detached: that server takes the
// spawn lock (a flock, in the data dir) and leaves at once if another already answers, so
// two windows opening at once end with one server.
// The token is never sent: the window proves it holds it (an HMAC of a fresh nonce) and
// the server must prove it too before a frame goes out (server/transport/proof.py), so a
// stranger on a dead server's port learns nothing. A record whose pid or port is another
// user's is stale. The token never reaches a command line either.
// `ws` instead of a global WebSocket: the Node in VS Code 1.85 has none, and a browser-style
// WebSocket cannot send headers or reach a Unix socket.
import { spawn } from "node:child_process";
import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import { closeSync, existsSync, lstatSync, mkdirSync, openSync, readdirSync, readFileSync, statSync } from "node:fs";
import { endianness, homedir } from "node:os";
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
  /** Its Unix socket's name in `servers/` (the door windows use). */
  socket?: string;
  /** The proof of its token it gives in the handshake: a record without one is not used. */
  proof?: string;
}

/** What a server that proves it holds its token writes in its record. */
export const PROOF_NAME = "hmac-sha256";

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

/** A live process of this user: another user's (EPERM; or, as root, its `/proc/<pid>`'s
 * owner) is a stranger that may have been given a dead server's pid. */
export function pidOurs(pid: unknown): boolean {
  if (typeof pid !== "number" || !Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
  } catch {
    return false; // gone (ESRCH), or another user's (EPERM)
  }
  const uid = process.getuid?.();
  if (uid === undefined) return true;
  try {
    return statSync(`/proc/${pid}`).uid === uid;
  } catch {
    return !existsSync("/proc/self"); // no /proc here: kill(0) had the last word
  }
}

/** `servers/` when it is a real directory of this user's; undefined when it is missing or
 * anything else (a link: reading through it would trust someone else's records, and the
 * server refuses it, naming the mend). */
function serversDirectory(home: string): string | undefined {
  const directory = path.join(home, "servers");
  try {
    const found = lstatSync(directory);
    const uid = process.getuid?.();
    return found.isDirectory() && (uid === undefined || found.uid === uid) ? directory : undefined;
  } catch {
    return undefined;
  }
}

/** The records of servers whose process is alive and ours, newest first (a dead one's file
 * is left for `sessiond client` to remove: it checks the port too). */
export function liveServers(home: string): ServerRecord[] {
  const directory = serversDirectory(home);
  if (!directory) return [];
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
      if (typeof record.port === "number" && typeof record.token === "string" && pidOurs(record.pid)) {
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
  if (!serversDirectory(plan.home)) {
    return Promise.reject(new Error(`${directory} is not a directory of your own (a link?): sessiond will not use it; remove it and restart`));
  }
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

/** HMAC-SHA256 of the nonce under the token, as `role` gives it (server/transport/proof.py). */
export function proofOf(token: string, role: "client" | "server", nonce: string): string {
  return createHmac("sha256", token).update(`sessiond ${role} proof\n${nonce}`).digest("hex");
}

/** Not the server the record describes: another user's, or it cannot prove its token. */
export class NotOurServer extends Error {}

/** Where a connection failed before any handshake: the next door may still answer. */
class Unreachable extends Error {}

/**
 * The uid owning a TCP socket listening on `port` (any address), from the kernel's table
 * (Linux `/proc/net/tcp`, `/proc/net/tcp6`): another user's, if any listens there, else ours;
 * undefined where the table is not readable (then the proof alone decides).
 */
export function listenerOwner(port: number): number | undefined {
  const uid = process.getuid?.();
  const wanted = port.toString(16).toUpperCase().padStart(4, "0");
  let found: number | undefined;
  for (const table of ["/proc/net/tcp", "/proc/net/tcp6"]) {
    let text: string;
    try {
      text = readFileSync(table, "utf8");
    } catch {
      continue;
    }
    for (const line of text.split("\n").slice(1)) {
      const fields = line.trim().split(/\s+/);
      if (fields.length < 8 || fields[3] !== "0A" || fields[1]?.split(":")[1] !== wanted) continue;
      const owner = Number(fields[7]);
      if (owner !== uid) return owner;
      found = owner;
    }
  }
  return found;
}

/**
 * A proven connection to `record`'s server: over its Unix socket in `directory` when it
 * names one (else, or if that does not answer, its loopback port), the window's proof
 * offered and the server's checked before the socket is handed back, so nothing is sent
 * to anything that cannot prove it holds the token. Rejects with NotOurServer (another
 * user's port, no or a wrong proof) or the connection's error.
 */
export async function openSocket(record: ServerRecord, directory?: string): Promise<{ socket: WebSocket; transport: "unix" | "tcp" }> {
  const name = record.socket;
  if (directory && typeof name === "string" && /^[^/\0]+\.sock$/.test(name) && !name.startsWith(".")) {
    const file = path.join(directory, name);
    let ours = false;
    try {
      const found = lstatSync(file);
      ours = found.isSocket() && found.uid === (process.getuid?.() ?? found.uid);
    } catch {
      ours = false;
    }
    if (ours) {
      // Through an open descriptor of the directory: no `:` (ws splits the URL there) and
      // no 108-byte limit, whatever the data dir's path.
      let fd: number | undefined;
      try {
        fd = existsSync("/proc/self/fd") ? openSync(directory, "r") : undefined;
      } catch {
        fd = undefined;
      }
      const address = fd !== undefined ? `/proc/self/fd/${fd}/${name}` : file;
      try {
        return { socket: await handshake(`ws+unix:${address}:/`, record.token), transport: "unix" };
      } catch (error) {
        if (!(error instanceof Unreachable)) throw error;
      } finally {
        if (fd !== undefined) closeSync(fd);
      }
    }
  }
  const owner = listenerOwner(record.port);
  const uid = process.getuid?.();
  if (owner !== undefined && uid !== undefined && owner !== uid) {
    throw new NotOurServer(`port ${record.port} is another user's (uid ${owner})`);
  }
  const host = record.host.includes(":") ? `[${record.host}]` : record.host;
  return { socket: await handshake(`ws://${host}:${record.port}`, record.token), transport: "tcp" };
}

function handshake(url: string, token: string): Promise<WebSocket> {
  const nonce = randomBytes(32).toString("base64url");
  return new Promise((resolve, reject) => {
    let proven = false;
    let upgraded = false;
    const socket = new WebSocket(url, {
      headers: { "Sessiond-Nonce": nonce, Authorization: `Sessiond-Proof ${proofOf(token, "client", nonce)}` },
      perMessageDeflate: false,
      handshakeTimeout: ANSWER_MS,
      maxPayload: 0,
    });
    socket.once("upgrade", (response) => {
      upgraded = true;
      const offered = response.headers["sessiond-proof"];
      const expected = Buffer.from(proofOf(token, "server", nonce));
      proven = typeof offered === "string" && offered.length === expected.length && timingSafeEqual(Buffer.from(offered), expected);
      if (!proven) {
        socket.terminate(); // before `open`: not a frame has been sent
        reject(new NotOurServer("it cannot prove it holds the token of the server it replaced"));
      }
    });
    socket.once("open", () => {
      socket.removeAllListeners("error");
      if (proven) resolve(socket);
    });
    socket.once("error", (error) => {
      if (proven) return;
      const code = (error as NodeJS.ErrnoException).code;
      reject(!upgraded && code !== undefined ? new Unreachable(error.message) : error);
    });
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
