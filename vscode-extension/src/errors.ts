// Server errors as sentences a user can act on, keyed by the protocol's `data.kind`.
import { ResponseError } from "vscode-jsonrpc";
import { ServerStartError } from "./client";
import { UPDATE_HINT } from "./install";
import type { ErrorKind } from "./protocol";

const ADVICE: Partial<Record<ErrorKind, string>> = {
  ThreadNotFound: "That thread no longer exists; it may have been deleted. Refresh the Threads view.",
  ThreadBusy: "The thread is open in another session. Close it there, or fork it to continue here.",
  ThreadArchived: "The thread is archived. Unarchive it first (show archived threads, then Unarchive).",
  InvalidId: "That is not a valid thread or session id.",
  StaleSession:
    "This session is no longer the thread's current one (it was cleared, or resumed elsewhere). Resume the thread again.",
  PayloadTooLarge: "The request was too large for the server.",
  Unauthorized: "The server refused the request (unauthorized).",
  Overloaded: "The server is busy. Try again in a moment.",
  ConflictingOperation: "Another operation is in the way.",
  StorageFull: "The disk holding sessiond's data is full.",
  StorageError: "sessiond could not read or write its data.",
  OutsideWorkspace: "That path is outside the thread's workspace, or not a regular file; sessiond will not touch it.",
  MethodNotFound: `This sessiond server does not support that yet. ${UPDATE_HINT}`,
  ServerNotInitialized: "The server is still starting. Try again in a moment.",
};

export function errorKind(error: unknown): string | undefined {
  if (!(error instanceof ResponseError)) return undefined;
  const data: unknown = error.data;
  if (data && typeof data === "object" && "kind" in data && typeof data.kind === "string") return data.kind;
  return undefined;
}

/** "Could not resume: The thread is archived. …" — the action, the advice, the server's words. */
export function describeError(action: string, error: unknown): string {
  if (error instanceof ServerStartError) return error.message;
  const kind = errorKind(error);
  const serverMessage = error instanceof Error ? error.message : String(error);
  const advice = kind ? ADVICE[kind as ErrorKind] : undefined;
  if (advice) return `Could not ${action}: ${advice} (${kind}: ${serverMessage})`;
  return `Could not ${action}: ${kind ? `${kind}: ` : ""}${serverMessage}`;
}

/** Who holds the thread, from a ThreadBusy error (`data.holder`), else undefined. */
export function busyHolder(error: unknown): string | undefined {
  if (errorKind(error) !== "ThreadBusy" || !(error instanceof ResponseError)) return undefined;
  const data = error.data as { holder?: unknown };
  return typeof data.holder === "string" ? data.holder : "another window";
}
