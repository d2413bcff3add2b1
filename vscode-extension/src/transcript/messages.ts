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

export type ToWebview =
  | { type: "init"; title: string; banner: string | undefined; notice: string | undefined }
  | PageMessage
  | { type: "failed"; direction: "earlier" | "later"; message: string };

export type FromWebview =
  | { type: "ready" }
  | { type: "earlier" }
  | { type: "later" }
  | { type: "diff"; key: string }
  | { type: "report" };
