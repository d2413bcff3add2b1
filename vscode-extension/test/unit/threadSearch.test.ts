// "Search Threads": the quick pick's logic against a thread/search source in memory (the
// real server answers it in test/integration/search.test.ts): typing is debounced, a newer
// query cancels the one in flight and a stale answer is never shown, hits become rows
// with their matches marked (offsets in code points), errors and partial answers say so.
import "../support/vscode";
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { CancellationToken } from "vscode-jsonrpc";
import type { SearchHit, ThreadSearchParams, ThreadSearchResult } from "../../src/protocol";
import { hitRow, matchedWords, ThreadSearch, type SearchView } from "../../src/threadSearch";

const delay = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function hit(snippet: string, highlights: number[][], extra: Partial<SearchHit> = {}): SearchHit {
  const thread = { threadId: "t-1", title: "Fix the parser", itemCount: 3 };
  return { threadId: "t-1", seq: 4, role: "user", ts: "2026-03-10T11:00:00Z", snippet, highlights, thread, ...extra };
}

/** Answers each query when the test says so; records what was asked and cancelled. */
function controlledSource() {
  const asked: { params: ThreadSearchParams; token?: CancellationToken; answer(result: ThreadSearchResult): void; fail(error: Error): void }[] = [];
  return {
    asked,
    request(_method: "thread/search", params: ThreadSearchParams, token?: CancellationToken): Promise<ThreadSearchResult> {
      return new Promise((resolve, reject) => asked.push({ params, token, answer: resolve, fail: reject }));
    },
  };
}

describe("ThreadSearch", () => {
  it("asks once the user pauses, for what was typed last", async () => {
    const source = controlledSource();
    const views: SearchView[] = [];
    const search = new ThreadSearch(source, (view) => views.push(view), () => ({ archived: false }), 20);
    search.changed("p");
    search.changed("pa");
    search.changed("parser");
    await delay(60);
    assert.deepEqual(source.asked.map((a) => a.params), [{ archived: false, query: "parser", limit: 50 }]);
    assert.equal(views.at(-1)?.busy, true);
    source.asked[0]!.answer({ hits: [hit("fix the parser", [[8, 14]])], nextCursor: null, partial: false });
    await delay(5);
    assert.deepEqual(views.at(-1)?.rows.map((row) => row.detail), ["fix the ‹parser›"]);
    assert.equal(views.at(-1)?.busy, false);
    search.dispose();
  });

  it("cancels the query in flight when the user types on, and never shows its late answer", async () => {
    const source = controlledSource();
    const views: SearchView[] = [];
    const search = new ThreadSearch(source, (view) => views.push(view), undefined, 1);
    search.changed("parser");
    await delay(20);
    search.changed("parser -docs");
    assert.equal(source.asked[0]!.token?.isCancellationRequested, true); // $/cancelRequest
    await delay(20);
    assert.equal(source.asked.length, 2);
    source.asked[1]!.answer({ hits: [hit("the parser", [[4, 10]], { seq: 9 })], nextCursor: null, partial: false });
    await delay(5);
    source.asked[0]!.answer({ hits: [hit("stale parser docs", [[6, 12]])], nextCursor: null, partial: false });
    await delay(5);
    assert.deepEqual(views.at(-1)?.rows.map((row) => row.hit.seq), [9]);
    search.dispose();
  });

  it("shows the server's reason for a malformed query, and a partial answer as partial", async () => {
    const source = controlledSource();
    const views: SearchView[] = [];
    const search = new ThreadSearch(source, (view) => views.push(view), undefined, 1);
    search.changed('"unbalanced');
    await delay(20);
    source.asked[0]!.fail(new Error("query: unbalanced quote"));
    await delay(5);
    assert.deepEqual(views.at(-1), { rows: [], busy: false, message: "query: unbalanced quote" });
    search.changed("parser");
    await delay(20);
    source.asked[1]!.answer({ hits: [hit("parser", [[0, 6]])], nextCursor: null, partial: true });
    await delay(5);
    assert.match(views.at(-1)?.message ?? "", /still indexing/i);
    search.changed("   ");
    assert.deepEqual(views.at(-1), { rows: [], busy: false, message: undefined });
    assert.equal(source.asked.length, 2); // nothing asked for blanks
    search.dispose();
  });

  it("marks matches by code point, after an emoji as before one", () => {
    const shown = hit("🎉 the Parser and parsers", [[6, 12], [17, 24]]); // code points
    assert.deepEqual(matchedWords(shown), ["Parser", "parsers"]);
    const row = hitRow(shown, new Date("2026-03-10T12:00:00Z"));
    assert.equal(row.detail, "🎉 the ‹Parser› and ‹parsers›");
    assert.equal(row.label, "Fix the parser");
    assert.equal(row.description, "user message · 1h ago");
  });
});
