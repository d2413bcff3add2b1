// The connection to sessiond. `connect: "auto"`: the server already running for this data
// dir, over its WebSocket, else one `sessiond client --spawn` starts for every window to
// share (src/shared.ts); `"spawn"` (and the fallback when sharing fails): a
// `sessiond serve --stdio` of its own, JSON-RPC with Content-Length framing
// (vscode-jsonrpc). Either is started again when it dies. Knows nothing of the VS Code
// API, so integration tests drive it as it is.
import { spawn, type ChildProcess } from "node:child_process";
import {
  createMessageConnection,
  StreamMessageReader,
  StreamMessageWriter,
  type CancellationToken,
  type MessageConnection,
} from "vscode-jsonrpc/node";
import {
  PROTOCOL_VERSION,
  type DidChangeWorkspaceFoldersParams,
  type InitializeResult,
  type ParamsOf,
  type ProtocolServerNotifications,
  type RequestMethod,
  type ResultOf,
  type WorkspaceFolder,
} from "./protocol";

import { INSTALL_HINT } from "./install";
import { ANSWER_MS, type ConnectMode, liveServers, openSocket, PROOF_NAME, sharedServerPlan, socketTransport, spawnShared, type ServerRecord, type SharedServerPlan } from "./shared";
import * as path from "node:path";
import type WebSocket from "ws";

export { INSTALL_HINT };

/** The configured command could not be started at all, or exited before answering. */
export class ServerStartError extends Error {
  constructor(
    readonly command: readonly string[],
    readonly missing: boolean,
    detail: string,
  ) {
    super(
      missing
        ? `The sessiond server command \`${command.join(" ")}\` was not found. Install it with ${INSTALL_HINT}, or set "sessiond.serverCommand".`
        : `The sessiond server \`${command.join(" ")}\` did not start: ${detail}. Install or update it with ${INSTALL_HINT}, or check "sessiond.serverCommand".`,
    );
    this.name = "ServerStartError";
  }
}

export interface SessiondClientOptions {
  command: readonly string[];
  cwd?: string;
  env?: NodeJS.ProcessEnv;
  clientInfo: { name: string; version: string };
  /** Read at every (re)start, so a restarted server sees the folders open now. */
  workspaceFolders: () => WorkspaceFolder[];
  /** Restarts after an unexpected exit; after this many within a minute the client gives up. */
  maxRestarts?: number;
  restartDelayMs?: number;
  log?: (line: string) => void;
  /** "auto": share the data dir's running server (else start one to share); "spawn"
   * (the default here): a server of its own on stdio. */
  connect?: ConnectMode;
}

export type ServerState = "starting" | "running" | "restarting" | "stopped" | "failed";

type NotificationMethod = keyof ProtocolServerNotifications;
type NotificationListener<M extends NotificationMethod> = (params: ProtocolServerNotifications[M]) => void;

export class SessiondClient {
  private connection: MessageConnection | undefined;
  private child: ChildProcess | undefined;
  private socket: WebSocket | undefined;
  private shared: ServerRecord | undefined;
  private sharedTransport: "unix" | "tcp" | undefined;
  private running: Promise<InitializeResult> | undefined;
  private stopping = false;
  private recentRestarts: number[] = [];
  private readonly listeners = new Map<NotificationMethod, Set<(params: never) => void>>();
  private readonly stateListeners = new Set<(state: ServerState, error?: Error) => void>();
  private stderrTail = "";
  state: ServerState = "stopped";
  serverInfo: InitializeResult | undefined;

  constructor(private readonly options: SessiondClientOptions) {}

  /** Starts the server if it is not running; resolves once `initialize` has been answered. */
  start(): Promise<InitializeResult> {
    if (!this.running) {
      this.stopping = false;
      this.running = this.launch();
      this.running.catch(() => {
        this.running = undefined;
      });
    }
    return this.running;
  }

  /** `token`: cancelling it sends `$/cancelRequest` (a search the user typed past). */
  async request<M extends RequestMethod>(method: M, params: ParamsOf<M>, token?: CancellationToken): Promise<ResultOf<M>> {
    await this.start();
    const connection = this.connection;
    if (!connection) throw new Error("the sessiond server is not running");
    // A trailing `undefined` would be sent as a second positional param: pass only what is.
    if (params === null) return token ? connection.sendRequest<ResultOf<M>>(method, token) : connection.sendRequest<ResultOf<M>>(method);
    return token ? connection.sendRequest<ResultOf<M>>(method, params, token) : connection.sendRequest<ResultOf<M>>(method, params);
  }

  async changeWorkspaceFolders(change: DidChangeWorkspaceFoldersParams): Promise<void> {
    await this.start();
    await this.connection?.sendNotification("workspace/didChangeWorkspaceFolders", change);
  }

  onNotification<M extends NotificationMethod>(method: M, listener: NotificationListener<M>): { dispose(): void } {
    let set = this.listeners.get(method);
    if (!set) {
      set = new Set();
      this.listeners.set(method, set);
    }
    const entry = listener as (params: never) => void;
    set.add(entry);
    return { dispose: () => set.delete(entry) };
  }

  onStateChange(listener: (state: ServerState, error?: Error) => void): { dispose(): void } {
    this.stateListeners.add(listener);
    return { dispose: () => this.stateListeners.delete(listener) };
  }

  /** `shutdown` then `exit`, as the server expects; kills it if it does not go. */
  async stop(): Promise<void> {
    this.stopping = true;
    const { connection, child, socket } = this;
    if (connection && socket) {
      // A shared server stays for the other windows: only this connection ends.
      const closed = new Promise<void>((resolve) => socket.once("close", () => resolve()));
      try {
        await Promise.race([connection.sendRequest("shutdown"), delay(2000)]);
      } catch {
        // Gone already: closing below is all that is left to do.
      }
      socket.close();
      await Promise.race([closed, delay(3000)]);
    }
    if (connection && child && child.exitCode === null) {
      const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
      try {
        await Promise.race([connection.sendRequest("shutdown"), delay(2000)]);
        await connection.sendNotification("exit");
      } catch {
        // The server is already gone; killing below is all that is left to do.
      }
      const timer = setTimeout(() => child.kill("SIGKILL"), 3000);
      await exited;
      clearTimeout(timer);
    }
    this.dispose();
    this.setState("stopped");
  }

  /** The server's process id (its own child, or the shared server's), for tests and the output channel. */
  get pid(): number | undefined {
    return this.socket ? this.shared?.pid : this.child?.pid;
  }

  /** How this window reaches the shared server: its Unix socket, or its loopback port. */
  get transport(): "unix" | "tcp" | undefined {
    return this.socket ? this.sharedTransport : undefined;
  }

  /** Whether this window talks to a server shared with others (over its WebSocket). */
  get isShared(): boolean {
    return this.socket !== undefined;
  }

  private async launch(): Promise<InitializeResult> {
    if ((this.options.connect ?? "spawn") === "auto") {
      const plan = sharedServerPlan(this.options.command, this.options.env ?? process.env);
      if (plan) {
        try {
          return await this.launchShared(plan);
        } catch (error) {
          this.options.log?.(`sessiond: no shared server (${error instanceof Error ? error.message : String(error)}); starting one for this window`);
        }
      }
    }
    return this.launchStdio();
  }

  /** Connect to the data dir's server, else have `sessiond client --spawn` start one, then connect. */
  private async launchShared(plan: SharedServerPlan): Promise<InitializeResult> {
    this.setState(this.state === "restarting" ? "restarting" : "starting");
    const directory = path.join(plan.home, "servers");
    const attached = (await this.attachFirst(liveServers(plan.home), directory)) ?? (await spawnShared(plan, this.options.cwd, this.options.env ?? process.env).then(() => this.attachFirst(liveServers(plan.home), directory)));
    if (!attached) throw new Error(`no sessiond in ${plan.home} answered`);
    const { connection, socket, record, result } = attached;
    this.connection = connection;
    this.socket = socket;
    this.shared = record;
    this.serverInfo = result;
    socket.once("close", () => this.onUnexpectedClose(socket));
    this.options.log?.(`sessiond: connected to the shared server (pid ${record.pid}, port ${record.port})`);
    this.setState("running");
    return result;
  }

  /** The first record whose server proves it holds its token and answers `initialize`;
   * one that gives no proof (an older sessiond) is skipped: its token would have to be sent. */
  private async attachFirst(records: ServerRecord[], directory: string): Promise<{ connection: MessageConnection; socket: WebSocket; record: ServerRecord; result: InitializeResult } | undefined> {
    for (const record of records) {
      if (record.proof !== PROOF_NAME) {
        this.options.log?.(`sessiond: not using the server on port ${record.port}: it gives no proof of its token (an older sessiond)`);
        continue;
      }
      let socket: WebSocket | undefined;
      try {
        const opened = await openSocket(record, directory);
        socket = opened.socket;
        this.sharedTransport = opened.transport;
        const { reader, writer } = socketTransport(socket);
        const connection = createMessageConnection(reader, writer);
        this.forwardNotifications(connection);
        connection.listen();
        const result = await Promise.race([
          connection.sendRequest<InitializeResult>("initialize", {
            protocolVersion: PROTOCOL_VERSION,
            clientInfo: this.options.clientInfo,
            workspaceFolders: this.options.workspaceFolders(),
          }),
          delay(ANSWER_MS).then(() => Promise.reject(new Error("no answer to initialize"))),
        ]);
        await connection.sendNotification("initialized", {});
        return { connection, socket, record, result };
      } catch (error) {
        this.options.log?.(`sessiond: not using the server on port ${record.port}: ${error instanceof Error ? error.message : String(error)}`);
        socket?.terminate();
      }
    }
    return undefined;
  }

  private forwardNotifications(connection: MessageConnection): void {
    for (const method of ["thread/started", "thread/updated", "item/recorded", "$/progress"] as const) {
      connection.onNotification(method, (params: unknown) => {
        for (const listener of this.listeners.get(method) ?? []) listener(params as never);
      });
    }
  }

  private async launchStdio(): Promise<InitializeResult> {
    const [program, ...args] = this.options.command;
    if (!program) throw new ServerStartError(this.options.command, true, "empty command");
    this.setState(this.state === "restarting" ? "restarting" : "starting");
    this.stderrTail = "";
    const child = spawn(program, args, {
      cwd: this.options.cwd,
      env: this.options.env ?? process.env,
      stdio: ["pipe", "pipe", "pipe"],
    });
    this.child = child;
    child.stderr?.on("data", (chunk: Buffer) => {
      this.stderrTail = (this.stderrTail + chunk.toString("utf8")).slice(-2000);
      this.options.log?.(chunk.toString("utf8").trimEnd());
    });
    const failedToStart = new Promise<never>((_, reject) => {
      child.once("error", (error: NodeJS.ErrnoException) => {
        reject(new ServerStartError(this.options.command, error.code === "ENOENT", error.message));
      });
      child.once("exit", (code, signal) => {
        const why = this.stderrTail.trim().split("\n").pop() || `exit ${code ?? signal}`;
        reject(new ServerStartError(this.options.command, false, why));
      });
    });
    failedToStart.catch(() => undefined);
    // A server that dies mid-write must not take the extension host down with EPIPE.
    child.stdin?.on("error", (error) => this.options.log?.(`sessiond stdin: ${error.message}`));
    try {
      // Nothing is written until the process exists: writing to a never-spawned child's stdin
      // is an error vscode-jsonrpc cannot hand back to us.
      await Promise.race([new Promise((resolve) => child.once("spawn", resolve)), failedToStart]);
      if (!child.stdout || !child.stdin) throw new ServerStartError(this.options.command, false, "no pipes");
      const connection = createMessageConnection(
        new StreamMessageReader(child.stdout),
        new StreamMessageWriter(child.stdin),
      );
      this.forwardNotifications(connection);
      connection.listen();
      this.connection = connection;
      const result = await Promise.race([
        connection.sendRequest<InitializeResult>("initialize", {
          protocolVersion: PROTOCOL_VERSION,
          clientInfo: this.options.clientInfo,
          workspaceFolders: this.options.workspaceFolders(),
        }),
        failedToStart,
      ]);
      await connection.sendNotification("initialized", {});
      this.serverInfo = result;
      child.once("exit", (code, signal) => this.onUnexpectedExit(child, code, signal));
      this.setState("running");
      return result;
    } catch (error) {
      this.dispose();
      child.kill("SIGKILL");
      const failure = error instanceof Error ? error : new Error(String(error));
      this.setState("failed", failure);
      throw failure;
    }
  }

  private onUnexpectedExit(child: ChildProcess, code: number | null, signal: NodeJS.Signals | null): void {
    if (this.stopping || child !== this.child) return;
    this.options.log?.(`sessiond exited (${code ?? signal}); restarting`);
    this.restartAfterLoss();
  }

  /** The shared server went away (killed, or replaced): connect again, or start one. */
  private onUnexpectedClose(socket: WebSocket): void {
    if (this.stopping || socket !== this.socket) return;
    this.options.log?.(`the shared sessiond (pid ${this.shared?.pid}) closed the connection; connecting again`);
    this.restartAfterLoss();
  }

  private restartAfterLoss(): void {
    this.dispose();
    this.running = undefined;
    const now = Date.now();
    this.recentRestarts = this.recentRestarts.filter((at) => now - at < 60_000);
    if (this.recentRestarts.length >= (this.options.maxRestarts ?? 5)) {
      const error = new Error(`sessiond exited ${this.recentRestarts.length + 1} times within a minute; not restarting it`);
      this.setState("failed", error);
      return;
    }
    this.recentRestarts.push(now);
    this.setState("restarting");
    setTimeout(() => {
      if (!this.stopping) this.start().catch(() => undefined);
    }, this.options.restartDelayMs ?? 500);
  }

  private dispose(): void {
    this.connection?.dispose();
    this.connection = undefined;
    this.socket?.terminate();
    this.socket = undefined;
    this.running = undefined;
  }

  private setState(state: ServerState, error?: Error): void {
    this.state = state;
    for (const listener of this.stateListeners) listener(state, error);
  }
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
