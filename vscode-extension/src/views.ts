// The small views a resume fills: read-only documents, the Todos tree, the cost status item.
import * as vscode from "vscode";
import { formatTokens, formatUsd } from "./format";
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

  async show(path: string, content: string): Promise<vscode.Uri> {
    const uri = vscode.Uri.from({ scheme: DOCUMENT_SCHEME, path });
    this.contents.set(uri.path, content);
    this.changed.fire(uri);
    let document = await vscode.workspace.openTextDocument(uri);
    // The path ends in the thread's title, not ".md": the language is set here instead.
    if (document.languageId !== "markdown") document = await vscode.languages.setTextDocumentLanguage(document, "markdown");
    await vscode.window.showTextDocument(document, { preview: false });
    return uri;
  }

  contentOf(path: string): string | undefined {
    return this.contents.get(path);
  }
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
    if (!cost) {
      this.item.hide();
      return;
    }
    this.item.text = `$(credit-card) ${formatUsd(cost.usd)}`;
    this.item.tooltip = `Thread cost across all its sessions: ${formatUsd(cost.usd)} · ${formatTokens(cost.inputTokens)} tokens in, ${formatTokens(cost.outputTokens)} out`;
    this.item.show();
  }

  dispose(): void {
    this.item.dispose();
  }
}
