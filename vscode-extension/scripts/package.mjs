// `vsce package`, then a check that the .vsix holds the bundle and nothing it does not need.
import { execFileSync } from "node:child_process";
import { readFileSync, statSync } from "node:fs";

const { name, version, repository } = JSON.parse(readFileSync("package.json", "utf8"));
const vsix = `${name}-${version}.vsix`;
// The README's screenshots stay out of the .vsix: its links point at them in the repository,
// under this folder (vsce alone would point at the repository's root).
const repo = repository.url.replace(/\.git$/, "");
const links = ["--baseImagesUrl", `${repo}/raw/HEAD/vscode-extension`, "--baseContentUrl", `${repo}/blob/HEAD/vscode-extension`];
execFileSync("npx", ["vsce", "package", "--no-dependencies", "--allow-missing-repository", ...links, "--out", vsix], {
  stdio: ["ignore", "inherit", "inherit"],
});
// A .vsix is a zip; list it with Python's zipfile, which every sessiond machine has.
const listing = execFileSync("python3", ["-c", "import sys, zipfile; print('\\n'.join(zipfile.ZipFile(sys.argv[1]).namelist()))", vsix], {
  encoding: "utf8",
})
  .trim()
  .split("\n");
const expected = new Set([
  "extension.vsixmanifest",
  "[Content_Types].xml",
  "extension/package.json",
  "extension/readme.md",
  "extension/LICENSE.txt",
  "extension/dist/extension.js",
  "extension/dist/webview.js",
  "extension/dist/webview.css",
  "extension/media/threads.svg",
]);
const unexpected = listing.filter((entry) => !expected.has(entry));
const missing = [...expected].filter((entry) => !listing.includes(entry));
if (unexpected.length || missing.length) {
  console.error(`${vsix} content is wrong.\n  unexpected: ${unexpected.join(", ") || "-"}\n  missing: ${missing.join(", ") || "-"}`);
  process.exit(1);
}
console.error(`${vsix}: ${(statSync(vsix).size / 1024).toFixed(1)} KiB, ${listing.length} files: ${listing.join(", ")}`);
