// "Search Threads": full-text search over every thread (thread/search) in a quick pick
// that updates as the user types. The logic is here, free of the VS Code API so the unit
// tests drive it: a debounce, one request in flight (a newer query cancels the older one,
// `$/cancelRequest`, and an answer that arrives for a stale query is dropped), hits as
// rows, the server's InvalidParams shown as the reason instead of rows.
import { CancellationTokenSource, type CancellationToken } from "vscode-jsonrpc";
import { relativeTime, threadLabel } from "./format";
import type { SearchHit, ThreadSearchParams, ThreadSearchResult } from "./protocol";

export const DEBOUNCE_MS = 150;
export const PAGE = 50;

export interface SearchSource {
  request(method: "thread/search", params: ThreadSearchParams, token?: CancellationToken): Promise<ThreadSearchResult>;
}

export interface HitRow {
  label: string;
  description: string;
  detail: string;
  hit: SearchHit;
}

/** What the quick pick shows now. */
export interface SearchView {
  rows: HitRow[];
  busy: boolean;
  /** Why there are no rows (a malformed query, a failure), or that hits may be missing. */
  message: string | undefined;
}

const ROLE: Record<SearchHit["role"], string> = {
  user: "user message",
  assistant: "agent message",
  tool: "tool call",
  output: "tool output",
  edit: "edited file",
  todo: "todo",
  title: "title",
};

/** The snippet cut at its highlights, which count Unicode code points (a JS string
 * counts UTF-16 units: an emoji before a match would shift it). */
export function pieces(hit: SearchHit): { text: string; match: boolean }[] {
  const chars = Array.from(hit.snippet);
  const out: { text: string; match: boolean }[] = [];
  let at = 0;
  for (const [start = 0, end = start] of hit.highlights) {
    out.push({ text: chars.slice(at, start).join(""), match: false });
    out.push({ text: chars.slice(start, end).join(""), match: true });
    at = end;
  }
  out.push({ text: chars.slice(at).join(""), match: false });
  return out.filter((piece) => piece.text);
}

/** The words a hit matched, as the transcript marks them when it opens at the hit. */
export function matchedWords(hit: SearchHit): string[] {
  return [...new Set(pieces(hit).filter((piece) => piece.match).map((piece) => piece.text))];
}

/** A hit as a row: the thread, what matched and when, the snippet with its matches
 * between ‹ › (a quick pick shows plain text). */
export function hitRow(hit: SearchHit, now: Date): HitRow {
  return {
    label: threadLabel(hit.thread),
    description: `${ROLE[hit.role]} · ${relativeTime(hit.ts, now)}`,
    detail: pieces(hit).map((piece) => (piece.match ? `‹${piece.text}›` : piece.text)).join(""),
    hit,
  };
}

export class ThreadSearch {
  private timer: ReturnType<typeof setTimeout> | undefined;
  private inFlight: CancellationTokenSource | undefined;
  private view: SearchView = { rows: [], busy: false, message: undefined };

  constructor(
    private readonly source: SearchSource,
    private readonly show: (view: SearchView) => void,
    private readonly params: () => Omit<ThreadSearchParams, "query"> = () => ({}),
    private readonly debounceMs = DEBOUNCE_MS,
    private readonly now: () => Date = () => new Date(),
  ) {}

  /** The user typed: search once they pause. */
  changed(value: string): void {
    if (this.timer) clearTimeout(this.timer);
    this.cancel();
    const query = value.trim();
    if (!query) {
      this.update({ rows: [], busy: false, message: undefined });
      return;
    }
    this.update({ ...this.view, busy: true });
    this.timer = setTimeout(() => void this.run(query), this.debounceMs);
  }

  /** The quick pick closed: nothing more is asked or shown. */
  dispose(): void {
    if (this.timer) clearTimeout(this.timer);
    this.cancel();
  }

  private cancel(): void {
    this.inFlight?.cancel();
    this.inFlight?.dispose();
    this.inFlight = undefined;
  }

  private async run(query: string): Promise<void> {
    const mine = new CancellationTokenSource();
    this.inFlight = mine;
    try {
      const result = await this.source.request("thread/search", { ...this.params(), query, limit: PAGE }, mine.token);
      if (this.inFlight !== mine) return; // a newer query is on its way
      const now = this.now();
      this.update({
        rows: result.hits.map((hit) => hitRow(hit, now)),
        busy: false,
        message: result.partial
          ? "Still indexing threads: some hits may be missing (type again to continue)"
          : result.hits.length === 0
            ? "No thread has these words"
            : undefined,
      });
    } catch (error) {
      if (this.inFlight !== mine) return;
      this.update({ rows: [], busy: false, message: error instanceof Error ? error.message : String(error) });
    } finally {
      if (this.inFlight === mine) this.inFlight = undefined;
      mine.dispose();
    }
  }

  private update(view: SearchView): void {
    this.view = view;
    this.show(view);
  }
}
