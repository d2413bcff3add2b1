// The e2e run's baseline: a webview with nothing in it, opened by a key press and stamped the
// way the transcript is (the command's start in the extension host, the panel created, the
// document's script running, its first frame laid out; Date.now(): one machine clock). What
// it takes is VS Code's webview machinery alone: no server, no resources, no page to fetch.
const vscode = require("vscode");
const crypto = require("node:crypto");

let opened = 0;

function activate(context) {
  context.subscriptions.push(
    vscode.commands.registerCommand("sessiondE2e.openEmptyWebview", () => {
      const requestedAt = Date.now();
      const number = ++opened;
      const panel = vscode.window.createWebviewPanel("sessiondE2e.empty", `Empty webview ${number}`, vscode.ViewColumn.Active, { enableScripts: true });
      const nonce = crypto.randomBytes(16).toString("base64");
      const stamps = JSON.stringify({ requestedAt, panelAt: Date.now() });
      panel.webview.html = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'nonce-${nonce}';">
<title>Empty webview ${number}</title>
</head>
<body data-empty-webview="${number}" data-opened='${stamps}'>
<script nonce="${nonce}">
document.body.dataset.scriptAt = String(Date.now());
requestAnimationFrame(() => (document.body.dataset.shownAt = String(Date.now())));
</script>
</body>
</html>`;
    }),
  );
}

module.exports = { activate };
