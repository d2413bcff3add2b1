// The tab a transcript or restore report opens in: named by the thread's title (VS Code names
// a tab by its URI's last path segment), one per thread, and shown as Markdown.
import { vscodeStub } from "../support/vscode";
import assert from "node:assert/strict";
import { beforeEach, describe, it } from "node:test";
import { reportPath, transcriptPath } from "../../src/sessions";
import { DOCUMENT_SCHEME, ReadOnlyDocuments } from "../../src/views";
import * as vscode from "vscode";

const tabName = (documentPath: string) => documentPath.split("/").pop();

describe("transcript tabs", () => {
  beforeEach(() => vscodeStub.reset());

  it("are named after the thread's title, not its id", () => {
    const thread = { threadId: "3f2c9a10-0000-4000-8000-000000000001", title: "fix login" };
    assert.equal(tabName(transcriptPath(thread)), "fix login");
    assert.equal(tabName(reportPath(thread)), "Restore report: fix login");
    assert.equal(tabName(transcriptPath({ threadId: "x", preview: "first line\nsecond" })), "first line");
  });

  it("keep two threads with the same title apart, and a title with slashes in one segment", () => {
    const a = transcriptPath({ threadId: "a", title: "fix login" });
    const b = transcriptPath({ threadId: "b", title: "fix login" });
    assert.notEqual(a, b);
    const slashed = transcriptPath({ threadId: "c", title: "fix a/b\\c\nnow" });
    assert.equal(slashed, "/transcript/c/fix a b c now");
    assert.equal(tabName(transcriptPath({ threadId: "d", title: "x".repeat(100) }))?.length, 60);
  });

  it("open as read-only Markdown under the sessiond scheme", async () => {
    const documents = new ReadOnlyDocuments();
    vscode.workspace.registerTextDocumentContentProvider(DOCUMENT_SCHEME, documents);
    await documents.show(transcriptPath({ threadId: "a", title: "fix login" }), "# fix login\n");
    assert.deepEqual(vscodeStub.documents, [{ uri: "sessiond:/transcript/a/fix login", text: "# fix login\n", languageId: "markdown" }]);
  });
});
