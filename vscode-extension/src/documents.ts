// Markdown for the restore report, a read-only document (the transcript is a webview: transcript/).
import { driftLines, formatTokens, formatUsd, RECOVERY_ADVICE, threadLabel } from "./format";
import type { RestoreReport } from "./protocol";
import { costOf, todosOf, troubledSubsystems, verifierCheckpointsOf } from "./subsystems";

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
