// Plain Chromium, no VS Code: how long a service worker takes to control a page in a browser
// just started, in the shape of VS Code's webview host — a page controlled by a root-scoped
// worker with an empty fetch handler (code-server's own) embeds an iframe under /sub/ that
// registers its own worker there (skipWaiting, clients.claim) and waits for controllerchange
// (VS Code's pre/index.html). Three fresh browsers, three pages each: register → controlled.
//
//   node bench/plain-service-worker.mjs
import { createRequire } from "node:module";
import http from "node:http";
import { ensureTools } from "../test/e2e/tools.mjs";
const tools = ensureTools();
const { chromium } = createRequire(import.meta.url)(tools.playwright);
const top = `<!doctype html><script>
navigator.serviceWorker.register('/root-sw.js').then(() => navigator.serviceWorker.ready).then(() => { window.rootReady = true; });
window.openFrame = () => { const f = document.createElement('iframe'); f.src = '/sub/index.html?' + Math.random(); document.body.appendChild(f); };
</script><body></body>`;
const sub = `<!doctype html><script>
const t0 = performance.now();
navigator.serviceWorker.register('sw.js?v=1').then(async (reg) => {
  const t1 = performance.now();
  if (!navigator.serviceWorker.controller || reg.installing || reg.waiting) await new Promise((r) => navigator.serviceWorker.addEventListener('controllerchange', r, { once: true }));
  parent.done = { register: Math.round(t1 - t0), controlled: Math.round(performance.now() - t0) };
});
</script>`;
const rootSw = `self.addEventListener('install', () => {}); self.addEventListener('activate', (e) => e.waitUntil(self.clients.claim())); self.addEventListener('fetch', () => {});`;
const subSw = `self.addEventListener('install', (e) => e.waitUntil(self.skipWaiting())); self.addEventListener('activate', (e) => e.waitUntil(self.clients.claim()));`;
const server = http.createServer((req, res) => {
  const js = (body) => { res.writeHead(200, { "content-type": "text/javascript" }); res.end(body); };
  if (req.url.startsWith("/root-sw.js")) return js(rootSw);
  if (req.url.startsWith("/sub/sw.js")) return js(subSw);
  res.writeHead(200, { "content-type": "text/html" });
  res.end(req.url.startsWith("/sub/") ? sub : top);
});
await new Promise((r) => server.listen(0, "127.0.0.1", r));
const url = `http://127.0.0.1:${server.address().port}/`;
const FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"];
for (let b = 0; b < 3; b++) {
  const browser = await chromium.launch({ executablePath: tools.chromium, args: FLAGS });
  const out = [];
  for (let p = 0; p < 3; p++) {
    const w = await browser.newPage();
    await w.goto(url);
    await w.waitForFunction(() => window.rootReady, null, { timeout: 30000 });
    await w.waitForTimeout(500);
    await w.evaluate(() => window.openFrame());
    await w.waitForFunction(() => window.done, null, { timeout: 30000 });
    out.push(await w.evaluate(() => window.done));
    await w.close();
  }
  console.log(`browser ${b}:`, JSON.stringify(out));
  await browser.close();
}
server.close();
