// Generates src/protocol.generated.ts from ../protocol/schema.json (the wire contract), and
// package.json's "Resume in <Agent>" commands from the schema's agents (protocol/agents.py).
//   node scripts/protocol-types.mjs          write both files
//   node scripts/protocol-types.mjs --check  fail when a committed file is stale
import { readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { compile } from "json-schema-to-typescript";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const schemaPath = join(root, "..", "protocol", "schema.json");
const outputPath = join(root, "src", "protocol.generated.ts");
const manifestPath = join(root, "package.json");

/** `sessiond.resumeInClaudeCode` for `claude-code`: a command per agent (a title is fixed). */
export function resumeCommand(agentId) {
  return "sessiond.resumeIn" + agentId.split("-").map((part) => part[0].toUpperCase() + part.slice(1)).join("");
}

function isResume(entry) {
  return typeof entry?.command === "string" && entry.command.startsWith("sessiond.resumeIn");
}

/** The entries of `list` that are not resume commands, with `fresh` where the first one was. */
function replaced(list, fresh) {
  const at = list.findIndex(isResume);
  const kept = list.filter((entry) => !isResume(entry));
  const where = at < 0 ? kept.length : at;
  return [...kept.slice(0, where), ...fresh, ...kept.slice(where)];
}

/** package.json with one "Resume in <Agent>" command per agent, in the palette and the
 * transcript's title bar while that agent's thread is shown. */
export function renderManifest(schema, text) {
  const manifest = JSON.parse(text);
  const agents = Object.entries(schema.agents);
  const contributes = manifest.contributes;
  contributes.commands = replaced(
    contributes.commands,
    agents.map(([id, agent]) => ({ command: resumeCommand(id), title: `Resume in ${agent.name}`, category: "sessiond" })),
  );
  contributes.menus.commandPalette = replaced(
    contributes.menus.commandPalette,
    agents.map(([id]) => ({ command: resumeCommand(id), when: `sessiond.transcriptAgent == '${id}'` })),
  );
  contributes.menus["editor/title"] = replaced(
    contributes.menus["editor/title"],
    agents.map(([id]) => ({
      command: resumeCommand(id),
      when: `activeWebviewPanelId == 'sessiond.transcript' && sessiond.transcriptAgent == '${id}'`,
      group: "navigation@1",
    })),
  );
  // As the file is written: two spaces, everything past ASCII escaped.
  const json = JSON.stringify(manifest, null, 2).replace(/[\u007f-\uffff]/g, (c) => "\\u" + c.charCodeAt(0).toString(16).padStart(4, "0"));
  return json + "\n";
}

// pydantic titles every property ("Threadid"); json-schema-to-typescript would turn each
// into a pointless alias, so only the model names at the top of $defs keep theirs.
function withoutPropertyTitles(node) {
  if (Array.isArray(node)) return node.map(withoutPropertyTitles);
  if (node === null || typeof node !== "object") return node;
  const copy = {};
  for (const [key, value] of Object.entries(node)) {
    if (key === "title" && typeof value === "string") continue;
    copy[key] = withoutPropertyTitles(value);
  }
  return copy;
}

// pydantic writes `Any` as a schema with no type at all; json-schema-to-typescript would
// call that an object, but it is any JSON value.
const TYPE_KEYWORDS = ["type", "$ref", "anyOf", "oneOf", "allOf", "enum", "const", "items", "properties"];
function withAnyAsUnknown(node) {
  if (Array.isArray(node)) return node.map(withAnyAsUnknown);
  if (node === null || typeof node !== "object") return node;
  const copy = {};
  for (const [key, value] of Object.entries(node)) copy[key] = withAnyAsUnknown(value);
  if (copy.properties) {
    for (const [name, property] of Object.entries(copy.properties)) {
      if (!TYPE_KEYWORDS.some((keyword) => keyword in property)) copy.properties[name] = { ...property, tsType: "unknown" };
    }
  }
  return copy;
}

// A property that is a `$ref` with a description beside it would be inlined as a copy of
// the referenced type (ThreadInfo1, ThreadInfo2, ...); as `allOf: [$ref]` it stays a
// reference to the one named type, and the description still becomes its JSDoc.
function withDescribedRefsKept(node) {
  if (Array.isArray(node)) return node.map(withDescribedRefsKept);
  if (node === null || typeof node !== "object") return node;
  const copy = {};
  for (const [key, value] of Object.entries(node)) copy[key] = withDescribedRefsKept(value);
  if (typeof copy.$ref === "string" && Object.keys(copy).length > 1) {
    const { $ref, ...siblings } = copy;
    return { ...siblings, allOf: [{ $ref }] };
  }
  return copy;
}

function typeOfRef(ref) {
  return ref === null ? "null" : ref.$ref.split("/").pop();
}

function methodMap(name, entries, render) {
  const lines = Object.entries(entries).map(([method, entry]) => `  "${method}": ${render(entry)};`);
  return `export interface ${name} {\n${lines.join("\n")}\n}\n`;
}

export async function render() {
  const schema = JSON.parse(readFileSync(schemaPath, "utf8"));
  const defs = {};
  for (const [name, def] of Object.entries(schema.$defs)) {
    defs[name] = { ...withDescribedRefsKept(withAnyAsUnknown(withoutPropertyTitles(def))), title: name };
  }
  const types = await compile(
    { title: "ProtocolDefinitions", type: "object", additionalProperties: false, $defs: defs },
    "ProtocolDefinitions",
    { bannerComment: "", unreachableDefinitions: true, additionalProperties: true, format: true },
  );
  const requests = methodMap(
    "ProtocolRequests",
    schema.requests,
    (entry) => `{ params: ${typeOfRef(entry.params)}; result: ${typeOfRef(entry.result)} }`,
  );
  const clientNotifications = methodMap("ProtocolClientNotifications", schema.clientNotifications, typeOfRef);
  const serverNotifications = methodMap("ProtocolServerNotifications", schema.serverNotifications, typeOfRef);
  const errorKinds = Object.keys(schema.errors).map((kind) => JSON.stringify(kind)).join(" | ");
  // The "referenced by" notes json-schema-to-typescript adds say nothing a reader needs.
  const tidyTypes = types
    .replace(/^ \* This interface was referenced by .*\n \* via the `definition` .*\n/gm, "")
    .replace(/^\/\*\*\n \*\/\n/gm, "")
    .replace(/\n \*\n \*\//g, "\n */")
    .replace(/^export interface ProtocolDefinitions \{\}\n/m, "");
  const agents = Object.fromEntries(
    Object.entries(schema.agents).map(([id, agent]) => [id, { ...agent, resumeCommand: resumeCommand(id) }]),
  );
  return [
    "// Generated by scripts/protocol-types.mjs from ../protocol/schema.json; do not edit by hand.",
    "// `npm run generate` rewrites it; `npm test` fails when it is stale.",
    "",
    `export const PROTOCOL_VERSION = ${schema.protocolVersion};`,
    "",
    "/** The agents whose sessions are imported (protocol/agents.py): what a person calls each,",
    " * its command-line name, how to install its CLI, and its \"Resume in\" command. */",
    `export const AGENTS: Readonly<Record<string, { name: string; flag: string; install: string; resumeCommand: string }>> = ${JSON.stringify(agents, null, 2)};`,
    "",
    `export type ErrorKind = ${errorKinds};`,
    "",
    tidyTypes.trimEnd(),
    "",
    requests,
    clientNotifications,
    serverNotifications,
  ].join("\n");
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const fresh = await render();
  const manifestText = readFileSync(manifestPath, "utf8");
  const manifest = renderManifest(JSON.parse(readFileSync(schemaPath, "utf8")), manifestText);
  if (process.argv.includes("--check")) {
    if (manifest !== manifestText) {
      console.error("package.json's Resume commands are not the schema's agents: run `npm run generate` and commit it.");
      process.exit(1);
    }
    const committed = readFileSync(outputPath, "utf8");
    if (committed !== fresh) {
      const tmp = join((await import("node:os")).tmpdir(), `protocol.generated.${process.pid}.ts`);
      writeFileSync(tmp, fresh);
      const { spawnSync } = await import("node:child_process");
      spawnSync("diff", ["-u", outputPath, tmp], { stdio: "inherit" });
      console.error("src/protocol.generated.ts is stale: run `npm run generate` and commit it.");
      process.exit(1);
    }
    console.error("src/protocol.generated.ts matches ../protocol/schema.json");
  } else {
    writeFileSync(outputPath, fresh);
    writeFileSync(manifestPath, manifest);
    console.error(`wrote ${outputPath} and ${manifestPath}`);
  }
}
