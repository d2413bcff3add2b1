// A stand-in for the `vscode` module (no VS Code binary exists here). It implements the
// slice of the API the extension uses, records what the user would see, and lets a test
// choose the button a dialog returns.
import Module from "node:module";
import * as path from "node:path";

type Listener<T> = (value: T) => unknown;

export class EventEmitter<T> {
  private listeners = new Set<Listener<T>>();
  event = (listener: Listener<T>) => {
    this.listeners.add(listener);
    return { dispose: () => this.listeners.delete(listener) };
  };
  fire(value: T): void {
    for (const listener of [...this.listeners]) listener(value);
  }
  dispose(): void {
    this.listeners.clear();
  }
}

export enum TreeItemCollapsibleState {
  None = 0,
  Collapsed = 1,
  Expanded = 2,
}

export class ThemeIcon {
  constructor(readonly id: string) {}
}

export class MarkdownString {
  constructor(readonly value: string = "") {}
}

export class TreeItem {
  id?: string;
  description?: string;
  tooltip?: unknown;
  iconPath?: unknown;
  contextValue?: string;
  command?: { command: string; title: string; arguments?: unknown[] };
  constructor(
    readonly label: string,
    readonly collapsibleState: TreeItemCollapsibleState = TreeItemCollapsibleState.None,
  ) {}
}

export class Uri {
  private constructor(
    readonly scheme: string,
    readonly path: string,
  ) {}
  static from(parts: { scheme: string; path: string }): Uri {
    return new Uri(parts.scheme, parts.path);
  }
  static file(fsPath: string): Uri {
    return new Uri("file", fsPath);
  }
  static joinPath(base: Uri, ...parts: string[]): Uri {
    return new Uri(base.scheme, path.posix.join(base.path, ...parts));
  }
  get fsPath(): string {
    return this.path;
  }
  toString(): string {
    return `${this.scheme}:${this.path}`;
  }
}

export class Position {
  constructor(
    readonly line: number,
    readonly character: number,
  ) {}
}

export class Range {
  readonly start: Position;
  readonly end: Position;
  constructor(startLine: number, startCharacter: number, endLine: number, endCharacter: number) {
    this.start = new Position(startLine, startCharacter);
    this.end = new Position(endLine, endCharacter);
  }
}

export class Selection extends Range {}

export enum TextEditorRevealType {
  Default = 0,
  InCenter = 1,
  InCenterIfOutsideViewport = 2,
  AtTop = 3,
}

export class CodeLens {
  constructor(
    readonly range: Range,
    readonly command?: { title: string; command: string; arguments?: unknown[] },
  ) {}
}

interface CodeLensProvider {
  provideCodeLenses(document: { uri: Uri }): CodeLens[];
  onDidChangeCodeLenses?: (listener: () => unknown) => { dispose(): unknown };
}

export enum ViewColumn {
  Active = -1,
  Beside = -2,
  One = 1,
}

/** A webview panel the extension opened: its HTML, what it posted, and a way to answer as its script. */
export class WebviewPanel {
  title: string;
  iconPath: unknown;
  active = true;
  disposed = false;
  revealed = 0;
  readonly posted: unknown[] = [];
  private readonly received = new Set<(message: unknown) => unknown>();
  private readonly disposeListeners = new Set<() => unknown>();
  private readonly viewStateListeners = new Set<(event: { webviewPanel: WebviewPanel }) => unknown>();
  readonly webview = {
    html: "",
    cspSource: "stub-webview:",
    asWebviewUri: (uri: Uri) => Uri.from({ scheme: "stub-webview", path: uri.path }),
    postMessage: async (message: unknown) => {
      this.posted.push(message);
      return true;
    },
    onDidReceiveMessage: (listener: (message: unknown) => unknown) => {
      this.received.add(listener);
      return { dispose: () => this.received.delete(listener) };
    },
  };
  constructor(
    readonly viewType: string,
    title: string,
    readonly options: unknown,
  ) {
    this.title = title;
  }
  /** The webview's script sends `message`; resolves once the extension handled it. */
  async send(message: unknown): Promise<void> {
    await Promise.all([...this.received].map((listener) => listener(message)));
  }
  onDidDispose(listener: () => unknown) {
    this.disposeListeners.add(listener);
    return { dispose: () => this.disposeListeners.delete(listener) };
  }
  onDidChangeViewState(listener: (event: { webviewPanel: WebviewPanel }) => unknown) {
    this.viewStateListeners.add(listener);
    return { dispose: () => this.viewStateListeners.delete(listener) };
  }
  reveal(): void {
    this.revealed++;
  }
  /** The user closed the tab. */
  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    for (const listener of [...this.disposeListeners]) listener();
  }
}

export enum StatusBarAlignment {
  Left = 1,
  Right = 2,
}

export enum ProgressLocation {
  Notification = 15,
}

export interface MessageItem {
  title: string;
  isCloseAffordance?: boolean;
}

/** One dialog the extension showed: what a user would have read, and the buttons offered. */
export interface ShownMessage {
  severity: "information" | "warning" | "error";
  message: string;
  modal: boolean;
  detail: string | undefined;
  buttons: string[];
}

export interface ShownDocument {
  uri: string;
  text: string;
  languageId: string;
  /** The line the extension scrolled to after showing it (undefined: left where it was). */
  revealedLine?: number;
  cursorLine?: number;
}

/** An integrated terminal the extension opened: where, and what it typed into it. */
export interface OpenedTerminal {
  name: string | undefined;
  cwd: string | undefined;
  shown: boolean;
  sent: string[];
}

type Answer = (shown: ShownMessage) => string | undefined;

/** The world as the stub sees it; tests read and script it through `vscodeStub`. */
export const vscodeStub = {
  messages: [] as ShownMessage[],
  documents: [] as ShownDocument[],
  /** The code lenses VS Code would draw on a document, from every provider for its scheme. */
  codeLensesOf(uriText: string): CodeLens[] {
    const [scheme, ...rest] = uriText.split(":");
    const uri = Uri.from({ scheme: scheme!, path: rest.join(":") });
    return this.codeLensProviders.filter((entry) => entry.selector.scheme === uri.scheme).flatMap((entry) => entry.provider.provideCodeLenses({ uri }));
  },
  /** Chooses the button for each next dialog; without one the user dismisses it (Cancel). */
  answers: [] as Answer[],
  inputs: [] as (string | undefined)[],
  quickPicks: [] as ((items: { label: string }[]) => { label: string } | undefined)[],
  /** Chooses the file of each next save dialog (given its options); without one: Cancel. */
  saveDialogs: [] as ((options: { defaultUri?: Uri; filters?: Record<string, string[]> }) => Uri | undefined)[],
  /** Every `createQuickPick` made, in order. */
  createdQuickPicks: [] as QuickPick<{ label: string }>[],
  progress: [] as { title: string; reports: unknown[]; done: boolean }[],
  webviewPanels: [] as WebviewPanel[],
  /** Commands run through executeCommand that no test registered (vscode.diff, ...). */
  executed: [] as { command: string; args: unknown[] }[],
  terminals: [] as OpenedTerminal[],
  commands: new Map<string, (...args: unknown[]) => unknown>(),
  context: new Map<string, unknown>(),
  configuration: new Map<string, unknown>(),
  statusBarItems: [] as StatusBarItem[],
  treeViews: new Map<string, TreeView>(),
  contentProviders: new Map<string, { provideTextDocumentContent(uri: Uri): string | Promise<string> }>(),
  codeLensProviders: [] as { selector: { scheme: string }; provider: CodeLensProvider }[],
  workspaceFolders: [] as { uri: Uri; name: string; index: number }[],
  isTrusted: true,
  clipboard: "",
  reset(): void {
    this.messages = [];
    this.documents = [];
    this.answers = [];
    this.inputs = [];
    this.quickPicks = [];
    this.saveDialogs = [];
    this.createdQuickPicks = [];
    this.progress = [];
    this.webviewPanels = [];
    this.executed = [];
    this.terminals = [];
    this.commands.clear();
    this.context.clear();
    this.configuration.clear();
    this.statusBarItems = [];
    this.treeViews.clear();
    this.contentProviders.clear();
    this.codeLensProviders = [];
    this.workspaceFolders = [];
    this.isTrusted = true;
  },
  setWorkspaceFolders(paths: string[]): void {
    this.workspaceFolders = paths.map((fsPath, index) => ({ uri: Uri.file(fsPath), name: path.basename(fsPath), index }));
  },
};

class StatusBarItem {
  text = "";
  tooltip: string | undefined;
  command: string | undefined;
  visible = false;
  show(): void {
    this.visible = true;
  }
  hide(): void {
    this.visible = false;
  }
  dispose(): void {
    this.visible = false;
  }
}

/** `window.createQuickPick`: what it shows, and the user's typing and choice. */
export class QuickPick<T extends { label: string }> {
  items: T[] = [];
  selectedItems: T[] = [];
  value = "";
  title: string | undefined;
  placeholder: string | undefined;
  busy = false;
  matchOnDescription = false;
  matchOnDetail = false;
  shown = false;
  disposed = false;
  private readonly changedValue = new EventEmitter<string>();
  private readonly accepted = new EventEmitter<void>();
  private readonly hidden = new EventEmitter<void>();
  onDidChangeValue = this.changedValue.event;
  onDidAccept = this.accepted.event;
  onDidHide = this.hidden.event;
  show(): void {
    this.shown = true;
  }
  hide(): void {
    this.shown = false;
    this.hidden.fire();
  }
  dispose(): void {
    this.disposed = true;
  }
  /** The user types `value` (VS Code fires a change per keystroke). */
  type(value: string): void {
    this.value = value;
    this.changedValue.fire(value);
  }
  /** The user picks `item` with Enter. */
  accept(item: T): void {
    this.selectedItems = [item];
    this.accepted.fire();
  }
}

class TreeView {
  message: string | undefined;
  description: string | undefined;
  title: string | undefined;
  constructor(readonly provider: unknown) {}
  dispose(): void {}
}

function showMessage(severity: ShownMessage["severity"], message: string, ...rest: unknown[]): Promise<unknown> {
  let modal = false;
  let detail: string | undefined;
  const first = rest[0];
  if (first && typeof first === "object" && !("title" in first)) {
    const options = rest.shift() as { modal?: boolean; detail?: string };
    modal = options.modal ?? false;
    detail = options.detail;
  }
  const items = rest as (string | MessageItem)[];
  const titleOf = (item: string | MessageItem) => (typeof item === "string" ? item : item.title);
  const shown: ShownMessage = { severity, message, modal, detail, buttons: items.map(titleOf) };
  vscodeStub.messages.push(shown);
  const answer = vscodeStub.answers.shift();
  const chosen = answer?.(shown);
  return Promise.resolve(items.find((item) => titleOf(item) === chosen));
}

export const window = {
  createOutputChannel: () => ({ appendLine: () => undefined, dispose: () => undefined }),
  createTreeView: (id: string, options: { treeDataProvider: unknown }) => {
    const view = new TreeView(options.treeDataProvider);
    vscodeStub.treeViews.set(id, view);
    return view;
  },
  createStatusBarItem: () => {
    const item = new StatusBarItem();
    vscodeStub.statusBarItems.push(item);
    return item;
  },
  showInformationMessage: (message: string, ...rest: unknown[]) => showMessage("information", message, ...rest),
  showWarningMessage: (message: string, ...rest: unknown[]) => showMessage("warning", message, ...rest),
  showErrorMessage: (message: string, ...rest: unknown[]) => showMessage("error", message, ...rest),
  showInputBox: async () => vscodeStub.inputs.shift(),
  showQuickPick: async (items: { label: string }[]) => vscodeStub.quickPicks.shift()?.(items),
  showSaveDialog: async (options: { defaultUri?: Uri; filters?: Record<string, string[]> }) => vscodeStub.saveDialogs.shift()?.(options),
  createQuickPick: () => {
    const pick = new QuickPick<{ label: string }>();
    vscodeStub.createdQuickPicks.push(pick);
    return pick;
  },
  showWorkspaceFolderPick: async () => vscodeStub.workspaceFolders[0],
  showTextDocument: async (document: { uri: Uri; getText(): string; languageId: string }) => {
    const shown: ShownDocument = { uri: document.uri.toString(), text: document.getText(), languageId: document.languageId };
    vscodeStub.documents.push(shown);
    return {
      set selection(selection: Selection) {
        shown.cursorLine = selection.start.line;
      },
      revealRange: (range: Range) => {
        shown.revealedLine = range.start.line;
      },
    };
  },
  createWebviewPanel: (viewType: string, title: string, _column: unknown, options: unknown) => {
    const panel = new WebviewPanel(viewType, title, options);
    vscodeStub.webviewPanels.push(panel);
    return panel;
  },
  createTerminal: (options: { name?: string; cwd?: string }) => {
    const opened: OpenedTerminal = { name: options.name, cwd: options.cwd, shown: false, sent: [] };
    vscodeStub.terminals.push(opened);
    return {
      show: () => {
        opened.shown = true;
      },
      sendText: (text: string) => opened.sent.push(text),
      dispose: () => undefined,
    };
  },
  withProgress: async (options: { title: string }, task: (progress: { report(v: unknown): void }) => Promise<unknown>) => {
    const entry = { title: options.title, reports: [] as unknown[], done: false };
    vscodeStub.progress.push(entry);
    await task({ report: (value) => entry.reports.push(value) });
    entry.done = true;
  },
};

const noEvent = () => ({ dispose: () => undefined });

export const workspace = {
  get workspaceFolders() {
    return vscodeStub.workspaceFolders.length ? vscodeStub.workspaceFolders : undefined;
  },
  get isTrusted() {
    return vscodeStub.isTrusted;
  },
  getConfiguration: (section: string) => ({
    get: <T>(key: string): T | undefined => vscodeStub.configuration.get(`${section}.${key}`) as T | undefined,
  }),
  registerTextDocumentContentProvider: (scheme: string, provider: { provideTextDocumentContent(uri: Uri): string | Promise<string> }) => {
    vscodeStub.contentProviders.set(scheme, provider);
    return { dispose: () => vscodeStub.contentProviders.delete(scheme) };
  },
  openTextDocument: async (uri: Uri) => {
    const provider = vscodeStub.contentProviders.get(uri.scheme);
    if (!provider) throw new Error(`no content provider for ${uri.scheme}`);
    const text = await provider.provideTextDocumentContent(uri);
    return { uri, getText: () => text, isUntitled: false, languageId: "plaintext" };
  },
  createFileSystemWatcher: () => ({ onDidChange: noEvent, onDidCreate: noEvent, onDidDelete: noEvent, dispose: () => undefined }),
  onDidChangeWorkspaceFolders: noEvent,
  // A document's text is read from its provider each time it is opened: it never changes later.
  onDidChangeTextDocument: noEvent,
  onDidGrantWorkspaceTrust: noEvent,
  onDidChangeConfiguration: noEvent,
};

export const languages = {
  registerCodeLensProvider: (selector: { scheme: string }, provider: CodeLensProvider) => {
    const entry = { selector, provider };
    vscodeStub.codeLensProviders.push(entry);
    return { dispose: () => (vscodeStub.codeLensProviders = vscodeStub.codeLensProviders.filter((e) => e !== entry)) };
  },
  setTextDocumentLanguage: async <D extends { languageId: string }>(document: D, languageId: string): Promise<D> => ({ ...document, languageId }),
};

export const commands = {
  registerCommand: (id: string, handler: (...args: unknown[]) => unknown) => {
    vscodeStub.commands.set(id, handler);
    return { dispose: () => vscodeStub.commands.delete(id) };
  },
  executeCommand: async (id: string, ...args: unknown[]) => {
    if (id === "setContext") {
      vscodeStub.context.set(args[0] as string, args[1]);
      return undefined;
    }
    const handler = vscodeStub.commands.get(id);
    if (!handler) {
      vscodeStub.executed.push({ command: id, args });
      return undefined;
    }
    return handler(...args);
  },
};

export const env = {
  clipboard: {
    writeText: async (text: string) => {
      vscodeStub.clipboard = text;
    },
  },
};

/** Makes `require("vscode")` return this module. Import this before any extension module. */
const loader = Module as unknown as { _load: (request: string, ...rest: unknown[]) => unknown };
const originalLoad = loader._load;
loader._load = function load(request: string, ...rest: unknown[]) {
  if (request === "vscode") return module.exports;
  return originalLoad.call(this, request, ...rest);
};
