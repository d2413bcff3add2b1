// One self-contained file, dist/extension.js: vscode-jsonrpc is bundled in, `vscode` is the host's.
import { build } from "esbuild";

const result = await build({
  entryPoints: ["src/extension.ts"],
  outfile: "dist/extension.js",
  bundle: true,
  platform: "node",
  target: "node18",
  format: "cjs",
  external: ["vscode"],
  minify: true,
  sourcemap: false,
  metafile: true,
  logLevel: "warning",
});
const bytes = Object.values(result.metafile.outputs).reduce((sum, output) => sum + output.bytes, 0);
console.error(`dist/extension.js: ${(bytes / 1024).toFixed(1)} KiB`);
