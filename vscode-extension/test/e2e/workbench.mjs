// Reading and driving VS Code's workbench DOM the way a person does: rows of a view, the
// active tab, the editor's visible text, dialogs, context menus, the quick input.
import assert from "node:assert/strict";

/** Retries `probe` (which asserts) until it passes; on timeout throws its last failure. */
export async function eventually(probe, timeoutMs = 20_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await probe();
    } catch (error) {
      if (Date.now() > deadline) throw error;
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** The rows of a tree view as shown: depth, label, description, codicon (`options.timeout` to wait less for the view). */
export function treeRows(page, view, options = {}) {
  return page.locator(`.monaco-list[aria-label="${view}"]`).evaluate((list) =>
    [...list.querySelectorAll(".monaco-list-row")]
      .sort((a, b) => Number(a.dataset.index) - Number(b.dataset.index))
      .map((row) => ({
        index: Number(row.dataset.index),
        depth: Number(row.getAttribute("aria-level")),
        label: row.querySelector(".label-name")?.textContent ?? "",
        description: row.querySelector(".label-description")?.textContent ?? "",
        icon: [...(row.querySelector(".custom-view-tree-node-item-icon")?.classList ?? [])].find((name) => name.startsWith("codicon-") && name !== "codicon-colored")?.slice("codicon-".length) ?? "",
      })),
    undefined,
    options,
  );
}

/** "  label" per row, indented by depth: what a person reads in the view. */
export async function treeOutline(page, view) {
  return (await treeRows(page, view)).map((row) => `${"  ".repeat(row.depth - 1)}${row.label}`);
}

/** The row labelled `label`; with `under`, the one below the row labelled so (a branch). */
export async function treeRow(page, view, label, under) {
  const rows = await treeRows(page, view);
  const start = under === undefined ? 0 : rows.findIndex((row) => row.label === under);
  const parent = rows[start];
  const found = rows.find(
    (row, position) => position >= start && row.label === label && (under === undefined || (row.depth > parent.depth && rows.slice(start + 1, position).every((between) => between.depth > parent.depth))),
  );
  assert.ok(found, `a row "${label}"${under ? ` under "${under}"` : ""} in:\n${rows.map((row) => `${"  ".repeat(row.depth - 1)}${row.label}`).join("\n")}`);
  return page.locator(`.monaco-list[aria-label="${view}"] .monaco-list-row[data-index="${found.index}"]`);
}

/**
 * Resolves once the view's rows have stayed the same elements with the same content for
 * half a second. A fresh window re-renders its tree as the server starts and the first page
 * arrives; a row replaced between mouse-down and mouse-up swallows the click, as it would a
 * person's (who would click again, which a test must not).
 */
export async function settledView(page, view) {
  const list = page.locator(`.monaco-list[aria-label="${view}"]`);
  const stamp = () =>
    list.evaluate((element) =>
      [...element.querySelectorAll(".monaco-list-row")]
        .map((row) => {
          row.dataset.e2eSeen ??= String(Math.random());
          return `${row.dataset.e2eSeen}:${row.innerHTML}`;
        })
        .join("\n"),
    );
  await eventually(async () => {
    const before = await stamp();
    await new Promise((resolve) => setTimeout(resolve, 500));
    assert.equal(await stamp(), before, `the ${view} view is still changing`);
  });
}

/** The row's inline action (the ▶ Resume button that shows on hover). */
export async function clickInlineAction(page, view, label, action, under) {
  await settledView(page, view);
  const row = await treeRow(page, view, label, under);
  await row.hover();
  await row.locator(`.actions .action-label[aria-label="${action}"]`).click();
}

export async function contextMenu(page, view, label, entry) {
  await (await treeRow(page, view, label)).click({ button: "right" });
  const menu = page.locator(".context-view .monaco-menu");
  await menu.waitFor();
  // A menu item ignores mouse-up for ~100 ms after it renders (so that the click that opened
  // the menu cannot pick an item); the keyboard has no such delay: hover focuses, Enter runs.
  const item = menu.getByRole("menuitem", { name: entry, exact: true });
  await item.hover();
  await eventually(async () => assert.equal(await item.evaluate((element) => element.closest(".action-item")?.classList.contains("focused")), true));
  await page.keyboard.press("Enter");
  await menu.waitFor({ state: "detached" });
}

/** The active tab's label; "" while no editor is open (asked again by `eventually`, not waited on). */
export async function activeTab(page) {
  const label = page.locator(".tabs-container .tab.active .label-name").first();
  return (await label.count()) ? ((await label.textContent()) ?? "") : "";
}

/**
 * What a window shows beside the editor, for a failed step's report: its folder, tabs,
 * notifications, an open dialog and the Threads view.
 */
export async function describeWindow(page) {
  const safely = (promise) => promise.catch((error) => `(unreadable: ${error.message.split("\n")[0]})`);
  const dialogOpen = (await dialog(page).count()) > 0;
  return {
    url: page.url(),
    activeTab: await safely(activeTab(page)),
    tabs: await safely(tabLabels(page)),
    notifications: await safely(notifications(page)),
    dialog: dialogOpen ? await safely(dialogText(page)) : null,
    threads: await safely(
      treeRows(page, "Threads", { timeout: 2000 }).then((rows) =>
        rows.map((row) => `${"  ".repeat(row.depth - 1)}${row.label}${row.description ? ` (${row.description})` : ""} [${row.icon}]`),
      ),
    ),
  };
}

export async function tabLabels(page) {
  return page.locator(".tabs-container .tab .label-name").allTextContents();
}

/** What the active editor shows (Monaco renders only the visible lines). */
export async function editorText(page) {
  return page.locator(".editor-group-container.active .monaco-editor .view-lines").first().evaluate((lines) =>
    [...lines.querySelectorAll(".view-line")]
      .sort((a, b) => parseFloat(a.style.top) - parseFloat(b.style.top))
      .map((line) => line.textContent.replace(/\u00a0/g, " "))
      .join("\n"),
  );
}

const activeEditor = (page) => page.locator(".editor-group-container.active .monaco-editor").first();

/** A key pressed in the active editor, as a person does after clicking into its text. */
export async function editorKey(page, key) {
  await activeEditor(page).locator(".view-lines").click();
  await page.keyboard.press(key);
}

/**
 * Find (Ctrl+F) in the active editor: what its count says for `text` ("No results", "1 of 1").
 * It searches the whole document, not only the lines on screen, and scrolls to the match.
 */
export async function findInEditor(page, text) {
  await editorKey(page, "Control+f");
  const widget = activeEditor(page).locator(".find-widget.visible");
  await widget.locator(".find-part .input").fill(text);
  // The count follows each keystroke at once (no debounce): read after the whole text is in.
  const said = await widget.locator(".matchesCount").innerText();
  await page.keyboard.press("Escape");
  await widget.waitFor({ state: "detached" }); // hidden: the widget loses its "visible" class
  return said;
}

/** A code lens of the active editor, by its title. */
export function codeLens(page, title) {
  return activeEditor(page).locator(".codelens-decoration a", { hasText: title });
}

export const dialog = (page) => page.locator(".monaco-dialog-box");

/** A modal's message, detail and buttons (without a detail, VS Code puts the message in the detail's place). */
export async function dialogText(page) {
  const box = dialog(page);
  await box.waitFor();
  const text = (locator) => locator.evaluate((element) => element.innerText).catch(() => "");
  const hasDetail = (await box.locator(".dialog-message-text").count()) > 0;
  const message = await text(box.locator(hasDetail ? ".dialog-message-text" : ".dialog-message-detail"));
  return {
    message,
    detail: hasDetail ? await text(box.locator(".dialog-message-detail")) : "",
    buttons: await box.locator(".dialog-buttons .monaco-button").allTextContents(),
  };
}

export async function clickDialogButton(page, title) {
  await dialog(page).locator(".dialog-buttons .monaco-button", { hasText: title }).click();
  await dialog(page).waitFor({ state: "detached" });
}

export async function answerInput(page, text) {
  const input = page.locator(".quick-input-widget input.input");
  await input.waitFor({ state: "visible" });
  await input.fill(text);
  await input.press("Enter");
}

export async function statusBarTexts(page) {
  return page.locator(".statusbar-item").allTextContents();
}

export async function notifications(page) {
  return page.locator(".notification-toast .notification-list-item-message").allTextContents();
}

export async function assertNoDialog(page) {
  assert.equal(await dialog(page).count(), 0, "no dialog is open");
}

/**
 * The frame of the transcript webview titled `title` (and, given, of that thread: two threads
 * may share a title): VS Code puts each webview in frames of its own, outside the editor's DOM.
 */
export async function transcriptFrame(page, title, { threadId, timeoutMs = 30_000 } = {}) {
  return eventually(async () => {
    for (const frame of page.frames()) {
      const feed = await frame.evaluate(() => ({ label: document.getElementById("feed")?.getAttribute("aria-label"), thread: document.getElementById("feed")?.dataset.threadId })).catch(() => ({}));
      if (feed.label === `Transcript of ${title}` && (threadId === undefined || feed.thread === threadId)) return frame;
    }
    throw new Error(`no transcript webview for "${title}" among ${page.frames().length} frames`);
  }, timeoutMs);
}

/** The transcript's entries as shown, in order: seq, kind (its classes), what a person reads, what a screen reader says. */
export function transcriptEntries(frame) {
  return frame.evaluate(() =>
    [...document.querySelectorAll("#feed > .entry")].map((entry) => ({
      seq: Number(entry.dataset.seq),
      kind: [...entry.classList].filter((name) => name !== "entry").join(" "),
      text: entry.innerText.replace(/\s+/g, " ").trim(),
      label: entry.getAttribute("aria-label"),
    })),
  );
}

/** The entries whose top and bottom are inside the webview's viewport. */
export function visibleEntries(frame) {
  return frame.evaluate(() =>
    [...document.querySelectorAll("#feed > .entry")]
      .filter((entry) => {
        const box = entry.getBoundingClientRect();
        return box.bottom > 0 && box.top < window.innerHeight;
      })
      .map((entry) => entry.innerText.replace(/\s+/g, " ").trim()),
  );
}

/** The usage view's webview frame: it runs no script, so it is found by its table. */
export async function usageFrame(page, timeoutMs = 30_000) {
  return eventually(async () => {
    for (const frame of page.frames()) {
      if ((await frame.locator("table#projects").count().catch(() => 0)) > 0) return frame;
    }
    throw new Error(`no usage webview among ${page.frames().length} frames`);
  }, timeoutMs);
}

/** Runs a command from the command palette by its title, as a person types it. */
export async function runCommand(page, title) {
  await page.keyboard.press("F1");
  const input = page.locator(".quick-input-widget input.input");
  await input.waitFor({ state: "visible" });
  await input.fill(`>${title}`);
  const row = page.locator(".quick-input-widget .quick-input-list .monaco-list-row").filter({ has: page.getByText(title, { exact: true }) });
  await row.first().click();
}

/**
 * Preferences: Color Theme, then the theme labelled `pick(labels, current)` (the picker
 * opens on the current one); returns the theme that was current.
 */
export async function chooseColorTheme(page, pick) {
  await runCommand(page, "Preferences: Color Theme");
  const rows = page.locator(".quick-input-widget .quick-input-list .monaco-list-row");
  const current = await eventually(async () => {
    const label = await rows.locator(".label-name").first().count() ? await page.locator(".quick-input-widget .quick-input-list .monaco-list-row.focused .label-name").innerText() : "";
    assert.ok(label, "the picker shows the current theme");
    return label;
  });
  const labels = await rows.locator(".label-name").allInnerTexts();
  const input = page.locator(".quick-input-widget input.input");
  const choice = pick(labels, current);
  await input.fill(choice);
  await eventually(async () => assert.equal(await page.locator(".quick-input-widget .quick-input-list .monaco-list-row.focused .label-name").innerText(), choice));
  await input.press("Enter");
  await page.locator(".quick-input-widget").waitFor({ state: "hidden" });
  return current;
}

/**
 * VS Code's own marks for a webview's opening, read in its outer frame (the host page VS Code
 * puts each webview's document in), as Date.now() times: `hostPage` when that page started
 * loading, `workerRequested`/`workerReady` when it asked for its service worker and when the
 * worker took control (nothing of the extension's document loads before), `htmlWritten` when
 * it wrote the extension's HTML into the inner frame. `frame` is that inner frame.
 */
export async function webviewHostMarks(frame) {
  const outer = frame.parentFrame();
  const marks = await outer.evaluate(() => {
    const at = (name) => {
      const mark = performance.getEntriesByName(`webview/index.html/${name}`, "mark")[0];
      return mark ? Math.round(performance.timeOrigin + mark.startTime) : undefined;
    };
    return {
      hostPage: Math.round(performance.timeOrigin),
      workerRequested: at("content/started"),
      workerReady: at("content/workerReady"),
      htmlWritten: at("content/wroteInnerContent"),
    };
  });
  return marks;
}

/** The frame of the baseline's empty webview number `number` in this window (test/e2e/empty-webview). */
export async function emptyWebviewFrame(page, number, timeoutMs = 30_000) {
  return eventually(async () => {
    for (const frame of page.frames()) {
      if ((await frame.evaluate(() => document.body?.dataset.emptyWebview).catch(() => undefined)) === String(number)) return frame;
    }
    throw new Error(`no empty webview ${number} among ${page.frames().length} frames`);
  }, timeoutMs);
}
