// The generated types carry the protocol's field descriptions, so an editor shows what a
// field means where it is used, and every model stays one named type.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";

const root = join(__dirname, "..", "..", "..");
const generated = readFileSync(join(root, "src", "protocol.generated.ts"), "utf8");
const schema = JSON.parse(readFileSync(join(root, "..", "protocol", "schema.json"), "utf8"));

describe("generated protocol types", () => {
  it("put each field's description in JSDoc right above the field", () => {
    const description: string = schema.$defs.ThreadInfo.properties.costUsd.description;
    assert.ok(description.includes("USD"));
    assert.ok(generated.includes(`   * ${description}\n   */\n  costUsd?: number;`));
    const role: string = schema.$defs.MessageItem.properties.role.description;
    assert.ok(generated.includes(`   * ${role}\n   */\n  role: "user" | "assistant" | "system" | "tool";`));
  });

  it("keep one interface per model, referenced where a field has its own description", () => {
    assert.equal(generated.match(/^export interface ThreadInfo\d* \{/gm)?.length, 1);
    assert.match(generated, /The thread as it stands now\.\n {3}\*\/\n {2}thread: ThreadInfo;/);
  });
});
