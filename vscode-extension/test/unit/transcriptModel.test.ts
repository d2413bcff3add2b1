// What the transcript makes of a thread's items, and how a page becomes a small change to
// what the webview shows: the rules a person relies on when reading what the agent did.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { changeBetween, entriesOf, type Entry, type EntryContext, type Item } from "../../src/transcript/model";
import { TranscriptWindow } from "../../src/transcript/window";

const context: EntryContext = { atStart: true, recovery: new Map(), notRecorded: new Set() };
let seq = 0;
const item = (fields: Item): Item => ({ seq: ++seq, id: `i${seq}`, ...fields });
const kinds = (entries: Entry[]) => entries.map((entry) => `${entry.kind}@${entry.seq}`);

describe("transcript entries", () => {
  it("show a tool call once, at its start, with its command, outcome and result; a failed one is marked", () => {
    seq = 0;
    const items = [
      item({ type: "message", role: "user", content: "run the tests", turnId: "t1" }),
      item({ type: "operation", operationId: "op1", tool: "bash", effect: "side_effect", state: "started", arguments: { command: "npm test" }, turnId: "t1" }),
      item({ type: "message", role: "assistant", content: "running", turnId: "t1" }),
      item({ type: "operation", operationId: "op1", tool: "bash", effect: "side_effect", state: "failed", result: "2 failing", turnId: "t1" }),
    ];
    const entries = entriesOf(items, context);
    assert.deepEqual(kinds(entries), ["message@1", "tool@2", "message@3"], "the turn goes on: no end yet");
    const tool = entries[1]!;
    assert.equal(tool.kind, "tool");
    if (tool.kind !== "tool") return;
    assert.deepEqual([tool.command, tool.states, tool.failed, tool.result], ["npm test", ["started", "failed"], true, "2 failing"]);
  });

  it("put each turn's end after its last item, with the cost its model calls recorded", () => {
    seq = 0;
    const items = [
      item({ type: "turn", turnId: "t1", phase: "started" }),
      item({ type: "message", role: "user", content: "a", turnId: "t1" }),
      item({ type: "cost", model: "m", inputTokens: 1000, outputTokens: 10, usd: 0.01, turnId: "t1" }),
      item({ type: "cost", model: "m", inputTokens: 500, outputTokens: 5, usd: 0.02 }), // no turnId: the turn it falls in
      item({ type: "turn", turnId: "t1", phase: "completed" }),
      item({ type: "message", role: "user", content: "b", turnId: "t2" }),
      item({ type: "message", role: "user", content: "c", turnId: "t3" }),
      item({ type: "turn", turnId: "t3", phase: "interrupted" }),
      item({ type: "message", role: "assistant", content: "d", turnId: "t4" }),
      item({ type: "cost", model: "m", inputTokens: 10, outputTokens: 1, usd: 0, priced: false, turnId: "t4" }),
      item({ type: "message", role: "assistant", content: "e", turnId: "t4" }),
    ];
    const turns = entriesOf(items, context).filter((entry) => entry.kind === "turn");
    assert.deepEqual(
      turns.map((entry) => entry.kind === "turn" && [entry.turnId, entry.seq, entry.phase, entry.cost && +entry.cost.usd.toFixed(4), entry.cost?.inputTokens]),
      [
        ["t1", 5, "completed", 0.03, 1500],
        // t2 recorded neither its end nor a cost: no divider for it.
        ["t3", 8, "interrupted", undefined, undefined],
        ["t4", 11, undefined, 0, 10], // no turn items (an import): after the turn's last item
      ],
    );
  });

  it("say how todos changed from the list before: added, status changed, removed", () => {
    seq = 0;
    const items = [
      item({ type: "todos", items: [{ id: "1", content: "write test", status: "in_progress" }, { id: "2", content: "old idea", status: "pending" }] }),
      item({ type: "todos", items: [{ id: "1", content: "write test", status: "completed" }, { id: "3", content: "fix bug", status: "pending" }] }),
    ];
    const [first, second] = entriesOf(items, context);
    assert.ok(first?.kind === "todos" && second?.kind === "todos");
    assert.deepEqual(first.todos.map((todo) => todo.change), ["added", "added"], "the thread's first list is all new");
    assert.deepEqual(second.todos.map((todo) => [todo.content, todo.change]), [["write test", "status"], ["fix bug", "added"]]);
    assert.deepEqual(second.removed, ["old idea"]);
    const unknown = entriesOf(items.slice(1), { ...context, atStart: false })[0];
    assert.ok(unknown?.kind === "todos" && unknown.changesUnknown, "without the list before, changes are not guessed");
  });

  it("show edits, boundaries, sessions and the notes worth seeing; skip bookkeeping", () => {
    seq = 0;
    const items = [
      item({ type: "session_meta", source: "startup", reason: "user", branch: "main", cwd: "/w" }),
      item({ type: "file_edit", path: "/w/a.py", beforeSha: null, afterSha: "a".repeat(64), author: "agent" }),
      item({ type: "file_edit", path: "/w/b.py", beforeSha: null, afterSha: null, contentKnown: false }),
      item({ type: "compact_boundary", summary: "so far" }),
      item({ type: "clear_boundary", endedSessionId: "s" }),
      item({ type: "session_meta", source: "clear", reason: "user" }),
      item({ type: "lifecycle", event: "SessionStart", status: "completed" }),
      item({ type: "acp_update", scope: "x", ord: 0, update: {} }),
      item({ type: "verifier", name: "pytest", passed: 7, total: 9 }),
      item({ type: "session_meta", source: "resume", reason: "acceptDrift", branch: "feature" }),
    ];
    const entries = entriesOf(items, context);
    assert.deepEqual(
      entries.map((entry) => entry.kind + (entry.kind === "boundary" ? `:${entry.boundary}` : "")),
      ["session", "edit", "edit", "boundary:compact", "boundary:clear", "note", "session"],
    );
    const blind = entries[2]!;
    assert.ok(blind.kind === "edit" && !blind.contentKnown);
  });

  it("hold a sub-agent in the call that started it; one no call names follows the thread's last item", () => {
    seq = 0;
    const items = [
      item({ type: "operation", operationId: "task-1", tool: "Task", effect: "read", state: "started" }),
      item({ type: "operation", operationId: "task-2", tool: "Task", effect: "read", state: "committed", childThreadId: "c2" }),
      item({ type: "message", role: "assistant", content: "done" }),
    ];
    const child = (threadId: string, title: string) => ({ threadId, title, itemCount: 3, costUsd: 0.01 });
    const children = {
      byOperation: new Map([["task-1", child("c1", "first")]]),
      byThread: new Map([["c2", child("c2", "second")]]),
      unanchored: [child("c3", "third")],
    };
    const entries = entriesOf(items, { ...context, children, atEnd: true });
    assert.deepEqual(
      entries.map((entry) => (entry.kind === "tool" ? `tool:${entry.child?.title}` : entry.kind === "child" ? `child:${entry.child.title}@${entry.seq}` : entry.kind)),
      ["tool:first", "tool:second", "message", "child:third@3"],
    );
    assert.ok(!entriesOf(items, { ...context, children, atEnd: false }).some((entry) => entry.kind === "child"), "not before the end is loaded");
  });

  it("mark the operations the restore found pending with their recovery class", () => {
    seq = 0;
    const items = [item({ type: "operation", operationId: "op9", tool: "deploy", effect: "side_effect", state: "started" })];
    const [tool] = entriesOf(items, { ...context, recovery: new Map([["op9", "needs_review"]]) });
    assert.ok(tool?.kind === "tool");
    assert.equal(tool.recovery, "needs_review");
  });
});

describe("a page becomes a change to what is shown", () => {
  const keyed = (key: string, seq: number, body = "") => ({ key, seq, body });
  const shown = (entries: { key: string; seq: number; body: string }[]) => entries.map((entry) => ({ ...entry, signature: entry.body }));
  const body = (entry: { body: string }) => entry.body;

  it("adds an earlier page in front and a later one at the back, updating what changed in place", () => {
    const before = [keyed("b", 5), keyed("c", 6, "old")];
    const next = [keyed("a", 1), keyed("b", 5), keyed("c", 6, "new"), keyed("d", 9)];
    const change = changeBetween(shown(before), next, body);
    assert.deepEqual(change.front.map((e) => e.key), ["a"]);
    assert.deepEqual(change.back.map((e) => e.key), ["d"]);
    assert.deepEqual(change.updates.map((e) => e.key), ["c"]);
    assert.deepEqual([change.removes, change.reset], [[], undefined]);
  });

  it("moves a tool call whose earlier state arrived to the front, and never reorders silently", () => {
    const before = [keyed("op", 9), keyed("m", 10)];
    const moved = changeBetween(shown(before), [keyed("op", 2), keyed("x", 3), keyed("m", 10)], body);
    assert.deepEqual([moved.removes, moved.front.map((e) => e.key), moved.reset], [["op"], ["op", "x"], undefined]);
    // An entry new between two shown ones is no page's doing: the view is reset instead.
    const odd = changeBetween(shown([keyed("a", 1), keyed("c", 3)]), [keyed("a", 1), keyed("b", 2), keyed("c", 3)], body);
    assert.deepEqual(odd.reset?.map((e) => e.key), ["a", "b", "c"]);
  });

  it("across pages: a call started in an earlier page and finished in a later one is one entry", () => {
    const window = new TranscriptWindow(3, null);
    window.addEarlier(
      [
        { seq: 3, id: "r", type: "operation", operationId: "op", tool: "bash", effect: "read", state: "committed", result: "ok" },
        { seq: 4, id: "m2", type: "message", role: "assistant", content: "done" },
      ],
      3,
    );
    const first = window.change();
    assert.deepEqual(first.back.map((e) => e.key), ["op:op", "m:m2"]);
    window.addEarlier(
      [
        { seq: 1, id: "m1", type: "message", role: "user", content: "look" },
        { seq: 2, id: "s", type: "operation", operationId: "op", tool: "bash", effect: "read", state: "started", arguments: { command: "ls" } },
      ],
      null,
    );
    const second = window.change();
    assert.deepEqual(second.removes, ["op:op"]);
    assert.deepEqual(second.front.map((e) => e.key), ["m:m1", "op:op"]);
    const tool = second.front[1]!;
    assert.ok(tool.kind === "tool");
    assert.deepEqual([tool.seq, tool.command, tool.states, tool.result], [2, "ls", ["started", "committed"], "ok"]);
  });
  it("keeps at most its limit: scrolling back lets the latest go, paging forward reads them again, in order", () => {
    const said = (from: number, to: number): Item[] =>
      Array.from({ length: to - from + 1 }, (_, n) => ({ seq: from + n, id: `s${from + n}`, type: "message", role: "assistant", content: `said ${from + n}` }));
    const keys = (from: number, to: number) => said(from, to).map((one) => `m:${one["id"]}`);
    const window = new TranscriptWindow(9, null, new Map(), 6);
    window.addEarlier(said(9, 12), 9);
    assert.deepEqual(window.change().back.map((e) => e.key), keys(9, 12));
    window.addEarlier(said(5, 8), 5);
    const back = window.change();
    assert.deepEqual([back.front.map((e) => e.key), back.removes, back.reset], [keys(5, 8), keys(11, 12), undefined]);
    assert.deepEqual([window.size, window.earlier, window.later], [6, 5, 10], "the latest two let go: read again from 10 on");
    window.addEarlier(said(1, 4), null);
    const start = window.change();
    assert.deepEqual([start.front.map((e) => e.key), start.removes], [keys(1, 4), keys(7, 10)]);
    assert.deepEqual([window.earlier, window.later], [null, 6]);
    window.addLater(said(7, 10), 10);
    const forward = window.change();
    assert.deepEqual([forward.back.map((e) => e.key), forward.removes, forward.reset], [keys(7, 10), keys(1, 4), undefined]);
    assert.deepEqual([window.earlier, window.later], [5, 10], "the earliest let go: read again before 5");
    window.addLater(said(11, 12), null);
    window.change();
    assert.deepEqual(window.entries().map((e) => e.key), keys(7, 12), "the end again, none lost, none twice");
    assert.deepEqual([window.earlier, window.later], [7, null]);
  });
});
