// What a thread row and the drift modal say, from the protocol's values.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { costStatusText, driftDetail, formatUsd, relativeTime, threadDescription, threadIcon, threadLabel, threadTooltip } from "../../src/format";

const now = new Date("2026-03-10T12:00:00Z");

describe("thread rows", () => {
  it("say how long ago a thread was updated, in the units a person uses", () => {
    assert.equal(relativeTime("2026-03-10T11:59:30Z", now), "just now");
    assert.equal(relativeTime("2026-03-10T11:15:00Z", now), "45 min ago");
    assert.equal(relativeTime("2026-03-10T09:00:00Z", now), "3h ago");
    assert.equal(relativeTime("2026-03-07T12:00:00Z", now), "3d ago");
    assert.equal(relativeTime("2026-02-24T12:00:00Z", now), "2w ago");
    assert.equal(relativeTime("2025-12-01T08:00:00Z", now), "2025-12-01");
    assert.equal(relativeTime(null, now), "");
  });

  it("say when and how much, short enough to sit beside the title in a narrow side bar", () => {
    const thread = { threadId: "t", updatedAt: "2026-03-10T10:00:00Z", branch: "fix/pay", itemCount: 1 };
    assert.equal(threadDescription(thread, now), "2h ago");
    assert.equal(threadDescription({ ...thread, itemCount: 14, costUsd: 0.4249 }, now), "2h ago · $0.42");
  });

  it("keep the details the row leaves out in the tooltip: branch, items, cost, state, preview, id", () => {
    const thread = { threadId: "t-1", title: "fix login", preview: "the form rejects", updatedAt: "2026-03-10T10:00:00Z", branch: "main", itemCount: 14, costUsd: 0.42, cwd: "/w/shop" };
    assert.deepEqual(threadTooltip(thread, now, {}).split("\n\n"), [
      "**fix login**",
      "branch `main` · 14 items · $0.42 · updated 2h ago",
      "the form rejects",
      "`t-1` · /w/shop",
    ]);
    const held = threadTooltip(thread, now, { openElsewhere: "vscode (connection 3, pid 41)" });
    assert.match(held, /\$\(lock\) Open elsewhere: vscode \(connection 3, pid 41\)\. Close it there, or fork it to go on here\./);
    const moved = threadTooltip(thread, now, { currentBranch: "release" });
    assert.match(moved, /\$\(warning\) Needs review: recorded on `main`, this folder is on `release` now\. Resume asks first\./);
    assert.match(threadTooltip({ ...thread, archived: true }, now, {}), /\$\(archive\) Archived: unarchive it to resume it\./);
  });

  it("mark the state a person should notice first with the row's icon", () => {
    const thread = { threadId: "t", branch: "main" };
    assert.equal(threadIcon(thread, {}), "comment-discussion");
    assert.equal(threadIcon(thread, { currentBranch: "main" }), "comment-discussion", "same branch: nothing to review");
    assert.equal(threadIcon(thread, { currentBranch: "release" }), "warning");
    assert.equal(threadIcon({ ...thread, branch: null }, { currentBranch: "release" }), "comment-discussion", "no recorded branch, no branch drift");
    assert.equal(threadIcon(thread, { openHere: true }), "debug-start");
    assert.equal(threadIcon(thread, { openElsewhere: "nvim", currentBranch: "release" }), "lock", "open elsewhere comes before review");
    assert.equal(threadIcon({ ...thread, archived: true }, { openElsewhere: "nvim" }), "archive");
    assert.equal(threadIcon({ ...thread, forkedFrom: { threadId: "s" } }, {}), "repo-forked");
  });

  it("say which agent an imported thread belongs to", () => {
    const imported = { threadId: "t", updatedAt: "2026-03-10T10:00:00Z", branch: "main", itemCount: 3 };
    const origin = (agent: "claude-code" | "codex" | "gemini") => ({ agent, sessionId: "s" });
    assert.equal(threadDescription({ ...imported, origin: origin("claude-code") }, now), "2h ago · Claude Code");
    assert.equal(threadDescription({ ...imported, origin: origin("codex"), costUsd: 1.5 }, now), "2h ago · $1.50 · Codex");
    assert.equal(threadDescription({ ...imported, origin: origin("gemini") }, now), "2h ago · Gemini CLI");
  });

  it("label a thread by title, else its first line, else what it is", () => {
    assert.equal(threadLabel({ threadId: "t", title: "fix login", preview: "x" }), "fix login");
    assert.equal(threadLabel({ threadId: "t", title: null, preview: "first line\nsecond" }), "first line");
    assert.equal(threadLabel({ threadId: "t", forkedFrom: { threadId: "s" } }), "Fork (untitled)");
    assert.equal(threadLabel({ threadId: "t" }), "Untitled thread");
  });

  it("format money without claiming precision it does not have", () => {
    assert.equal(formatUsd(0), "$0.00");
    // The status bar: a thread with no cost recorded shows none (not "$0.00", which reads as
    // free), and one whose models have no known price shows its tokens.
    const cost = (usd: number, inputTokens: number, outputTokens: number) => ({ usd, inputTokens, outputTokens, byModel: {} });
    assert.equal(costStatusText(cost(0, 0, 0)), undefined);
    assert.equal(costStatusText(cost(0, 12_000, 345)), "12k tokens");
    assert.equal(costStatusText(cost(0.42, 1000, 200)), "$0.42");
    assert.equal(formatUsd(0.004), "<$0.01");
    assert.equal(formatUsd(12.345), "$12.35");
  });
});

describe("the drift modal", () => {
  it("shows each drifted field recorded → current, whether it blocks, and what the buttons do", () => {
    const detail = driftDetail([
      { field: "branch", recorded: "main", current: "other", severity: "block" },
      { field: "head", recorded: "a".repeat(40), current: "b".repeat(40), severity: "warn" },
      { field: "worktree", recorded: "/w", current: null, severity: "block" },
    ]);
    const lines = detail.split("\n");
    assert.deepEqual(lines.slice(0, 4), [
      "Recorded → current:",
      "Branch: main → other (blocks)",
      "HEAD: aaaaaaaaaa → bbbbbbbbbb (warning)",
      "Worktree: /w → (none) (blocks)",
    ]);
    assert.match(detail, /Continue here: /);
    assert.match(detail, /Fork: /);
  });
});
