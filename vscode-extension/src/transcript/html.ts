// The HTML of each transcript entry, made in the extension host (the webview only places
// it). Recorded text is never markup: messages go through markdown-it with HTML disabled
// (raw tags come out escaped, `javascript:` links are dropped), everything else is
// escaped; the webview's Content-Security-Policy runs no script but its own either way.
import type MarkdownIt from "markdown-it";
import { driftLines, formatTokens, formatUsd, RECOVERY_ADVICE } from "../format";
import type { DriftEntry, RestoreReport } from "../protocol";
import type { BoundaryEntry, ChildEntry, ChildThread, EditEntry, Entry, MessageEntry, NoteEntry, SessionEntry, TodoLine, TodosEntry, ToolEntry, TurnEntry } from "./model";

/** Longer text is cut, saying how much was left out (a tool's output can be megabytes). */
export const SHOWN_CHARS = 20_000;

let markdown: MarkdownIt | undefined;

export interface RenderContext {
  /** The thread's directory: edited paths inside it are shown relative to it. */
  cwd: string | undefined;
  /** Who "assistant" is: the agent that kept an imported session, else "Agent". */
  agent: string;
  /** Set when rendering a sub-agent's transcript: its buttons name its thread. */
  threadId?: string;
}

export function escapeHtml(value: string): string {
  return value.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]!);
}

function cut(value: string): string {
  return value.length > SHOWN_CHARS ? `${value.slice(0, SHOWN_CHARS)}\n… (${value.length - SHOWN_CHARS} more characters)` : value;
}

export function renderMarkdown(source: string): string {
  // Loaded with the first transcript, not when the extension activates (it is most of the bundle).
  markdown ??= new (require("markdown-it") as typeof MarkdownIt)({ html: false, linkify: true, breaks: false });
  return markdown.render(cut(source));
}

function shownValue(value: unknown): string {
  return cut(typeof value === "string" ? value : JSON.stringify(value, null, 2));
}

function article(entry: Entry, classes: string, label: string, body: string): string {
  const undone = entry.undone ? " undone" : "";
  const said = entry.undone ? `${label}, undone by a rewind` : label;
  const tag = entry.undone ? '<span class="undone-tag">undone</span>' : "";
  return `<article class="entry ${classes}${undone}" data-key="${escapeHtml(entry.key)}" data-seq="${entry.seq}" tabindex="-1" aria-label="${escapeHtml(said)}">${tag}${body}</article>`;
}

function details(summary: string, content: string, classes: string): string {
  return `<details class="${classes}"><summary>${escapeHtml(summary)}</summary><pre>${escapeHtml(content)}</pre></details>`;
}

const WHO: Record<MessageEntry["role"], string> = { user: "You", assistant: "Agent", system: "System", tool: "Tool output" };

function message(entry: MessageEntry, context: RenderContext): string {
  const who = entry.role === "assistant" ? context.agent : WHO[entry.role];
  const tag = entry.sidechain ? ' <span class="tag">sub-agent</span>' : "";
  if (entry.role === "tool") {
    return article(entry, "message role-tool", `${who}, item ${entry.seq}`, details(who, entry.text, "output"));
  }
  const text = `<div class="markdown">${renderMarkdown(entry.text)}</div>`;
  if (entry.thought) {
    // Its reasoning, folded: a reader skimming for what the agent said reads past it.
    const body = `<details class="thinking"><summary>${escapeHtml(who)} thinking${tag}</summary>${text}</details>`;
    return article(entry, `message role-${entry.role} thought`, `${who} thinking, item ${entry.seq}`, body);
  }
  const body = `<header class="who">${escapeHtml(who)}${tag}</header>${text}`;
  return article(entry, `message role-${entry.role}`, `${who}, item ${entry.seq}`, body);
}

/** "done" / "failed" / "no outcome recorded": what happened to the call, in words. */
export function toolOutcome(entry: ToolEntry): string {
  const last = entry.states.at(-1);
  if (entry.failed) return "failed";
  if (last === "committed") return "done";
  if (last === "planned") return "planned";
  return "no outcome recorded";
}

function tool(entry: ToolEntry): string {
  const outcome = toolOutcome(entry);
  const glyph = entry.failed ? "✗" : outcome === "done" ? "✓" : "…";
  const head = [
    `<span class="glyph" aria-hidden="true">${glyph}</span>`,
    `<span class="tool-name"${entry.argsDigest ? ` title="arguments digest ${escapeHtml(entry.argsDigest)}"` : ""}>${escapeHtml(entry.tool)}</span>`,
    ...(entry.title ? [`<span class="tool-title">${escapeHtml(entry.title)}</span>`] : []),
    ...(entry.command ? [`<code class="command">${escapeHtml(entry.command)}</code>`] : []),
    `<span class="badge outcome-${outcome.replace(/ /g, "-")}">${escapeHtml(outcome)}</span>`,
    ...(entry.exitCode !== undefined ? [`<span class="exit-code">exit ${entry.exitCode}</span>`] : []),
    ...(entry.recovery ? [`<span class="badge recovery">${escapeHtml(entry.recovery.replace(/_/g, " "))}</span>`] : []),
  ].join(" ");
  const parts = [`<div class="tool-head">${head}</div>`];
  const args = entry.args;
  const onlyCommand = entry.command !== undefined && args !== null && typeof args === "object" && Object.keys(args).length === 1;
  if (args !== undefined && args !== null && !onlyCommand) parts.push(details("Arguments", shownValue(args), "args"));
  if (entry.result !== undefined) parts.push(details(entry.failed ? "Error" : "Result", shownValue(entry.result), "result"));
  if (entry.recovery) parts.push(`<p class="recovery">${escapeHtml(RECOVERY_ADVICE[entry.recovery] ?? entry.recovery)}</p>`);
  if (entry.child) parts.push(subAgent(entry.child));
  const label = `Tool call ${entry.tool}${entry.command ? ` ${entry.command}` : ""}, ${outcome}${entry.recovery ? `, ${entry.recovery.replace(/_/g, " ")}` : ""}`;
  return article(entry, `tool${entry.failed ? " failed" : ""}${entry.recovery ? " pending" : ""}`, label, parts.join(""));
}

/** "Sub-agent: find the bug · 12 items · $0.04", and its transcript, loaded when opened. */
function childSummary(child: ChildThread): string {
  const facts = [
    ...(child.itemCount !== undefined ? [`${child.itemCount} ${child.itemCount === 1 ? "item" : "items"}`] : []),
    ...(child.costUsd ? [formatUsd(child.costUsd)] : []),
  ];
  return [child.title ? `Sub-agent: ${child.title}` : "The sub-agent's transcript", ...facts].join(" · ");
}

export function subAgent(child: ChildThread): string {
  const id = escapeHtml(child.threadId);
  return `<details class="subagent" data-child="${id}"><summary>${escapeHtml(childSummary(child))}</summary><div class="subagent-body" data-child-body="${id}" role="feed" aria-label="${escapeHtml(childSummary(child))}"><p class="end">Loading the sub-agent's transcript…</p></div></details>`;
}

function childEntry(entry: ChildEntry): string {
  return article(entry, "child", childSummary(entry.child), subAgent(entry.child));
}

/** The path as a person knows it: relative to the thread's directory when inside it. */
export function shownPath(path: string, cwd: string | undefined): string {
  const base = cwd?.replace(/\/+$/, "");
  return base && path.startsWith(`${base}/`) ? path.slice(base.length + 1) : path;
}

function edit(entry: EditEntry, context: RenderContext): string {
  const verb = entry.beforeSha === null && entry.afterSha !== null ? "Created" : entry.afterSha === null && entry.contentKnown ? "Deleted" : "Edited";
  const path = shownPath(entry.path, context.cwd);
  const by = entry.author === "user" ? " (by you)" : "";
  const recorded = entry.contentKnown && !entry.notRecorded && (entry.beforeSha !== null || entry.afterSha !== null);
  const action = recorded
    ? `<button type="button" class="open-diff" data-action="diff" data-key="${escapeHtml(entry.key)}"${context.threadId ? ` data-thread="${escapeHtml(context.threadId)}"` : ""} aria-label="Open diff of ${escapeHtml(path)}">Open diff</button>`
    : `<span class="not-recorded">content not recorded</span>`;
  const body = `<span class="glyph" aria-hidden="true">✎</span> ${verb} <code class="path">${escapeHtml(path)}</code>${by} ${action}`;
  return article(entry, "edit", `${verb} ${path}${by}${recorded ? "" : ", content not recorded"}`, body);
}

const TODO_GLYPH = { pending: "○", in_progress: "◐", completed: "●" } as const;
const TODO_STATUS = { pending: "pending", in_progress: "in progress", completed: "completed" } as const;

function todos(entry: TodosEntry): string {
  const count = (change: TodoLine["change"], status?: TodoLine["status"]) =>
    entry.todos.filter((todo) => todo.change === change && (status === undefined || todo.status === status)).length;
  const changes = [
    [count("added"), "new"],
    [count("status", "completed"), "completed"],
    [count("status") - count("status", "completed"), "updated"],
    [entry.removed.length, "removed"],
  ] as const;
  const lines = entry.todos.map((todo) => {
    const change = todo.change === "added" ? "new" : todo.change === "status" ? `now ${TODO_STATUS[todo.status]}` : "";
    return `<li class="todo ${todo.status}${todo.change ? " changed" : ""}"><span class="glyph" aria-hidden="true">${TODO_GLYPH[todo.status]}</span> ${escapeHtml(todo.content)} <span class="status">${TODO_STATUS[todo.status]}</span>${change ? ` <span class="change">${escapeHtml(change)}</span>` : ""}</li>`;
  });
  const removed = entry.removed.length ? `<p class="removed">Removed: ${entry.removed.map(escapeHtml).join(", ")}</p>` : "";
  const said = changes.filter(([n]) => n > 0).map(([n, what]) => `${n} ${what}`);
  const summary = entry.changesUnknown ? `${entry.todos.length} items` : said.join(" · ") || "unchanged";
  return article(entry, "todos", `Todos, ${summary}`, `<header class="who">Todos <span class="tag">${summary}</span></header><ul>${lines.join("")}</ul>${removed}`);
}

export function costText(cost: TurnEntry["cost"]): string {
  if (!cost) return "";
  const money = cost.usd > 0 || cost.priced ? formatUsd(cost.usd) : "unpriced";
  return `${money} · ${formatTokens(cost.inputTokens)} in / ${formatTokens(cost.outputTokens)} out`;
}

function turn(entry: TurnEntry): string {
  const what = entry.turnId === "" ? "Model call" : entry.phase === "interrupted" ? "Turn interrupted" : entry.phase === "completed" ? "Turn completed" : "End of turn";
  const parts = [what, ...(entry.continueReason ? [entry.continueReason] : []), ...(entry.cost ? [costText(entry.cost)] : [])];
  const line = parts.join(" · ");
  return article(entry, `turn${entry.phase === "interrupted" ? " interrupted" : ""}`, line, `<span class="rule" aria-hidden="true"></span><span class="turn-text">${escapeHtml(line)}</span><span class="rule" aria-hidden="true"></span>`);
}

function boundary(entry: BoundaryEntry): string {
  if (entry.boundary === "compact") {
    const title = "Compacted: the agent continues from this summary, not from what is above";
    const summary = entry.summary ? `<div class="markdown">${renderMarkdown(entry.summary)}</div>` : "";
    return article(entry, "boundary compact", title, `<header class="who">${escapeHtml(title)}</header>${summary}`);
  }
  const title =
    entry.boundary === "clear"
      ? "Conversation cleared: the agent does not see anything above this line"
      : `Rewound to the end of turn ${entry.toTurnId ?? "?"}: what follows replaces what came after it`;
  return article(entry, `boundary ${entry.boundary}`, title, `<header class="who">${escapeHtml(title)}</header>`);
}

const RESUME_REASONS: Record<string, string> = {
  user: "",
  process_recovery: "after its last session ended without closing",
  acceptDrift: "in a changed workspace",
  fork: "as a fork",
};

function session(entry: SessionEntry): string {
  const what = entry.first ? "Thread started" : entry.source === "resume" ? "Resumed" : `Session (${entry.source})`;
  const reason = entry.first ? "" : (RESUME_REASONS[entry.reason] ?? entry.reason);
  const parts = [what + (reason ? ` ${reason}` : ""), ...(entry.branch ? [`branch ${entry.branch}`] : []), ...(entry.cwd ? [entry.cwd] : [])];
  const line = parts.join(" · ");
  return article(entry, "session", line, `<span class="glyph" aria-hidden="true">▸</span> ${escapeHtml(line)}`);
}

function note(entry: NoteEntry): string {
  return article(entry, `note${entry.warn ? " warn" : ""}`, entry.text, escapeHtml(entry.text));
}

export function renderEntry(entry: Entry, context: RenderContext): string {
  switch (entry.kind) {
    case "message":
      return message(entry, context);
    case "tool":
      return tool(entry);
    case "edit":
      return edit(entry, context);
    case "todos":
      return todos(entry);
    case "turn":
      return turn(entry);
    case "boundary":
      return boundary(entry);
    case "session":
      return session(entry);
    case "note":
      return note(entry);
    case "child":
      return childEntry(entry);
  }
}

/** What to do about each kind of drift, said where the drift is shown. */
export function driftAdvice(entry: DriftEntry): string {
  const recorded = typeof entry.recorded === "string" ? entry.recorded : "";
  switch (entry.field) {
    case "branch":
      return `The agent's commits and edits are on ${recorded || "the recorded branch"}: check it out to continue where it was, or review the edits below before going on.`;
    case "head":
      return "HEAD moved since the agent last ran: tests and checks it recorded may no longer hold; run them again.";
    case "cwd":
      return "Relative paths the agent used now resolve in the new directory.";
    case "repo":
      return "Another repository: files and commits the thread refers to are not in this one.";
    case "worktree":
      return "Another checkout of the repository: uncommitted edits the agent made are in the recorded one.";
  }
}

/**
 * The restore's warnings at the top of a resumed thread: drift, invalidated state and the
 * operations to review, each with what to do. Nothing when the restore found nothing.
 */
export function renderBanner(report: RestoreReport): string | undefined {
  const drift = report.environment.drift ?? [];
  const troubled = report.subsystems.filter((entry) => entry.status === "invalidated" || entry.status === "error");
  const pending = report.pendingOperations ?? [];
  const skipped = report.recovery.skippedLines?.length ?? 0;
  const lines: string[] = [];
  for (const [index, entry] of drift.entries()) {
    lines.push(`<li class="drift ${entry.severity}"><strong>${escapeHtml(driftLines([entry])[0]!)}</strong> ${escapeHtml(driftAdvice(entry))}</li>`);
    if (index > 8) break;
  }
  for (const entry of troubled) {
    // The worktree's invalidation is the drift above, said again: shown once.
    if (entry.name === "worktree" && drift.length) continue;
    lines.push(`<li class="subsystem"><strong>${escapeHtml(entry.name.replace(/_/g, " "))} ${escapeHtml(entry.status)}</strong>${entry.reason ? `: ${escapeHtml(entry.reason)}` : ""}</li>`);
  }
  for (const op of pending) {
    lines.push(
      `<li class="pending"><strong>${escapeHtml(op.tool)}</strong> (${escapeHtml(op.state)}): ${escapeHtml(op.recovery.replace(/_/g, " "))}. ${escapeHtml(RECOVERY_ADVICE[op.recovery] ?? "")}</li>`,
    );
  }
  if (skipped) lines.push(`<li class="skipped">${skipped} unreadable line${skipped === 1 ? "" : "s"} of the thread file skipped (kept in the file; sessiond doctor reports them).</li>`);
  if (report.readOnly) lines.push(`<li class="read-only">The data directory ${escapeHtml(report.readOnly.path)} is read-only (${escapeHtml(report.readOnly.reason)}): this thread can be read, not continued.</li>`);
  if (lines.length === 0) return undefined;
  const title = drift.length ? "The workspace is not where this thread was recorded" : "Before you continue";
  return [
    `<section class="banner" role="region" aria-label="${escapeHtml(title)}">`,
    `<h2>${escapeHtml(title)}</h2>`,
    `<ul>${lines.join("")}</ul>`,
    `<button type="button" data-action="report">Show restore report</button>`,
    `</section>`,
  ].join("");
}
