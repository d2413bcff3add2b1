// The usage view: `sessiond.showUsage` opens a webview with the chart by day and model and the
// table by project (usageHtml.ts), answered by the server's `usage/report` from its index.
import { randomBytes } from "node:crypto";
import * as vscode from "vscode";
import type { SessiondClient } from "./client";
import { usageHtml } from "./usageHtml";

export class UsagePanel {
  private panel: vscode.WebviewPanel | undefined;

  constructor(private readonly client: SessiondClient) {}

  /** Opens the view (or brings it forward) and fills it with the current report. */
  async show(): Promise<void> {
    if (!this.panel) {
      this.panel = vscode.window.createWebviewPanel("sessiond.usage", "sessiond Usage", vscode.ViewColumn.Active, {
        enableScripts: false,
        localResourceRoots: [],
      });
      this.panel.onDidDispose(() => (this.panel = undefined));
    } else {
      this.panel.reveal();
    }
    const [byModel, byProject] = await Promise.all([
      this.client.request("usage/report", { report: "daily", by: "model" }),
      this.client.request("usage/report", { report: "monthly", by: "project" }),
    ]);
    if (!this.panel) return;
    const nonce = randomBytes(16).toString("base64");
    this.panel.webview.html = usageHtml(byModel, byProject, { nonce, cspSource: this.panel.webview.cspSource });
  }

  dispose(): void {
    this.panel?.dispose();
  }
}
