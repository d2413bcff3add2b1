// "Resume in Claude Code" / "Resume in Codex" / …: an imported thread is continued by the agent
// that keeps the session, in an integrated terminal in the session's directory, running the
// agent's own resume command the server handed back (`handoff`).
import { accessSync, constants, statSync } from "node:fs";
import * as path from "node:path";
import * as vscode from "vscode";
import { agentName } from "./format";
import { AGENTS, type Handoff } from "./protocol";


export function resumeLabel(handoff: Handoff): string {
  return `Resume in ${agentName(handoff.agent)}`;
}

/** The program's path if it is an executable on PATH (with PATHEXT on Windows), else undefined. */
export function findExecutable(
  program: string,
  searchPath: string = process.env["PATH"] ?? "",
  platform: NodeJS.Platform = process.platform,
): string | undefined {
  const extensions = platform === "win32" ? (process.env["PATHEXT"] ?? ".EXE;.CMD;.BAT").split(";") : [""];
  const directories = program.includes(path.sep) ? [""] : searchPath.split(path.delimiter).filter(Boolean);
  for (const directory of directories) {
    for (const extension of extensions) {
      const candidate = path.join(directory, program + extension);
      try {
        accessSync(candidate, constants.X_OK);
        if (statSync(candidate).isFile()) return candidate;
      } catch {
        // not here
      }
    }
  }
  return undefined;
}

/** The argument list as one line a POSIX shell runs as is (ids and flags need no quotes). */
export function shellLine(argv: readonly string[]): string {
  return argv.map((arg) => (/^[\w@%+=:,./-]+$/.test(arg) ? arg : `'${arg.replace(/'/g, `'\\''`)}'`)).join(" ");
}

/**
 * Opens an integrated terminal in the session's directory running the agent's resume, or
 * says the agent is not installed (and how to install it) when its program is not on PATH.
 */
export async function resumeInAgent(handoff: Handoff): Promise<vscode.Terminal | undefined> {
  const name = agentName(handoff.agent);
  const program = handoff.command[0] ?? "";
  const install = AGENTS[handoff.agent]?.install; // how to install its CLI, when it is not on PATH
  if (!findExecutable(program)) {
    const choice = await vscode.window.showErrorMessage(
      `${name} is not installed here: \`${program}\` is not on PATH.${install ? ` Install it (${install}), then choose ${resumeLabel(handoff)} again.` : ""}`,
      ...(install ? ["Copy Install Command"] : []),
    );
    if (choice === "Copy Install Command" && install) await vscode.env.clipboard.writeText(install);
    return undefined;
  }
  const terminal = vscode.window.createTerminal({ name, ...(handoff.cwd ? { cwd: handoff.cwd } : {}) });
  terminal.show();
  terminal.sendText(shellLine(handoff.command));
  return terminal;
}
