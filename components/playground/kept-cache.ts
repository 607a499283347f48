/**
 * The key/value cache as the playground's worker keeps it on WASM: each step the model hands back only the new keys
 * and values (new_key_values.{i}.*, lib/onnx/names.ts), and they are appended here to the cache, which the next step
 * feeds as past_key_values.{i}.*.
 *
 * Each entry lives in two buffers that take turns (the cache is read from one and written, grown, to the other), kept
 * from one generation to the next: Chromium took about 180 µs a step to allocate generalist-base's eight grown
 * arrays (headless Chromium 156, AMD EPYC), the buffers' copies about 4 µs.
 */

/** One layer's keys or values: [1, nHeads, length, headDim]. */
export class KeptCacheEntry {
  private readonly buffers: [Float32Array, Float32Array] = [new Float32Array(0), new Float32Array(0)];
  private current = 0;
  /** positions held */
  length = 0;

  constructor(
    readonly nHeads: number,
    readonly headDim: number,
    /** the most positions it will hold (the model's contextLength) */
    readonly maxLength: number,
  ) {}

  /** The cache, [1, nHeads, length, headDim] in order: a view, valid until the next append. */
  get data(): Float32Array {
    return this.buffers[this.current].subarray(0, this.nHeads * this.length * this.headDim);
  }

  /** Empties it; its buffers stay for the next generation. */
  reset(): void {
    this.length = 0;
  }

  /** Appends `seq` positions given as [1, seq, nHeads·headDim] (head h in columns h·headDim …). */
  append(rows: Float32Array, seq: number): void {
    const { nHeads: H, headDim: hd, length: past } = this;
    const total = past + seq;
    if (rows.length !== seq * H * hd) throw new Error(`${rows.length} new values, [1, ${seq}, ${H * hd}] needs ${seq * H * hd}`);
    if (total > this.maxLength) throw new Error(`the cache holds at most ${this.maxLength} positions; ${total} asked for`);
    const from = this.buffers[this.current];
    let to = this.buffers[1 - this.current];
    if (to.length < H * total * hd) {
      // grown by doubling, so a generation reallocates a few times at most, and never again once the buffers are long enough
      to = new Float32Array(H * hd * Math.min(this.maxLength, Math.max(total, 2 * past, 16)));
      this.buffers[1 - this.current] = to;
    }
    for (let h = 0; h < H; h++) {
      to.set(from.subarray(h * past * hd, (h + 1) * past * hd), h * total * hd);
      for (let s = 0; s < seq; s++) to.set(rows.subarray((s * H + h) * hd, (s * H + h + 1) * hd), (h * total + past + s) * hd);
    }
    this.current = 1 - this.current;
    this.length = total;
  }
}
