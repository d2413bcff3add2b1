// The tab a restore report opens in: named by the thread's title (VS Code names a tab by its
// URI's last path segment), one per thread, and shown as Markdown.
import { vscodeStub } from "../support/vscode";
import assert from "node:assert/strict";
import { beforeEach, describe, it } from "node:test";
import { reportPath } from "../../src/sessions";
import { DOCUMENT_SCHEME, ReadOnlyDocuments } from "../../src/views";
import * as vscode from "vscode";

const tabName = (documentPath: string) => documentPath.split("/").pop();

describe("restore report tabs", () => {
  beforeEach(() => vscodeStub.reset());

  it("are named after the thread's title, not its id", () => {
    assert.equal(tabName(reportPath({ threadId: "3f2c9a10-0000-4000-8000-000000000001", title: "fix login" })), "Restore report: fix login");
    assert.equal(tabName(reportPath({ threadId: "x", preview: "first line\nsecond" })), "Restore report: first line");
  });

  it("keep two threads with the same title apart, and a title with slashes in one segment", () => {
    assert.notEqual(reportPath({ threadId: "a", title: "fix login" }), reportPath({ threadId: "b", title: "fix login" }));
    assert.equal(reportPath({ threadId: "c", title: "fix a/b\\c\nnow" }), "/restore-report/c/Restore report: fix a b c now");
    assert.equal(tabName(reportPath({ threadId: "d", title: "x".repeat(100) }))?.length, 60);
  });

  it("open as read-only Markdown under the sessiond scheme", async () => {
    const documents = new ReadOnlyDocuments();
    vscode.workspace.registerTextDocumentContentProvider(DOCUMENT_SCHEME, documents);
    await documents.show(reportPath({ threadId: "a", title: "fix login" }), "# Restore report\n");
    assert.deepEqual(vscodeStub.documents, [{ uri: "sessiond:/restore-report/a/Restore report: fix login", text: "# Restore report\n", languageId: "markdown" }]);
  });
});
