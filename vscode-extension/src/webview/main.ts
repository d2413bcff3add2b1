// The transcript webview: places the entries the extension host renders, keeps the reader's
// place when earlier ones arrive above, asks for the next page when the reader nears either
// end, and moves the keyboard focus from entry to entry (a WAI-ARIA feed). It renders no
// recorded text itself: the host sends HTML made from escaped text and Markdown.
import type { FromWebview, PageMessage, ShownEntry, ToWebview } from "../transcript/messages";

type ChildMessage = Extract<ToWebview, { type: "child" }>;

/** When this script started running (the opening's timings, with the host's: OpenTimings). */
const scriptAt = Date.now();

declare function acquireVsCodeApi(): { postMessage(message: FromWebview): void };

const vscode = acquireVsCodeApi();
const post = (message: FromWebview) => vscode.postMessage(message);
const scroller = document.scrollingElement ?? document.documentElement;
const feed = document.getElementById("feed")!;
const banner = document.getElementById("banner")!;
const top = document.getElementById("earlier")!;
const bottom = document.getElementById("later")!;
/** Within this many viewport heights of an end, the next page in that direction is asked for. */
const NEAR = 1.5;

let hasEarlier = false;
let hasLater = false;
let loading: "earlier" | "later" | undefined;
let earlierPages = 0;

function entries(): HTMLElement[] {
  return [...feed.querySelectorAll<HTMLElement>(":scope > .entry")];
}

function byKey(key: string, within: HTMLElement = feed): HTMLElement | null {
  return within.querySelector<HTMLElement>(`:scope > .entry[data-key="${CSS.escape(key)}"]`);
}

/** The top-level entry an element is in (a sub-agent's entries are nested in one). */
function topEntry(element: Element | null): HTMLElement | undefined {
  let node = element;
  while (node && node.parentElement !== feed) node = node.parentElement;
  return node instanceof HTMLElement && node.classList.contains("entry") ? node : undefined;
}

function fragment(shown: readonly ShownEntry[]): DocumentFragment {
  const template = document.createElement("template");
  template.innerHTML = shown.map((entry) => entry.html).join("");
  return template.content;
}

/** The first entry whose top is on screen: what the reader is looking at. */
function anchorEntry(): HTMLElement | undefined {
  return entries().find((element) => element.getBoundingClientRect().bottom > 0);
}

function replace(entry: ShownEntry, within: HTMLElement = feed): void {
  const old = byKey(entry.key, within);
  if (!old) return;
  const open = [...old.querySelectorAll("details")].map((element) => element.open);
  const focused = old.contains(document.activeElement);
  const next = fragment([entry]).firstElementChild as HTMLElement | null;
  if (!next) return;
  next.querySelectorAll("details").forEach((element, index) => (element.open = open[index] ?? element.open));
  // A sub-agent's transcript already loaded into the entry stays, as it is.
  for (const body of old.querySelectorAll<HTMLElement>("[data-child-body]")) {
    next.querySelector(`[data-child-body="${CSS.escape(body.dataset["childBody"] ?? "")}"]`)?.replaceWith(body);
  }
  old.replaceWith(next);
  if (focused && within === feed) focus(next);
}

/** A page of a sub-agent's transcript, into the block of the call that ran it. */
function applyChild(message: ChildMessage): void {
  const body = document.querySelector<HTMLElement>(`[data-child-body="${CSS.escape(message.threadId)}"]`);
  if (!body) return;
  body.querySelector(":scope > .end")?.remove();
  body.querySelector(":scope > .child-more")?.remove();
  if (message.reset) body.replaceChildren();
  for (const entry of message.updates) replace(entry, body);
  body.append(fragment(message.back));
  body.dataset["loaded"] = "true";
  if (message.failed) {
    body.append(Object.assign(document.createElement("p"), { className: "end", textContent: message.failed }));
    delete body.dataset["loaded"]; // opening the block again asks again
  } else if (message.hasMore) {
    const more = Object.assign(document.createElement("button"), { type: "button", className: "child-more", textContent: "Load more of the sub-agent's transcript" });
    more.dataset["action"] = "child";
    more.dataset["thread"] = message.threadId;
    body.append(more);
  }
}

function atBottom(): boolean {
  return scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight < 4;
}

function apply(page: PageMessage): void {
  const followBottom = page.direction === "live" && atBottom();
  // The reader stays where they were: entries arrive above (an earlier page), or the far
  // end is let go above them (a later page, a live one: the loaded part is bounded).
  const anchor = page.direction !== "initial" && !followBottom ? anchorEntry() : undefined;
  const anchorTop = anchor?.getBoundingClientRect().top ?? 0;
  if (page.reset) {
    feed.replaceChildren(fragment(page.reset));
  } else {
    for (const key of page.removes) byKey(key)?.remove();
    for (const entry of page.updates) replace(entry);
    if (page.front.length) feed.insertBefore(fragment(page.front), feed.firstChild);
    if (page.back.length) feed.append(fragment(page.back));
  }
  hasEarlier = page.hasEarlier;
  hasLater = page.hasLater;
  top.textContent = hasEarlier ? "Loading earlier items as you scroll up…" : "Start of the thread.";
  bottom.textContent = hasLater ? "Loading later items as you scroll down…" : "";
  feed.setAttribute("aria-busy", "false");
  rovingStart();
  if (anchor?.isConnected) scroller.scrollTop += anchor.getBoundingClientRect().top - anchorTop;
  if (page.direction === "initial") {
    const target = page.focusSeq !== undefined ? entryHolding(page.focusSeq) : undefined;
    if (target) {
      target.classList.add("hit");
      if (page.highlight?.length) mark(target, page.highlight);
      target.scrollIntoView({ block: "center" });
      focus(target, false);
    } else {
      scroller.scrollTop = scroller.scrollHeight;
    }
  } else if (followBottom) {
    scroller.scrollTop = scroller.scrollHeight;
  }
  if (page.direction === "earlier") earlierPages++;
  // For the end-to-end run's timings: when each page was on screen (this machine's clock).
  requestAnimationFrame(() => {
    document.body.dataset[`${page.direction}ShownAt`] = String(Date.now());
    document.body.dataset["earlierPages"] = String(earlierPages);
    loading = undefined;
    checkEnds();
  });
}

/** The entry at `seq`, or the last one before it (a hit inside a merged tool call). */
function entryHolding(seq: number): HTMLElement | undefined {
  let found: HTMLElement | undefined;
  for (const element of entries()) {
    if (Number(element.dataset["seq"]) > seq) break;
    found = element;
  }
  return found;
}

/** Wraps each occurrence of the words in the entry's text in <mark>. */
function mark(element: HTMLElement, words: readonly string[]): void {
  const pattern = new RegExp(words.map((word) => word.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")).join("|"), "gi");
  const walker = document.createTreeWalker(element, NodeFilter.SHOW_TEXT);
  const texts: Text[] = [];
  while (walker.nextNode()) texts.push(walker.currentNode as Text);
  for (const node of texts) {
    const value = node.nodeValue ?? "";
    if (!pattern.test(value)) continue;
    pattern.lastIndex = 0;
    const parts = document.createDocumentFragment();
    let last = 0;
    for (const match of value.matchAll(pattern)) {
      parts.append(value.slice(last, match.index), Object.assign(document.createElement("mark"), { textContent: match[0] }));
      last = (match.index ?? 0) + match[0].length;
    }
    parts.append(value.slice(last));
    node.replaceWith(parts);
  }
}

function checkEnds(): void {
  if (loading) return;
  const near = scroller.clientHeight * NEAR;
  if (hasEarlier && scroller.scrollTop < near) request("earlier");
  else if (hasLater && scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight < near) request("later");
}

function request(direction: "earlier" | "later"): void {
  loading = direction;
  feed.setAttribute("aria-busy", "true");
  post({ type: direction });
}

// --- keyboard: one entry in the tab order at a time; arrows move between entries -------

function rovingStart(): void {
  const current = feed.querySelector<HTMLElement>(':scope > .entry[tabindex="0"]');
  if (current) return;
  const last = entries().at(-1);
  if (last) last.tabIndex = 0;
}

function focus(element: HTMLElement, scroll = true): void {
  for (const other of feed.querySelectorAll<HTMLElement>(':scope > .entry[tabindex="0"]')) other.tabIndex = -1;
  element.tabIndex = 0;
  element.focus({ preventScroll: !scroll });
}

feed.addEventListener("keydown", (event) => {
  const current = (event.target as HTMLElement).closest<HTMLElement>(".entry");
  if (!current || event.target !== current) return;
  const all = entries();
  const index = all.indexOf(current);
  const moves: Record<string, number | undefined> = { ArrowDown: index + 1, ArrowUp: index - 1, j: index + 1, k: index - 1, Home: 0, End: all.length - 1 };
  const target = moves[event.key];
  if (target === undefined || !all[target]) return;
  event.preventDefault();
  focus(all[target]!);
});

feed.addEventListener("focusin", (event) => {
  const entry = topEntry(event.target as HTMLElement);
  if (entry && entry.tabIndex !== 0) {
    for (const other of feed.querySelectorAll<HTMLElement>(':scope > .entry[tabindex="0"]')) other.tabIndex = -1;
    entry.tabIndex = 0;
  }
});

document.addEventListener("click", (event) => {
  const button = (event.target as HTMLElement).closest<HTMLElement>("[data-action]");
  if (!button) return;
  const action = button.dataset["action"];
  const thread = button.dataset["thread"];
  if (action === "diff" && button.dataset["key"]) post({ type: "diff", key: button.dataset["key"], ...(thread ? { threadId: thread } : {}) });
  if (action === "report") post({ type: "report" });
  if (action === "child" && thread) post({ type: "child", threadId: thread });
});

// Opening a sub-agent's block loads its transcript, once ("toggle" does not bubble: captured).
document.addEventListener(
  "toggle",
  (event) => {
    const details = event.target as HTMLDetailsElement;
    const thread = details.dataset?.["child"];
    const body = details.querySelector<HTMLElement>(":scope > [data-child-body]");
    if (!details.open || !thread || !body || body.dataset["loaded"] !== undefined) return;
    body.dataset["loaded"] = "loading";
    post({ type: "child", threadId: thread });
  },
  true,
);

window.addEventListener("scroll", () => checkEnds(), { passive: true });

window.addEventListener("message", (event: MessageEvent<ToWebview>) => {
  const message = event.data;
  if (message.type === "init") {
    document.title = message.title;
    feed.setAttribute("aria-label", `Transcript of ${message.title}`);
    feed.dataset["threadId"] = message.threadId;
    if (message.opened) document.body.dataset["opened"] = JSON.stringify({ ...message.opened, scriptAt, initAt: Date.now() });
    banner.innerHTML = message.banner ?? "";
    banner.hidden = !message.banner;
    const notice = document.getElementById("notice")!;
    notice.textContent = message.notice ?? "";
    notice.hidden = !message.notice;
  } else if (message.type === "page") {
    apply(message);
  } else if (message.type === "child") {
    applyChild(message);
  } else if (message.type === "failed") {
    const where = message.direction === "earlier" ? top : bottom;
    where.textContent = `Could not load ${message.direction} items: ${message.message}`;
    feed.setAttribute("aria-busy", "false");
    loading = undefined; // the next scroll asks again
  }
});

post({ type: "ready" });
