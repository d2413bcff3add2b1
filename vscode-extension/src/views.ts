// The small views a resume fills: read-only documents, the Todos tree, the cost status item.
import * as vscode from "vscode";
import { costStatusText, formatTokens, formatUsd } from "./format";
import type { CostState, TodoEntryState } from "./protocol";

export const DOCUMENT_SCHEME = "sessiond";

/** Transcripts and restore reports: text from the server, never editable or saved; a tab
 * is named by its path's last segment (see transcriptPath). */
export class ReadOnlyDocuments implements vscode.TextDocumentContentProvider {
  private readonly contents = new Map<string, string>();
  private readonly changed = new vscode.EventEmitter<vscode.Uri>();
  readonly onDidChange = this.changed.event;

  provideTextDocumentContent(uri: vscode.Uri): string {
    return this.contents.get(uri.path) ?? "";
  }

  /** Opens (or updates) the document and shows it; with `revealEnd`, its last line is on
   * screen and the cursor there; without, the editor stays where it was scrolled. */
  async show(path: string, content: string, { revealEnd = false } = {}): Promise<vscode.Uri> {
    const uri = vscode.Uri.from({ scheme: DOCUMENT_SCHEME, path });
    this.contents.set(uri.path, content);
    this.changed.fire(uri);
    let document = await vscode.workspace.openTextDocument(uri);
    // The path ends in the thread's title, not ".md": the language is set here instead.
    if (document.languageId !== "markdown") document = await vscode.languages.setTextDocumentLanguage(document, "markdown");
    const editor = await vscode.window.showTextDocument(document, { preview: false });
    if (revealEnd) {
      await holding(document, content);
      const lines = content.split("\n");
      const line = lines.length - 1;
      const character = lines[line]!.length;
      editor.selection = new vscode.Selection(line, character, line, character);
      editor.revealRange(new vscode.Range(line, character, line, character), vscode.TextEditorRevealType.Default);
    }
    return uri;
  }

  contentOf(path: string): string | undefined {
    return this.contents.get(path);
  }
}

/**
 * Resolves once `document` holds `content`. A document already open takes new text from its
 * provider a moment after `onDidChange` (VS Code fetches and applies it); revealing its end
 * before that would scroll to the end of the old text.
 */
function holding(document: vscode.TextDocument, content: string): Promise<void> {
  const holds = () => document.getText().replace(/\r\n/g, "\n") === content;
  if (holds()) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      listener.dispose();
      clearTimeout(guard);
      resolve();
    };
    const listener = vscode.workspace.onDidChangeTextDocument((event) => {
      if (event.document === document && holds()) done();
    });
    // A newer show may replace the text before this one lands: then reveal the end anyway.
    const guard = setTimeout(done, 2000);
  });
}

const TODO_ICONS: Record<TodoEntryState["status"], string> = {
  pending: "circle-large-outline",
  in_progress: "arrow-circle-right",
  completed: "pass",
};

export class TodosTreeProvider implements vscode.TreeDataProvider<TodoEntryState> {
  private readonly changed = new vscode.EventEmitter<TodoEntryState | undefined>();
  readonly onDidChangeTreeData = this.changed.event;
  private todos: TodoEntryState[] = [];

  set(todos: TodoEntryState[]): void {
    this.todos = todos;
    this.changed.fire(undefined);
  }

  getChildren(node?: TodoEntryState): TodoEntryState[] {
    return node ? [] : this.todos;
  }

  getTreeItem(todo: TodoEntryState): vscode.TreeItem {
    const item = new vscode.TreeItem(todo.content, vscode.TreeItemCollapsibleState.None);
    item.iconPath = new vscode.ThemeIcon(TODO_ICONS[todo.status]);
    item.description = todo.status.replace("_", " ");
    return item;
  }
}

export class CostStatusItem {
  readonly item = vscode.window.createStatusBarItem(vscode.StatusBarAlignment.Right, 100);

  constructor() {
    this.item.command = "sessiond.showRestoreReport";
  }

  show(cost: CostState | undefined): void {
    const text = cost && costStatusText(cost);
    if (!cost || !text) {
      this.item.hide();
      return;
    }
    this.item.text = `$(credit-card) ${text}`;
    this.item.tooltip = `Thread cost across all its sessions: ${formatUsd(cost.usd)} · ${formatTokens(cost.inputTokens)} tokens in, ${formatTokens(cost.outputTokens)} out`;
    this.item.show();
  }

  dispose(): void {
    this.item.dispose();
  }
}
