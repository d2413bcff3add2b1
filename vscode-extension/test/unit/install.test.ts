// What the extension tells a user about installing the server: only commands that work.
// sessiond is not on PyPI, so `pip install sessiond` (or `-U sessiond`) would fail for them.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { ResponseError } from "vscode-jsonrpc";
import { ServerStartError } from "../../src/client";
import { describeError } from "../../src/errors";
import { INSTALL_COMMAND, INSTALL_HINT } from "../../src/install";

const root = join(__dirname, "..", "..", "..");
const packageJson = JSON.parse(readFileSync(join(root, "package.json"), "utf8"));

const FROM_PYPI = /pip install (-U )?sessiond(?![-\w/.])/;

describe("install guidance", () => {
  it("says to install from a checkout or a wheel built from it, never from PyPI", () => {
    for (const message of [
      new ServerStartError(["sessiond", "serve", "--stdio"], true, "ENOENT").message,
      new ServerStartError(["sessiond", "serve", "--stdio"], false, "exit 1").message,
      describeError("resume the thread", new ResponseError(-32601, "unknown method", { kind: "MethodNotFound" })),
      packageJson.contributes.configuration.properties["sessiond.serverCommand"].markdownDescription,
      INSTALL_HINT,
      // The Threads view's welcome content while the server is missing.
      packageJson.contributes.viewsWelcome.find((entry: { when?: string }) => entry.when === "sessiond.serverProblem == missing").contents,
    ]) {
      assert.doesNotMatch(message, FROM_PYPI, message);
      assert.match(message, /pip install \/path\/to\/sessiond/, message);
    }
    assert.match(INSTALL_HINT, /checkout of the sessiond repository/);
    assert.match(INSTALL_HINT, /sessiond-<version>-py3-none-any\.whl/);
    assert.equal(INSTALL_COMMAND, "pip install /path/to/sessiond");
  });
});
