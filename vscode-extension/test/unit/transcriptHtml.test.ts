// The HTML of transcript entries and of the restore banner: recorded text is never markup,
// Markdown is rendered, every entry says what it is to a screen reader.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { renderBanner, renderEntry, type RenderContext } from "../../src/transcript/html";
import { entriesOf, type Item } from "../../src/transcript/model";
import type { RestoreReport } from "../../src/protocol";
import { textOf } from "../support/text";

const context: RenderContext = { cwd: "/w/shop", agent: "Agent" };
const render = (items: Item[]) =>
  entriesOf(items, { atStart: true, recovery: new Map([["deploy-1", "needs_review"]]), notRecorded: new Set() }).map((entry) => renderEntry(entry, context));

describe("transcript HTML", () => {
  it("renders Markdown, and recorded HTML and script links as text", () => {
    const [html] = render([{ seq: 1, id: "m", type: "message", role: "assistant", content: "**bold** `code`\n\n<img src=x onerror=alert(1)> [x](javascript:alert(1))" }]);
    assert.match(html!, /<strong>bold<\/strong> <code>code<\/code>/);
    assert.doesNotMatch(html!, /<img|href="javascript/);
    assert.match(html!, /&lt;img src=x onerror=alert\(1\)&gt;/);
  });

  it("shows the agent's thinking folded and named as such, apart from what it answered", () => {
    const [thinking, answer] = render([
      { seq: 1, id: "t", type: "message", role: "assistant", thought: true, content: "the **hash** compare looks wrong" },
      { seq: 2, id: "a", type: "message", role: "assistant", content: "Found it." },
    ]);
    assert.match(thinking!, /aria-label="Agent thinking, item 1"/);
    assert.match(thinking!, /<details class="thinking"><summary>Agent thinking<\/summary>/);
    assert.doesNotMatch(thinking!, /<details[^>]* open/, "folded");
    assert.match(thinking!, /<strong>hash<\/strong>/);
    assert.match(answer!, /aria-label="Agent, item 2"/);
    assert.doesNotMatch(answer!, /thinking/);
  });

  it("labels each entry for a screen reader, and says a failed call failed", () => {
    const html = render([
      { seq: 1, id: "m", type: "message", role: "user", content: "hi" },
      { seq: 2, id: "o", type: "operation", operationId: "op", tool: "bash", effect: "side_effect", state: "failed", arguments: { command: "npm test" }, result: "Error: 2 failing" },
      { seq: 3, id: "d", type: "operation", operationId: "deploy-1", tool: "deploy", effect: "side_effect", state: "started" },
    ]);
    assert.match(html[0]!, /aria-label="You, item 1"/);
    assert.match(html[1]!, /class="entry tool failed"/);
    assert.match(html[1]!, /aria-label="Tool call bash npm test, failed"/);
    assert.equal(textOf(html[1]!), "✗ bash npm test failed Error Error: 2 failing");
    assert.match(textOf(html[2]!), /needs review .* check what it did before running it again/);
  });

  it("offers Open diff for an edit with contents, and says when only hashes were recorded", () => {
    const [stored, blind, created] = render([
      { seq: 1, id: "e1", type: "file_edit", path: "/w/shop/src/app.py", beforeSha: "a".repeat(64), afterSha: "b".repeat(64) },
      { seq: 2, id: "e2", type: "file_edit", path: "/elsewhere/x.py", beforeSha: null, afterSha: null, contentKnown: false },
      { seq: 3, id: "e3", type: "file_edit", path: "/w/shop/new.md", beforeSha: null, afterSha: "c".repeat(64) },
    ]);
    assert.equal(textOf(stored!), "✎ Edited src/app.py Open diff");
    assert.match(stored!, /<button type="button" class="open-diff" data-action="diff" data-key="edit:e1"/);
    assert.equal(textOf(blind!), "✎ Edited /elsewhere/x.py content not recorded");
    assert.equal(textOf(created!), "✎ Created new.md Open diff");
  });

  it("puts drift, invalidated state and operations to review in a banner, each with what to do", () => {
    const report = {
      environment: { drift: [{ field: "branch", recorded: "feature/payments", current: "main", severity: "block" }] },
      subsystems: [
        { name: "worktree", status: "invalidated", reason: "branch changed" },
        { name: "verifier", status: "invalidated", reason: "HEAD moved" },
      ],
      pendingOperations: [{ operationId: "op", tool: "deploy", state: "started", recovery: "needs_review" }],
      recovery: { skippedLines: [] },
    } as unknown as RestoreReport;
    const banner = textOf(renderBanner(report)!);
    assert.match(banner, /^The workspace is not where this thread was recorded /);
    assert.match(banner, /Branch: feature\/payments → main \(blocks\) The agent's commits and edits are on feature\/payments: check it out/);
    assert.match(banner, /verifier invalidated : HEAD moved/);
    assert.doesNotMatch(banner, /worktree invalidated/, "the drift already says it");
    assert.match(banner, /deploy \(started\): needs review\. Started, no outcome recorded/);
    const calm = { ...report, environment: { drift: [] }, subsystems: [], pendingOperations: [] } as unknown as RestoreReport;
    assert.equal(renderBanner(calm), undefined);
  });
});
