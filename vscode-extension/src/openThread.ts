// "Open Thread…": a thread by the id a person copied — from `sessiond list`, a search hit,
// a colleague's message — whole or cut to a unique prefix of 4 or more digits, as git takes
// a commit's. The server resolves it (thread/resolve: its store, whichever that is); this
// module says what to do with the answer, free of the VS Code API so tests drive it.
import type { ThreadInfo, ThreadResolveParams, ThreadResolveResult } from "./protocol";

export interface ResolveSource {
  request(method: "thread/resolve", params: ThreadResolveParams): Promise<ThreadResolveResult>;
}

/** One thread to open; several to choose from; or why there is none to open. */
export type Resolved =
  | { kind: "one"; thread: ThreadInfo }
  | { kind: "several"; threads: ThreadInfo[]; more: boolean }
  | { kind: "none"; message: string };

const HEX_DIGITS = /[0-9a-f]/gi;

/** The input box's check, before anything is asked: what a prefix needs, or undefined. */
export function prefixProblem(typed: string): string | undefined {
  const text = typed.trim();
  if (!text) return undefined; // nothing typed yet: nothing to say
  if (!/^[0-9a-fA-F-]+$/.test(text)) return "A thread id has only the digits 0-9, a-f and hyphens.";
  if ((text.match(HEX_DIGITS) ?? []).length < 4) return "Type at least 4 digits of the id.";
  if ((text.match(HEX_DIGITS) ?? []).length > 32) return "A thread id has 32 digits.";
  return undefined;
}

export async function resolveThread(source: ResolveSource, typed: string): Promise<Resolved> {
  const prefix = typed.trim();
  const found = await source.request("thread/resolve", { prefix });
  const [first] = found.threads;
  if (found.threads.length === 1 && first) return { kind: "one", thread: first };
  if (found.threads.length === 0) return { kind: "none", message: `No thread id starts with ${prefix.toLowerCase()}.` };
  return { kind: "several", threads: found.threads, more: found.more };
}
