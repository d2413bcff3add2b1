// Pure text for what the user sees: relative times, money, the drift table, tree labels.
import { AGENTS, threadCostUsd, type CostState, type DriftEntry, type ThreadInfo } from "./protocol";

export function relativeTime(iso: string | null | undefined, now: Date): string {
  if (!iso) return "";
  const seconds = (now.getTime() - Date.parse(iso)) / 1000;
  if (Number.isNaN(seconds)) return "";
  const minutes = Math.floor(seconds / 60);
  const hours = Math.floor(minutes / 60);
  const days = Math.floor(hours / 24);
  if (seconds < 45) return "just now";
  if (minutes < 60) return `${Math.max(1, minutes)} min ago`;
  if (hours < 24) return `${hours}h ago`;
  if (days < 7) return `${days}d ago`;
  if (days < 30) return `${Math.floor(days / 7)}w ago`;
  return iso.slice(0, 10);
}

export function formatUsd(usd: number): string {
  if (usd === 0) return "$0.00";
  if (usd < 0.01) return "<$0.01";
  return `$${usd.toFixed(2)}`;
}

/** The status bar's cost text: nothing when the thread has recorded no cost (not "$0.00",
 * which reads as "free"), tokens when no price is known for its models. */
export function costStatusText(cost: CostState): string | undefined {
  const tokens = cost.inputTokens + cost.outputTokens;
  if (cost.usd > 0) return formatUsd(cost.usd);
  return tokens > 0 ? `${formatTokens(tokens)} tokens` : undefined;
}

export function formatTokens(tokens: number): string {
  if (tokens < 1000) return String(tokens);
  if (tokens < 1_000_000) return `${(tokens / 1000).toFixed(tokens < 10_000 ? 1 : 0)}k`;
  return `${(tokens / 1_000_000).toFixed(1)}M`;
}

export function threadLabel(thread: ThreadInfo): string {
  const title = thread.title?.trim() || thread.preview?.trim().split("\n")[0];
  if (title) return title.length > 80 ? `${title.slice(0, 79)}…` : title;
  return thread.forkedFrom ? "Fork (untitled)" : "Untitled thread";
}

/** What the extension knows about a thread beyond its ThreadInfo, for its icon and tooltip. */
export interface ThreadState {
  /** Resumed in this window. */
  openHere?: boolean;
  /** Held by another client or window: the server's `holder`, e.g. "vscode (connection 3, pid 41235)". */
  openElsewhere?: string;
  /** The branch the thread's folder is on now; another recorded branch needs review (Resume asks). */
  currentBranch?: string;
}

/** "Claude Code" for `claude-code` (the schema's agents); an agent this version does not know, by its name. */
export function agentName(agent: string): string {
  return AGENTS[agent]?.name ?? agent;
}

/** The agent that keeps an imported session ("Claude Code", "Codex", "Gemini CLI"), else "". */
function importedFrom(thread: ThreadInfo): string {
  const agent = thread.origin?.agent;
  return agent && agent !== "acp" ? agentName(agent) : "";
}

/** "2h ago · $0.42" (· "Claude Code" for an imported session): short enough to stay beside
 * the title at the default side-bar width (the branch is the group the row sits in; the
 * rest is in the tooltip). */
export function threadDescription(thread: ThreadInfo, now: Date): string {
  const cost = threadCostUsd(thread);
  return [relativeTime(thread.updatedAt ?? thread.createdAt, now), cost !== undefined ? formatUsd(cost) : "", importedFrom(thread)]
    .filter(Boolean)
    .join(" · ");
}

export function needsReview(thread: ThreadInfo, state: ThreadState): boolean {
  return !!thread.branch && !!state.currentBranch && thread.branch !== state.currentBranch;
}

/** The codicon for the state a person should notice first: archived, open elsewhere, needs review. */
export function threadIcon(thread: ThreadInfo, state: ThreadState): string {
  if (thread.archived) return "archive";
  if (state.openElsewhere) return "lock";
  if (needsReview(thread, state)) return "warning";
  if (state.openHere) return "debug-start";
  if (thread.forkedFrom) return "repo-forked";
  return "comment-discussion";
}

/** The hover: title, state, every detail the row leaves out, and what came from where. */
export function threadTooltip(thread: ThreadInfo, now: Date, state: ThreadState): string {
  const count = thread.itemCount ?? 0;
  const cost = threadCostUsd(thread);
  const facts = [
    thread.branch ? `branch \`${thread.branch}\`` : "no branch",
    `${count} ${count === 1 ? "item" : "items"}`,
    ...(cost !== undefined ? [formatUsd(cost)] : []),
    `updated ${relativeTime(thread.updatedAt ?? thread.createdAt, now) || "never"}`,
  ];
  const states = [
    ...(thread.archived ? ["$(archive) Archived: unarchive it to resume it."] : []),
    ...(state.openElsewhere ? [`$(lock) Open elsewhere: ${state.openElsewhere}. Close it there, or fork it to go on here.`] : []),
    ...(needsReview(thread, state)
      ? [`$(warning) Needs review: recorded on \`${thread.branch}\`, this folder is on \`${state.currentBranch}\` now. Resume asks first.`]
      : []),
    ...(state.openHere ? ["$(debug-start) Open in this window."] : []),
  ];
  return [
    `**${threadLabel(thread)}**`,
    facts.join(" · "),
    ...states,
    ...(thread.preview ? [thread.preview] : []),
    ...(thread.forkedFrom ? [`forked from \`${String(thread.forkedFrom["threadId"])}\``] : []),
    ...(thread.sessionKey ? [`session key \`${thread.sessionKey}\``] : []),
    ...(thread.previousThreadId ? [`replaces \`${thread.previousThreadId}\`${thread.resetReason ? ` (${thread.resetReason} reset)` : ""}`] : []),
    ...(thread.nextThreadId ? [`replaced by \`${thread.nextThreadId}\`: Resume offers it`] : []),
    `\`${thread.threadId}\`${thread.cwd ? ` · ${thread.cwd}` : ""}`,
  ].join("\n\n");
}

/** What each recovery class of a pending operation asks of the person continuing. */
export const RECOVERY_ADVICE: Readonly<Record<string, string>> = {
  not_started: "Never started: safe to run.",
  safe_to_retry: "Started, no outcome recorded; read-only or idempotent: it may run again.",
  needs_review: "Started, no outcome recorded, and it has side effects: check what it did before running it again.",
  committed_result_missing: "Done, but its result was not saved: do not run it again; recover the result.",
};

const DRIFT_FIELD_NAMES: Record<DriftEntry["field"], string> = {
  cwd: "Directory",
  repo: "Repository",
  branch: "Branch",
  head: "HEAD",
  worktree: "Worktree",
};

function shown(value: unknown): string {
  if (value === null || value === undefined || value === "") return "(none)";
  if (typeof value === "string") return /^[0-9a-f]{40}$/.test(value) ? value.slice(0, 10) : value;
  return JSON.stringify(value);
}

/** One line per drifted field: "Branch: main → other (blocks)". */
export function driftLines(drift: readonly DriftEntry[]): string[] {
  return drift.map(
    (entry) =>
      `${DRIFT_FIELD_NAMES[entry.field] ?? entry.field}: ${shown(entry.recorded)} → ${shown(entry.current)}` +
      (entry.severity === "block" ? " (blocks)" : " (warning)"),
  );
}

export function driftDetail(drift: readonly DriftEntry[]): string {
  return [
    "Recorded → current:",
    ...driftLines(drift),
    "",
    "Continue here: resume in this workspace as it is now (recorded in the thread).",
    "Fork: start a new thread from this one, bound to the workspace as it is now.",
  ].join("\n");
}
