// What a transcript shows, from the items of the part of a thread that is loaded: messages,
// tool calls (one block per operation, whatever its states), file edits, todos as they
// changed, turn ends with their cost, boundaries and sessions. Pure: no VS Code, no DOM, so
// the rules are unit-tested, and the panel only moves what they give to the webview.
import { driftLines } from "../format";
import type { DriftEntry } from "../protocol";

export type Item = Record<string, unknown>;

export type Role = "user" | "assistant" | "system" | "tool";
export type TodoStatus = "pending" | "in_progress" | "completed";
export type TodoChange = "added" | "status";

export interface TurnCost {
  usd: number;
  inputTokens: number;
  outputTokens: number;
  /** False when a model's price was unknown: `usd` counts only the priced calls. */
  priced: boolean;
}

interface EntryBase {
  /** Stable across pages: the webview finds the entry's element by it. */
  key: string;
  /** Where the entry stands: the seq of the item it starts at. */
  seq: number;
  /** A later rewind went back past it: shown, marked undone. */
  undone?: boolean;
}

export interface MessageEntry extends EntryBase {
  kind: "message";
  role: Role;
  text: string;
  sidechain: boolean;
  /** The agent's reasoning as it went, not its answer: shown folded. */
  thought: boolean;
}

export interface ToolEntry extends EntryBase {
  kind: "tool";
  operationId: string;
  tool: string;
  title: string | undefined;
  /** A command line, when the call recorded one (`arguments.command`, `command`). */
  command: string | undefined;
  /** The call's other arguments, when recorded (harnesses may; imports record a digest). */
  args: unknown;
  argsDigest: string | undefined;
  /** Every state recorded, in order: planned, started, committed | failed. */
  states: string[];
  failed: boolean;
  result: unknown;
  /** The restore's recovery class when the operation is pending (needs review, ...). */
  recovery: string | undefined;
  /** A shell command's exit code, when recorded. */
  exitCode: number | undefined;
  /** The sub-agent the call ran: its own thread, shown nested in the call. */
  child: ChildThread | undefined;
}

/** A sub-agent's thread, as its parent's transcript names it. */
export interface ChildThread {
  threadId: string;
  title: string | undefined;
  itemCount: number | undefined;
  costUsd: number | undefined;
}

/** A sub-agent whose starting call is not known (or not recorded): shown on its own. */
export interface ChildEntry extends EntryBase {
  kind: "child";
  child: ChildThread;
}

export interface EditEntry extends EntryBase {
  kind: "edit";
  path: string;
  beforeSha: string | null;
  afterSha: string | null;
  author: string;
  operationId: string | undefined;
  /** False: recorded from a diff, without the file's contents (no shas at all). */
  contentKnown: boolean;
  /** Asked for: the store holds only the hashes (thread/readBlob said `recorded: false`). */
  notRecorded: boolean;
}

export interface TodoLine {
  id: string;
  content: string;
  status: TodoStatus;
  change: TodoChange | undefined;
}

export interface TodosEntry extends EntryBase {
  kind: "todos";
  todos: TodoLine[];
  /** Entries of the list before that are gone from this one. */
  removed: string[];
  /** The list before this one is not loaded: changes cannot be told. */
  changesUnknown: boolean;
}

export interface TurnEntry extends EntryBase {
  kind: "turn";
  turnId: string;
  phase: "completed" | "interrupted" | undefined;
  continueReason: string | undefined;
  cost: TurnCost | undefined;
}

export interface BoundaryEntry extends EntryBase {
  kind: "boundary";
  boundary: "compact" | "clear" | "rewind";
  summary: string | undefined;
  toTurnId: string | undefined;
  /** A rewind: the seq of the last item it kept. */
  toSeq: number | undefined;
}

export interface SessionEntry extends EntryBase {
  kind: "session";
  source: string;
  reason: string;
  branch: string | undefined;
  cwd: string | undefined;
  /** The thread's first session. */
  first: boolean;
}

export interface NoteEntry extends EntryBase {
  kind: "note";
  text: string;
  warn: boolean;
}

export type Entry = MessageEntry | ToolEntry | EditEntry | TodosEntry | TurnEntry | BoundaryEntry | SessionEntry | NoteEntry | ChildEntry;

/** The sub-agent threads of a thread (`thread/list {parentThreadId}`), by what names them. */
export interface Children {
  /** By the parent's operation that started each (`parentOperationId`). */
  byOperation: ReadonlyMap<string, ChildThread>;
  /** By their own thread id (a call's `childThreadId`). */
  byThread: ReadonlyMap<string, ChildThread>;
  /** Children no recorded call names (shown after the thread's last item). */
  unanchored: readonly ChildThread[];
}

export const NO_CHILDREN: Children = { byOperation: new Map(), byThread: new Map(), unanchored: [] };

/** What the entries depend on besides the items. */
export interface EntryContext {
  /** The thread's first item is loaded: the first todos list is all new. */
  atStart: boolean;
  /** Pending operations from the restore report: operationId → recovery class. */
  recovery: ReadonlyMap<string, string>;
  /** Edits whose contents the store turned out not to hold (by entry key). */
  notRecorded: ReadonlySet<string>;
  /** The thread's sub-agents, when it has any. */
  children?: Children | undefined;
  /** The thread's last item is loaded: sub-agents no call names are shown after it. */
  atEnd?: boolean | undefined;
}

const ROLES = new Set<string>(["user", "assistant", "system", "tool"]);
const STATUSES = new Set<string>(["pending", "in_progress", "completed"]);

const text = (value: unknown): string | undefined => (typeof value === "string" && value !== "" ? value : undefined);
const num = (value: unknown): number => (typeof value === "number" && Number.isFinite(value) ? value : 0);
const record = (value: unknown): Record<string, unknown> | undefined =>
  value !== null && typeof value === "object" && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;

/** A message's content as text: a string, or the text of its parts (others named). */
export function messageText(content: unknown): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content
    .map((part: unknown) => {
      const entry = record(part) ?? {};
      return typeof entry["text"] === "string" ? entry["text"] : `[${String(entry["type"] ?? "part")}]`;
    })
    .join("\n");
}

/** `arguments.command` (a string or an argv), else a top-level `command`. */
function commandOf(item: Item): string | undefined {
  const args = record(item["arguments"]) ?? record(item["args"]) ?? record(item["input"]);
  const command = args?.["command"] ?? args?.["cmd"] ?? item["command"];
  if (typeof command === "string") return command;
  if (Array.isArray(command) && command.every((part) => typeof part === "string")) return command.join(" ");
  return undefined;
}

function argsOf(item: Item): unknown {
  return item["arguments"] ?? item["args"] ?? item["input"];
}

function keyOf(item: Item, prefix: string): string {
  return `${prefix}:${text(item["id"]) ?? `seq-${num(item["seq"])}`}`;
}

function todoLines(raw: unknown): TodoLine[] {
  if (!Array.isArray(raw)) return [];
  return raw.flatMap((value, index) => {
    const todo = record(value);
    if (!todo || typeof todo["content"] !== "string") return [];
    const status = STATUSES.has(todo["status"] as string) ? (todo["status"] as TodoStatus) : "pending";
    return [{ id: String(todo["id"] ?? index), content: todo["content"], status, change: undefined }];
  });
}

interface TurnState {
  lastSeq: number;
  endSeq: number | undefined;
  phase: TurnEntry["phase"];
  continueReason: string | undefined;
  cost: TurnCost | undefined;
}

/**
 * The entries of `items` (ascending seq), in the order they are shown. A tool call is one
 * entry at its first state, holding every later one; a turn's end (its `turn` item, else its
 * last item: an imported thread records no turn items) carries the cost its model calls
 * recorded.
 */
export function entriesOf(items: readonly Item[], context: EntryContext): Entry[] {
  const entries: { entry: Entry; order: number }[] = [];
  const tools = new Map<string, ToolEntry>();
  const turns = new Map<string, TurnState>();
  let currentTurn: string | undefined;
  let previousTodos: TodoLine[] | undefined = context.atStart ? [] : undefined;
  const add = (entry: Entry, order = 0) => entries.push({ entry, order });
  const turnState = (turnId: string): TurnState => {
    let state = turns.get(turnId);
    if (!state) {
      state = { lastSeq: 0, endSeq: undefined, phase: undefined, continueReason: undefined, cost: undefined };
      turns.set(turnId, state);
    }
    return state;
  };

  for (const item of items) {
    const seq = num(item["seq"]);
    const type = item["type"];
    const turnId = text(item["turnId"]);
    if (turnId !== undefined && type !== "cost") {
      currentTurn = turnId;
      turnState(turnId).lastSeq = seq;
    }
    switch (type) {
      case "message": {
        const role = ROLES.has(item["role"] as string) ? (item["role"] as Role) : "assistant";
        add({ kind: "message", key: keyOf(item, "m"), seq, role, text: messageText(item["content"]), sidechain: item["sidechain"] === true, thought: item["thought"] === true });
        break;
      }
      case "operation": {
        const operationId = text(item["operationId"]) ?? keyOf(item, "op");
        let tool = tools.get(operationId);
        if (!tool) {
          tool = {
            kind: "tool",
            key: `op:${operationId}`,
            seq,
            operationId,
            tool: text(item["tool"]) ?? "tool",
            title: undefined,
            command: undefined,
            args: undefined,
            argsDigest: undefined,
            states: [],
            failed: false,
            result: undefined,
            recovery: context.recovery.get(operationId),
            exitCode: undefined,
            child: context.children?.byOperation.get(operationId),
          };
          tools.set(operationId, tool);
          add(tool);
        }
        const state = text(item["state"]) ?? "started";
        tool.states.push(state);
        tool.failed = state === "failed";
        tool.title ??= text(item["title"]);
        tool.command ??= commandOf(item);
        tool.args ??= argsOf(item);
        tool.argsDigest ??= text(item["argsDigest"]);
        if (typeof item["exitCode"] === "number") tool.exitCode = item["exitCode"];
        const childThreadId = text(item["childThreadId"]);
        if (childThreadId && !tool.child) {
          tool.child = context.children?.byThread.get(childThreadId) ?? { threadId: childThreadId, title: undefined, itemCount: undefined, costUsd: undefined };
        }
        if (item["result"] !== undefined && item["result"] !== null) tool.result = item["result"];
        break;
      }
      case "file_edit":
        add({
          kind: "edit",
          key: keyOf(item, "edit"),
          seq,
          path: text(item["path"]) ?? "(unnamed file)",
          beforeSha: text(item["beforeSha"]) ?? null,
          afterSha: text(item["afterSha"]) ?? null,
          author: text(item["author"]) ?? "agent",
          operationId: text(item["operationId"]),
          contentKnown: item["contentKnown"] !== false,
          notRecorded: context.notRecorded.has(keyOf(item, "edit")),
        });
        break;
      case "todos": {
        const todos = todoLines(item["items"]);
        let removed: string[] = [];
        if (previousTodos) {
          const before = new Map(previousTodos.map((todo) => [todo.id, todo]));
          for (const todo of todos) {
            const was = before.get(todo.id);
            todo.change = was === undefined ? "added" : was.status !== todo.status ? "status" : undefined;
          }
          const now = new Set(todos.map((todo) => todo.id));
          removed = previousTodos.filter((todo) => !now.has(todo.id)).map((todo) => todo.content);
        }
        add({ kind: "todos", key: keyOf(item, "todos"), seq, todos, removed, changesUnknown: previousTodos === undefined });
        previousTodos = todos;
        break;
      }
      case "cost": {
        const owner = turnId ?? currentTurn;
        const cost = { usd: num(item["usd"]), inputTokens: num(item["inputTokens"]), outputTokens: num(item["outputTokens"]), priced: item["priced"] !== false };
        if (owner === undefined) {
          add({ kind: "turn", key: keyOf(item, "cost"), seq, turnId: "", phase: undefined, continueReason: undefined, cost });
          break;
        }
        const state = turnState(owner);
        state.lastSeq = Math.max(state.lastSeq, seq);
        state.cost = state.cost
          ? {
              usd: state.cost.usd + cost.usd,
              inputTokens: state.cost.inputTokens + cost.inputTokens,
              outputTokens: state.cost.outputTokens + cost.outputTokens,
              priced: state.cost.priced && cost.priced,
            }
          : cost;
        break;
      }
      case "turn": {
        const phase = item["phase"];
        if (turnId !== undefined && (phase === "completed" || phase === "interrupted")) {
          const state = turnState(turnId);
          state.endSeq = seq;
          state.phase = phase;
          state.continueReason = text(item["continueReason"]);
        }
        break;
      }
      case "compact_boundary":
        add({ kind: "boundary", key: keyOf(item, "b"), seq, boundary: "compact", summary: text(item["summary"]), toTurnId: undefined, toSeq: undefined });
        break;
      case "clear_boundary":
        add({ kind: "boundary", key: keyOf(item, "b"), seq, boundary: "clear", summary: undefined, toTurnId: undefined, toSeq: undefined });
        break;
      case "rewind_boundary":
        add({ kind: "boundary", key: keyOf(item, "b"), seq, boundary: "rewind", summary: undefined, toTurnId: text(item["toTurnId"]), toSeq: num(item["toSeq"]) });
        break;
      case "session_meta": {
        const source = text(item["source"]) ?? "startup";
        // A clear's new session follows its boundary, which says it; a compact keeps its session.
        if (source === "clear") break;
        add({
          kind: "session",
          key: keyOf(item, "s"),
          seq,
          source,
          reason: text(item["reason"]) ?? "user",
          branch: text(item["branch"]),
          cwd: text(item["cwd"]),
          first: seq === 1,
        });
        break;
      }
      default: {
        const note = noteOf(item);
        if (note) add({ kind: "note", key: keyOf(item, "n"), seq, ...note });
      }
    }
  }

  for (const [turnId, state] of turns) {
    // A turn without its end recorded or any cost (a plain conversation) needs no divider.
    if (state.endSeq === undefined && !state.cost) continue;
    const seq = state.endSeq ?? state.lastSeq;
    add({ kind: "turn", key: `turn:${turnId}`, seq, turnId, phase: state.phase, continueReason: state.continueReason, cost: state.cost }, 1);
  }
  if (context.atEnd && context.children) {
    const last = entries.reduce((max, { entry }) => Math.max(max, entry.seq), 0);
    const shown = new Set(entries.flatMap(({ entry }) => (entry.kind === "tool" && entry.child ? [entry.child.threadId] : [])));
    for (const child of context.children.unanchored) {
      if (!shown.has(child.threadId)) add({ kind: "child", key: `child:${child.threadId}`, seq: last, child }, 2);
    }
  }
  const sorted = entries.sort((a, b) => a.entry.seq - b.entry.seq || a.order - b.order).map(({ entry }) => entry);
  // What a rewind went back past stays readable, marked: the history is not rewritten.
  for (const rewind of sorted) {
    if (rewind.kind !== "boundary" || rewind.boundary !== "rewind" || rewind.toSeq === undefined) continue;
    for (const entry of sorted) if (entry.seq > rewind.toSeq && entry.seq < rewind.seq) entry.undone = true;
  }
  return sorted;
}

/** The one-line entries: settings that changed, checks, renames, decisions, failed hooks. */
function noteOf(item: Item): { text: string; warn: boolean } | undefined {
  switch (item["type"]) {
    case "model_override":
      return { text: `Model: ${String(item["model"])}`, warn: false };
    case "permissions": {
      const parts = [`approval ${String(item["approvalMode"])}`, ...(text(item["sandbox"]) ? [`sandbox ${String(item["sandbox"])}`] : [])];
      return { text: `Permissions: ${parts.join(", ")}`, warn: false };
    }
    case "verifier": {
      const head = text(item["headSha"]);
      const passed = num(item["passed"]);
      const total = num(item["total"]);
      return { text: `${String(item["name"])}: ${passed}/${total} passed${head ? ` at ${head.slice(0, 10)}` : ""}`, warn: passed < total };
    }
    case "thread_title":
      return { text: `Renamed “${String(item["title"])}”`, warn: false };
    case "drift_accepted": {
      const drift = Array.isArray(item["drift"]) ? (item["drift"] as DriftEntry[]) : [];
      return { text: `Continued in a changed workspace: ${driftLines(drift).join("; ")}`, warn: true };
    }
    case "permission_decision": {
      const what = text(item["title"]) ?? "a tool call";
      if (item["outcome"] === "cancelled") return { text: `Permission request cancelled: ${what}`, warn: false };
      return { text: `${item["allowed"] === true ? "Allowed" : "Rejected"}: ${what}`, warn: item["allowed"] !== true };
    }
    case "lifecycle": {
      const status = item["status"];
      if (status !== "failed" && status !== "timed_out") return undefined;
      const why = text(item["error"]) ?? (status === "timed_out" ? "timed out" : `exit code ${String(item["exitCode"])}`);
      return { text: `${String(item["event"])} hook ${String(item["hook"] ?? "")} ${status === "timed_out" ? "timed out" : "failed"}: ${why}`, warn: true };
    }
    default:
      return undefined;
  }
}

/** What the webview must do to go from the entries it shows to new ones. */
export interface EntriesChange<E> {
  /** Entries to put before the first one shown, in order. */
  front: E[];
  /** Entries to put after the last one shown, in order. */
  back: E[];
  /** Entries shown whose content changed, in place. */
  updates: E[];
  /** Keys of entries to take out (gone, or moved to the front or back). */
  removes: string[];
  /** Set when the change is not one of those: show exactly these instead. */
  reset: E[] | undefined;
}

/**
 * The change from `shown` (keys in order, with the seq and signature each had) to `next`.
 * Pages arrive at either end, so new entries go to the front or the back; a tool call
 * whose earlier state just arrived moves to the front, a turn end to the back. Anything
 * else (which paging never makes) is a reset, so the view can never show a wrong order.
 */
export function changeBetween<E extends { key: string; seq: number }>(
  shown: readonly { key: string; seq: number; signature: string }[],
  next: readonly E[],
  signature: (entry: E) => string,
): EntriesChange<E> {
  const before = new Map(shown.map((entry) => [entry.key, entry]));
  const stays = (entry: E) => before.get(entry.key)?.seq === entry.seq;
  const kept = next.filter(stays);
  const keptKeys = new Set(kept.map((entry) => entry.key));
  const order = shown.filter((entry) => keptKeys.has(entry.key)).map((entry) => entry.key);
  const reset = { front: [], back: [], updates: [], removes: [], reset: [...next] };
  if (order.some((key, index) => kept[index]!.key !== key)) return reset;
  if (kept.length === 0) return shown.length === 0 ? { ...reset, reset: undefined, back: [...next] } : reset;
  const first = next.indexOf(kept[0]!);
  const last = next.indexOf(kept.at(-1)!);
  if (next.slice(first, last + 1).some((entry) => !stays(entry))) return reset;
  return {
    front: next.slice(0, first),
    back: next.slice(last + 1),
    updates: kept.filter((entry) => before.get(entry.key)!.signature !== signature(entry)),
    removes: shown.filter((entry) => !keptKeys.has(entry.key)).map((entry) => entry.key),
    reset: undefined,
  };
}
