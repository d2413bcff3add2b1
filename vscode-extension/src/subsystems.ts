// Reads the subsystem states of a RestoreReport. States are `unknown` on the wire, so each
// reader checks the shape and returns nothing rather than guessing.
import type { CostState, RestoreReport, SubsystemReport, TodoEntryState, VerifierCheckpoint } from "./protocol";

function record(value: unknown): Record<string, unknown> | undefined {
  return value !== null && typeof value === "object" && !Array.isArray(value)
    ? (value as Record<string, unknown>)
    : undefined;
}

function subsystem(report: RestoreReport, name: string): SubsystemReport | undefined {
  return report.subsystems.find((entry) => entry.name === name);
}

const TODO_STATUSES = new Set(["pending", "in_progress", "completed"]);

export function todosOf(report: RestoreReport): TodoEntryState[] {
  const items = record(subsystem(report, "todos")?.state)?.["items"];
  if (!Array.isArray(items)) return [];
  return items.flatMap((raw) => {
    const item = record(raw);
    if (!item || typeof item["content"] !== "string") return [];
    const status = TODO_STATUSES.has(item["status"] as string) ? (item["status"] as TodoEntryState["status"]) : "pending";
    return [{ id: String(item["id"] ?? item["content"]), content: item["content"], status }];
  });
}

export function costOf(report: RestoreReport): CostState | undefined {
  const state = record(subsystem(report, "cost")?.state);
  if (!state || typeof state["usd"] !== "number") return undefined;
  const number = (key: string): number => (typeof state[key] === "number" ? (state[key] as number) : 0);
  return {
    usd: state["usd"],
    inputTokens: number("inputTokens"),
    outputTokens: number("outputTokens"),
    byModel: record(state["byModel"]) ?? {},
  };
}

export function verifierCheckpointsOf(report: RestoreReport): VerifierCheckpoint[] {
  const checkpoints = record(subsystem(report, "verifier")?.state)?.["checkpoints"];
  if (!Array.isArray(checkpoints)) return [];
  return checkpoints.flatMap((raw) => {
    const entry = record(raw);
    if (!entry || typeof entry["name"] !== "string") return [];
    return [
      {
        name: entry["name"],
        passed: Number(entry["passed"] ?? 0),
        total: Number(entry["total"] ?? 0),
        headSha: typeof entry["headSha"] === "string" ? entry["headSha"] : null,
        valid: entry["valid"] !== false,
      },
    ];
  });
}

/** Subsystems that came back invalidated or failed: what the user must know before continuing. */
export function troubledSubsystems(report: RestoreReport): SubsystemReport[] {
  return report.subsystems.filter((entry) => entry.status === "invalidated" || entry.status === "error");
}
