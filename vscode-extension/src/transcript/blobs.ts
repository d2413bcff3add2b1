// "Open diff" on a recorded edit: VS Code's diff editor on the file as it was before and
// after, read from the server's blob store (thread/readBlob) through the edit that names
// them. Read-only documents under their own scheme; the path ends in the file's name, so
// the diff editor picks its language.
import * as path from "node:path";
import * as vscode from "vscode";
import type { SessiondClient } from "../client";
import type { ThreadInfo } from "../protocol";
import { shownPath } from "./html";
import type { EditEntry } from "./model";

export const BLOB_SCHEME = "sessiond-blob";

/** What a side of a diff shows: the content, or why there is none. */
type Side = { recorded: true; text: string } | { recorded: false };

export class BlobDocuments implements vscode.TextDocumentContentProvider {
  private readonly contents = new Map<string, string>();

  constructor(private readonly client: Pick<SessiondClient, "request">) {}

  /** Also for a document VS Code opens again later (a restored diff tab): read it then. */
  async provideTextDocumentContent(uri: vscode.Uri): Promise<string> {
    const known = this.contents.get(uri.toString());
    if (known !== undefined) return known;
    const [, threadId, seq, sha] = uri.path.split("/");
    if (!threadId || !seq || !sha || sha === "none") return "";
    const side = await this.read(threadId, Number(seq), sha);
    return side.recorded ? side.text : "(content not recorded)";
  }

  /**
   * Opens the diff of `edit`; false (nothing opened) when the store holds only the hashes
   * of a side that existed: the entry then says "content not recorded".
   */
  async openDiff(thread: ThreadInfo, edit: EditEntry): Promise<boolean> {
    const sides = await Promise.all(
      [edit.beforeSha, edit.afterSha].map((sha): Promise<Side> => (sha === null ? Promise.resolve({ recorded: true, text: "" }) : this.read(thread.threadId, edit.seq, sha))),
    );
    if (sides.some((side) => !side.recorded)) return false;
    const [before, after] = sides.map((side, index) => {
      const sha = index === 0 ? edit.beforeSha : edit.afterSha;
      const uri = vscode.Uri.from({ scheme: BLOB_SCHEME, path: `/${thread.threadId}/${edit.seq}/${sha ?? "none"}/${path.basename(edit.path)}` });
      this.contents.set(uri.toString(), side.recorded ? side.text : "");
      return uri;
    });
    const title = `${shownPath(edit.path, thread.cwd ?? undefined)} (recorded edit: before ↔ after)`;
    await vscode.commands.executeCommand("vscode.diff", before, after, title, { preview: true });
    return true;
  }

  private async read(threadId: string, seq: number, sha: string): Promise<Side> {
    const blob = await this.client.request("thread/readBlob", { threadId, seq, sha });
    if (!blob.recorded || blob.content == null) return { recorded: false };
    if (blob.encoding === "base64") return { recorded: true, text: `(binary content, ${blob.size ?? "?"} bytes: not shown)` };
    return { recorded: true, text: blob.content };
  }
}
