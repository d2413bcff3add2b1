// "Export transcript…": a thread as a file the person keeps or sends — Markdown, JSON (the
// protocol's items, which `sessiond import sessiond FILE` takes back) or one self-contained
// HTML page, optionally encrypted with a passphrase. The server writes the document
// (`thread/export`, restore/render in sessiond); this asks where, then writes its parts to
// the file as they come, so a long thread never sits whole in the extension host.
import * as vscode from "vscode";
import { threadLabel } from "./format";
import type { ParamsOf, ResultOf, ThreadInfo } from "./protocol";

type ExportParams = ParamsOf<"thread/export">;
type Format = NonNullable<ExportParams["format"]>;

/** What the command needs of the client: one request method. */
export interface ExportClient {
  request(method: "thread/export", params: ExportParams): Promise<ResultOf<"thread/export">>;
}

interface FormatPick extends vscode.QuickPickItem {
  format: Format;
  encrypt: boolean;
}

const FORMATS: FormatPick[] = [
  { label: "HTML", description: "one self-contained page: searchable, light and dark, printable", format: "html", encrypt: false },
  { label: "HTML, encrypted", description: "opens in any browser with a passphrase", format: "html", encrypt: true },
  { label: "Markdown", description: "the transcript as text", format: "md", encrypt: false },
  { label: "JSON", description: "every item, lossless: sessiond import sessiond FILE takes it back", format: "json", encrypt: false },
];

const FILTERS: Record<Format, Record<string, string[]>> = {
  html: { "HTML page": ["html"] },
  md: { Markdown: ["md"] },
  json: { JSON: ["json"] },
};

/** A file name from the thread's title, as the server names one: letters, digits, `-_.`. */
export function defaultFileName(thread: ThreadInfo, format: Format, encrypted: boolean): string {
  const title = encrypted ? "thread" : threadLabel(thread);
  const safe = title.replace(/[^A-Za-z0-9._-]+/g, "-").replace(/^[-.]+|[-.]+$/g, "").slice(0, 60) || "thread";
  return `${safe}-${thread.threadId.slice(0, 8)}.${format}`;
}

async function askPassphrase(): Promise<string | undefined> {
  const first = await vscode.window.showInputBox({
    prompt: "A passphrase for the page (8 or more characters): it cannot be opened without it",
    password: true,
    validateInput: (value) => (value.length >= 8 ? undefined : "8 or more characters"),
  });
  if (first === undefined || first.length < 8) return undefined;
  const again = await vscode.window.showInputBox({ prompt: "The passphrase again", password: true });
  if (again !== first) {
    void vscode.window.showWarningMessage("The passphrases differ: nothing was exported.");
    return undefined;
  }
  return first;
}

/** Every part of the document, in order, handed to `write` as it arrives. */
export async function fetchExport(
  client: ExportClient,
  params: ExportParams,
  write: (data: Uint8Array) => Promise<void>,
): Promise<ResultOf<"thread/export">> {
  const encoder = new TextEncoder();
  let answer = await client.request("thread/export", params);
  const first = answer;
  await write(encoder.encode(answer.data));
  while (answer.nextCursor) {
    answer = await client.request("thread/export", { ...params, cursor: answer.nextCursor });
    await write(encoder.encode(answer.data));
  }
  return first;
}

/** Ask the format and the file, export, say where it went. Returns the file, or undefined if cancelled. */
export async function exportTranscript(client: ExportClient, thread: ThreadInfo): Promise<vscode.Uri | undefined> {
  const chosen = await vscode.window.showQuickPick(FORMATS, { placeHolder: `Export “${threadLabel(thread)}” as…` });
  if (!chosen) return undefined;
  const passphrase = chosen.encrypt ? await askPassphrase() : undefined;
  if (chosen.encrypt && passphrase === undefined) return undefined;
  const folder = vscode.workspace.workspaceFolders?.[0]?.uri;
  const name = defaultFileName(thread, chosen.format, chosen.encrypt);
  const target = await vscode.window.showSaveDialog({
    defaultUri: folder ? vscode.Uri.joinPath(folder, name) : undefined,
    filters: FILTERS[chosen.format],
    saveLabel: "Export",
    title: `Export transcript: ${threadLabel(thread)}`,
  });
  if (!target) return undefined;
  const params: ExportParams = { threadId: thread.threadId, format: chosen.format, ...(passphrase ? { passphrase } : {}) };
  await vscode.window.withProgress(
    { location: vscode.ProgressLocation.Notification, title: `Exporting “${threadLabel(thread)}”` },
    async () => {
      if (target.scheme === "file") {
        // Part by part into a file beside the target, renamed over it once whole.
        const { open, rename, rm } = await import("node:fs/promises");
        const partial = `${target.fsPath}.part`;
        const file = await open(partial, "w", 0o600);
        try {
          await fetchExport(client, params, async (data) => {
            await file.write(data);
          });
          await file.close();
          await rename(partial, target.fsPath);
        } catch (error) {
          await file.close().catch(() => undefined);
          await rm(partial, { force: true });
          throw error;
        }
      } else {
        // A remote workspace's file system takes the file whole.
        const parts: Uint8Array[] = [];
        await fetchExport(client, params, async (data) => {
          parts.push(data);
        });
        await vscode.workspace.fs.writeFile(target, Buffer.concat(parts));
      }
    },
  );
  void vscode.window.showInformationMessage(`Exported “${threadLabel(thread)}” to ${target.fsPath}.`);
  return target;
}
