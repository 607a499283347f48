/**
 * The simulator's event queue: a binary min-heap on (time, insertion order). Ties break by insertion so that a
 * simulation replays identically; stale entries are skipped by the caller rather than removed (O(log n) each).
 */
export class EventQueue<T> {
  private times: number[] = [];
  private order: number[] = [];
  private items: T[] = [];
  private inserted = 0;

  get size(): number {
    return this.items.length;
  }

  push(time: number, item: T): void {
    this.times.push(time);
    this.order.push(this.inserted++);
    this.items.push(item);
    this.siftUp(this.items.length - 1);
  }

  peekTime(): number | undefined {
    return this.times[0];
  }

  pop(): { time: number; item: T } | undefined {
    if (this.items.length === 0) return undefined;
    const time = this.times[0];
    const item = this.items[0];
    const last = this.items.length - 1;
    this.move(last, 0);
    this.times.pop();
    this.order.pop();
    this.items.pop();
    if (this.items.length > 0) this.siftDown(0);
    return { time, item };
  }

  private before(a: number, b: number): boolean {
    return this.times[a] < this.times[b] || (this.times[a] === this.times[b] && this.order[a] < this.order[b]);
  }

  private move(from: number, to: number): void {
    this.times[to] = this.times[from];
    this.order[to] = this.order[from];
    this.items[to] = this.items[from];
  }

  private swap(a: number, b: number): void {
    [this.times[a], this.times[b]] = [this.times[b], this.times[a]];
    [this.order[a], this.order[b]] = [this.order[b], this.order[a]];
    [this.items[a], this.items[b]] = [this.items[b], this.items[a]];
  }

  private siftUp(i: number): void {
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!this.before(i, parent)) return;
      this.swap(i, parent);
      i = parent;
    }
  }

  private siftDown(i: number): void {
    const n = this.items.length;
    for (;;) {
      const left = 2 * i + 1;
      const right = left + 1;
      let smallest = i;
      if (left < n && this.before(left, smallest)) smallest = left;
      if (right < n && this.before(right, smallest)) smallest = right;
      if (smallest === i) return;
      this.swap(i, smallest);
      i = smallest;
    }
  }
}
