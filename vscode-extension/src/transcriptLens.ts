// "Load earlier messages" at the top of a transcript whose older part is not loaded yet: a
// resume shows the newest messages at once, and earlier ones come a page at a time.
import * as vscode from "vscode";
import { LOAD_EARLIER } from "./documents";
import type { SessionController } from "./sessions";

export const LOAD_EARLIER_COMMAND = "sessiond.loadEarlierMessages";

export class EarlierMessagesLens implements vscode.CodeLensProvider {
  readonly onDidChangeCodeLenses: vscode.Event<void>;

  constructor(private readonly sessions: SessionController) {
    this.onDidChangeCodeLenses = sessions.onDidChangeTranscripts;
  }

  provideCodeLenses(document: vscode.TextDocument): vscode.CodeLens[] {
    const threadId = /^\/transcript\/([^/]+)\//.exec(document.uri.path)?.[1]; // see transcriptPath
    const transcript = threadId === undefined ? undefined : this.sessions.transcriptOf(threadId);
    if (!transcript || transcript.earlier === null) return [];
    const command = { title: LOAD_EARLIER, command: LOAD_EARLIER_COMMAND, arguments: [threadId] };
    return [new vscode.CodeLens(new vscode.Range(0, 0, 0, 0), command)];
  }
}
