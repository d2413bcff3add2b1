// The messages between the transcript panel (extension host) and its webview. Types only:
// imported by both sides, so neither can send what the other does not read.

/** One entry as the webview places it: where it stands and its HTML. */
export interface ShownEntry {
  key: string;
  seq: number;
  html: string;
}

export interface PageMessage {
  type: "page";
  /** Which end the page came from: the view keeps its scroll position on an earlier page. */
  direction: "initial" | "earlier" | "later" | "live";
  front: ShownEntry[];
  back: ShownEntry[];
  updates: ShownEntry[];
  removes: string[];
  /** Set: show exactly these (the entries could not be changed in place). */
  reset?: ShownEntry[];
  /** More items before the first one shown / after the last one. */
  hasEarlier: boolean;
  hasLater: boolean;
  /** Scroll to the entry holding this seq and mark it (a search hit); else the newest. */
  focusSeq?: number;
  /** Words to mark in the focused entry. */
  highlight?: string[];
}

/**
 * When a transcript's opening reached each step, by the extension host's clock (Date.now()):
 * the person's command, the panel created, the newest page read, its entries rendered. The
 * webview adds when its script ran and when this arrived (the end-to-end run reports them).
 */
export interface OpenTimings {
  requestedAt: number;
  panelAt: number;
  readAt: number;
  renderedAt: number;
}

export type ToWebview =
  | { type: "init"; threadId: string; title: string; banner: string | undefined; notice: string | undefined; opened?: OpenTimings }
  | PageMessage
  | { type: "failed"; direction: "earlier" | "later"; message: string }
  /** A sub-agent's transcript, a page at a time, into its block in the call that ran it. */
  | { type: "child"; threadId: string; back: ShownEntry[]; updates: ShownEntry[]; reset?: boolean; hasMore: boolean; failed?: string };

export type FromWebview =
  | { type: "ready" }
  | { type: "earlier" }
  | { type: "later" }
  /** Open diff on an edit; `threadId` when the edit is in a sub-agent's transcript. */
  | { type: "diff"; key: string; threadId?: string }
  /** A sub-agent's block was opened (or "Load more" in it clicked): its next page. */
  | { type: "child"; threadId: string }
  | { type: "report" };
