// Self-contained files in dist/: extension.js (vscode-jsonrpc, ws and markdown-it bundled
// in, `vscode` is the host's; ws's optional native speed-ups are left out: it runs without), and the transcript webview's script and stylesheet.
import { build } from "esbuild";

const common = { bundle: true, minify: true, sourcemap: false, metafile: true, logLevel: "warning" };
const results = await Promise.all([
  build({ ...common, entryPoints: ["src/extension.ts"], outfile: "dist/extension.js", platform: "node", target: "node18", format: "cjs", external: ["vscode", "bufferutil", "utf-8-validate"] }),
  build({ ...common, entryPoints: ["src/webview/main.ts"], outfile: "dist/webview.js", platform: "browser", target: "chrome108", format: "iife" }),
  build({ ...common, entryPoints: ["src/webview/transcript.css"], outfile: "dist/webview.css" }),
]);
for (const result of results) {
  for (const [file, output] of Object.entries(result.metafile.outputs)) console.error(`${file}: ${(output.bytes / 1024).toFixed(1)} KiB`);
}
