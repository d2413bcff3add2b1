// Markdown for the two read-only documents: a thread's transcript and its restore report.
import { driftLines, formatTokens, formatUsd, threadLabel } from "./format";
import type { RestoreReport, ThreadInfo } from "./protocol";
import { costOf, todosOf, troubledSubsystems, verifierCheckpointsOf } from "./subsystems";

type Item = Record<string, unknown>;

function messageText(content: unknown): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content
    .map((part: unknown) => {
      const entry = part as Item;
      return typeof entry["text"] === "string" ? entry["text"] : `[${String(entry["type"] ?? "part")}]`;
    })
    .join("\n");
}

function renderItem(item: Item): string | undefined {
  switch (item["type"]) {
    case "message":
      return `### ${String(item["role"])}\n\n${messageText(item["content"])}`;
    case "operation":
      return `> tool \`${String(item["tool"])}\` — ${String(item["state"])}`;
    case "compact_boundary":
      return `> **Summary of the earlier conversation**\n>\n> ${String(item["summary"]).split("\n").join("\n> ")}`;
    case "turn":
      return item["phase"] === "interrupted" ? "> turn interrupted" : undefined;
    default:
      return undefined;
  }
}

/** Shown at the top of a transcript whose earlier messages are not loaded yet. */
export const LOAD_EARLIER = "Load earlier messages";

export function renderTranscript(thread: ThreadInfo, items: readonly Item[], boundarySeq: number, earlier = false): string {
  const header = [
    `# ${threadLabel(thread)}`,
    "",
    `Thread \`${thread.threadId}\`${thread.branch ? ` · branch \`${thread.branch}\`` : ""}${thread.cwd ? ` · \`${thread.cwd}\`` : ""}`,
  ];
  if (earlier) header.push("", `_Showing the newest messages. [${LOAD_EARLIER}](command:sessiond.loadEarlierMessages?${encodeURIComponent(JSON.stringify([thread.threadId]))})_`);
  else if (boundarySeq > 0) header.push("", "_Earlier history, before the last clear or compact, is not shown._");
  const body = items.map(renderItem).filter((text): text is string => text !== undefined);
  if (body.length === 0) body.push("_No messages yet._");
  return [...header, "", "---", "", body.join("\n\n"), ""].join("\n");
}

const RECOVERY_ADVICE: Record<string, string> = {
  not_started: "never started; safe to run",
  safe_to_retry: "started, no outcome; read-only or idempotent, may run again",
  needs_review: "started, no outcome, has side effects; check before running again",
  committed_result_missing: "done, but its result was not saved; do not run again",
};

export function renderRestoreReport(report: RestoreReport): string {
  const lines = [`# Restore report: ${threadLabel(report.thread)}`, ""];
  lines.push(`Status: **${report.status}** · session \`${report.session.sessionId ?? "none"}\``);
  if (report.continueReason) lines.push(`Continue reason: ${report.continueReason}`);
  const drift = report.environment.drift ?? [];
  lines.push("", "## Environment", "");
  lines.push(...(drift.length ? driftLines(drift).map((line) => `- ${line}`) : ["No drift: same place as recorded."]));
  lines.push("", "## Subsystems", "", "| subsystem | status | reason |", "|---|---|---|");
  for (const entry of report.subsystems) lines.push(`| ${entry.name} | ${entry.status} | ${entry.reason ?? ""} |`);
  const troubled = troubledSubsystems(report);
  if (troubled.length) {
    lines.push("", "## Needs your attention", "");
    for (const entry of troubled) lines.push(`- **${entry.name}** ${entry.status}: ${entry.reason ?? "no reason given"}`);
  }
  const pending = report.pendingOperations ?? [];
  lines.push("", "## Operations to review", "");
  if (pending.length === 0) lines.push("None.");
  for (const op of pending) {
    lines.push(`- \`${op.tool}\` (${op.operationId}), ${op.state}: **${op.recovery}** — ${RECOVERY_ADVICE[op.recovery] ?? ""}`);
  }
  const todos = todosOf(report);
  if (todos.length) {
    lines.push("", "## Todos", "");
    for (const todo of todos) lines.push(`- [${todo.status === "completed" ? "x" : " "}] ${todo.content} (${todo.status})`);
  }
  const checkpoints = verifierCheckpointsOf(report);
  if (checkpoints.length) {
    lines.push("", "## Verification", "");
    for (const c of checkpoints) {
      lines.push(`- ${c.name}: ${c.passed}/${c.total}${c.headSha ? ` at ${c.headSha.slice(0, 10)}` : ""}${c.valid ? "" : " (invalidated)"}`);
    }
  }
  const cost = costOf(report);
  if (cost) {
    lines.push("", "## Cost", "", `${formatUsd(cost.usd)} · ${formatTokens(cost.inputTokens)} in / ${formatTokens(cost.outputTokens)} out`);
  }
  const recovery = report.recovery;
  const skipped = recovery.skippedLines?.length ?? 0;
  lines.push(
    "",
    "## Recovery",
    "",
    `${recovery.snapshotUsed ? "Snapshot + tail" : "Full replay"}; ${skipped} unreadable line(s) skipped` +
      `${recovery.tornTailRecovered ? "; torn last line recovered" : ""}${recovery.bomStripped ? "; BOM stripped" : ""}; last durable seq ${report.lastDurableSeq}.`,
    "",
  );
  return lines.join("\n");
}
