// The wire contract as the extension sees it: the generated types, plus the shapes of the
// subsystem states it displays (those are `unknown` on the wire).
import type { ProtocolRequests, SubsystemReport, ThreadInfo } from "./protocol.generated";

export * from "./protocol.generated";

export type Requests = ProtocolRequests;
export type RequestMethod = keyof Requests;
export type ParamsOf<M extends RequestMethod> = Requests[M]["params"];
export type ResultOf<M extends RequestMethod> = Requests[M]["result"];

// Subsystem states are `unknown` on the wire (each subsystem owns its shape); these are the
// shapes the extension displays, read defensively by the parsers in subsystems.ts.
export interface TodoEntryState {
  id: string;
  content: string;
  status: "pending" | "in_progress" | "completed";
}

export interface CostState {
  inputTokens: number;
  outputTokens: number;
  usd: number;
  byModel: Record<string, unknown>;
}

export interface VerifierCheckpoint {
  name: string;
  passed: number;
  total: number;
  headSha: string | null;
  valid: boolean;
}

export type { SubsystemReport, ThreadInfo };

/** The thread's spend, or undefined when nothing was spent (or the server is older):
 * a row shows a cost only when there is one. */
export function threadCostUsd(thread: ThreadInfo): number | undefined {
  const cost = thread.costUsd;
  return typeof cost === "number" && cost > 0 ? cost : undefined;
}
