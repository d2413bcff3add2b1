// The loaded part of a thread: its items, where the next pages start in each direction, and
// the entries the webview was last sent, so each page becomes a small change (entries
// added at one end, a few updated) rather than the whole transcript again. At most `limit`
// items: a reader scrolling through a long thread lets go of the far end (read again when
// they scroll back), so neither the host's memory nor the webview's page grows with the
// thread, and each page's change is computed over a bounded part. Pure.
import { changeBetween, entriesOf, NO_CHILDREN, type Children, type EntriesChange, type Entry, type Item } from "./model";

export class TranscriptWindow {
  private items: Item[] = [];
  private shown: { key: string; seq: number; signature: string }[] = [];
  /** Edits whose contents the store does not hold (learned from thread/readBlob). */
  readonly notRecorded = new Set<string>();
  /** The thread's sub-agents (thread/list {parentThreadId}), shown nested in their calls. */
  children: Children = NO_CHILDREN;

  /**
   * @param earlier `beforeSeq` of the page before the loaded part; null once the thread's first item is loaded.
   * @param later `afterSeq` of the page after it; null while the loaded part reaches the thread's end.
   * @param recovery pending operations of the restore: operationId → recovery class.
   * @param limit items kept at most; past it the end away from the page just added goes.
   */
  constructor(
    public earlier: number | null,
    public later: number | null,
    private readonly recovery: ReadonlyMap<string, string> = new Map(),
    private readonly limit = Number.POSITIVE_INFINITY,
  ) {}

  get size(): number {
    return this.items.length;
  }

  get firstSeq(): number | undefined {
    return seqOf(this.items[0]);
  }

  get lastSeq(): number | undefined {
    return seqOf(this.items.at(-1));
  }

  /** A page from `thread/read {beforeSeq}`: the items before the loaded ones. */
  addEarlier(items: readonly Item[], nextBeforeSeq: number | null): void {
    const first = this.firstSeq ?? Number.POSITIVE_INFINITY;
    this.items = [...items.filter((item) => (seqOf(item) ?? first) < first), ...this.items];
    this.earlier = nextBeforeSeq;
    if (this.items.length > this.limit) {
      this.items = this.items.slice(0, this.limit); // the latest go: paging forward reads them again
      this.later = this.lastSeq ?? null;
    }
  }

  /** A page from `thread/read {afterSeq}`, or items recorded since (`item/recorded`). */
  addLater(items: readonly Item[], nextAfterSeq: number | null): void {
    const last = this.lastSeq ?? Number.NEGATIVE_INFINITY;
    this.items = [...this.items, ...items.filter((item) => (seqOf(item) ?? last) > last)];
    this.later = nextAfterSeq;
    if (this.items.length > this.limit) {
      this.items = this.items.slice(-this.limit); // the earliest go: paging back reads them again
      this.earlier = this.firstSeq ?? null;
    }
  }

  /** Marks an edit whose contents turned out not to be stored. */
  markNotRecorded(key: string): void {
    this.notRecorded.add(key);
  }

  entries(): Entry[] {
    return entriesOf(this.items, {
      atStart: this.earlier === null,
      atEnd: this.later === null,
      recovery: this.recovery,
      notRecorded: this.notRecorded,
      children: this.children,
    });
  }

  entry(key: string): Entry | undefined {
    return this.entries().find((entry) => entry.key === key);
  }

  /** The loaded items (a rewind's turn list reads them). */
  loadedItems(): readonly Item[] {
    return this.items;
  }

  /** What changed since the entries were last taken, and takes them. */
  change(): EntriesChange<Entry> {
    const next = this.entries();
    const change = changeBetween(this.shown, next, signatureOf);
    this.shown = next.map((entry) => ({ key: entry.key, seq: entry.seq, signature: signatureOf(entry) }));
    return change;
  }

  /** The webview starts over (it was reloaded): everything goes again. */
  forgetShown(): void {
    this.shown = [];
  }
}

function seqOf(item: Item | undefined): number | undefined {
  const seq = item?.["seq"];
  return typeof seq === "number" ? seq : undefined;
}

function signatureOf(entry: Entry): string {
  return JSON.stringify(entry);
}
