// Pure text for what the user sees: relative times, money, the drift table, tree labels.
import { threadCostUsd, type DriftEntry, type ThreadInfo } from "./protocol";

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

/** "2h ago · main · 14 items · $0.42": the line beside a thread in the tree. */
export function threadDescription(thread: ThreadInfo, now: Date): string {
  const parts = [relativeTime(thread.updatedAt ?? thread.createdAt, now)];
  if (thread.branch) parts.push(thread.branch);
  const count = thread.itemCount ?? 0;
  parts.push(`${count} ${count === 1 ? "item" : "items"}`);
  const cost = threadCostUsd(thread);
  if (cost !== undefined) parts.push(formatUsd(cost));
  const agent = thread.origin?.agent;
  if (agent === "claude-code" || agent === "codex") parts.push(agent === "codex" ? "Codex" : "Claude Code");
  if (thread.archived) parts.push("archived");
  return parts.filter(Boolean).join(" · ");
}

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
