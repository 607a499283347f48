/**
 * A small seeded random number generator (xoshiro128**) whose whole state is four 32-bit words, so a training
 * run can save it in a checkpoint and resume with exactly the draws it would have made.
 */
export type RngState = [number, number, number, number];

export class Rng {
  /**
   * The four words, as int32 (the same bits as xoshiro's unsigned words): the sandbox's interpreter computes on
   * int32 values directly and on values past 2^31, which a Uint32Array hands back, as doubles. Reseeding and two
   * uniform draws took 2.6-2.8 µs there against 3.2-3.4 µs with a Uint32Array (the same draws, both classes
   * bundled into one QuickJS context); a whole sandboxed arithmetic episode, ~40 µs on a loaded machine, changed
   * by -1.1% (within the bench's noise).
   */
  private s = new Int32Array(4);
  private spareNormal: number | null = null;

  constructor(seed: number) {
    Rng.reseed(this, seed);
  }

  /**
   * Starts `rng` over as `new Rng(seed)` would, without making a new one (the sandbox's interpreter spends as long
   * allocating a generator as seeding it; an environment session reseeds its own every episode). Static, so a
   * generator's own methods, which user code is handed, stay those documented in the editor.
   */
  static reseed(rng: Rng, seed: number): void {
    // splitmix32 spreads a small integer seed over the four words; an all-zero state would be stuck at zero.
    // In signed 32-bit arithmetic, the same bits as unsigned (the words are stored as unsigned): the sandbox's
    // interpreter computes on int32 values directly, and on words past 2^31 as doubles (a third slower here).
    // The constants are 0x9e3779b9, 0x85ebca6b and 0xc2b2ae35 as int32.
    const imul = Math.imul;
    const s = rng.s;
    let x = seed | 0;
    for (let i = 0; i < 4; i++) {
      x = (x - 0x61c88647) | 0;
      let z = x;
      z = imul(z ^ (z >>> 16), -0x7a143595);
      z = imul(z ^ (z >>> 13), -0x3d4d51cb);
      s[i] = z ^ (z >>> 16);
    }
    rng.spareNormal = null;
  }

  static fromState(state: RngState): Rng {
    if (state.length !== 4 || state.every((w) => w === 0)) {
      throw new Error(`RNG state must be four 32-bit words, not all zero; got [${state.join(", ")}]`);
    }
    const rng = new Rng(0);
    rng.s.set(state);
    return rng;
  }

  getState(): RngState {
    // The cached second Box-Muller normal is dropped so a restored generator and the original agree from here on.
    this.spareNormal = null;
    return [this.s[0] >>> 0, this.s[1] >>> 0, this.s[2] >>> 0, this.s[3] >>> 0];
  }

  nextU32(): number {
    return Rng.next32(this) >>> 0;
  }

  /** Uniform in [0, 1) with 24 bits, the precision of a float32 mantissa. */
  uniform(): number {
    return (Rng.next32(this) >>> 8) / 16777216;
  }

  /**
   * xoshiro128**'s next output as int32 (the same bits as nextU32), computed in int32 throughout. Static, as
   * `reseed` is, so that a generator's own methods stay those documented.
   */
  private static next32(rng: Rng): number {
    const s = rng.s;
    const s0 = s[0]!;
    const s1 = s[1]!;
    const s2 = s[2]! ^ s0;
    const s3 = s[3]! ^ s1;
    const m = Math.imul(s1, 5);
    const result = Math.imul((m << 7) | (m >>> 25), 9);
    s[0] = s0 ^ s3;
    s[1] = s1 ^ s2;
    s[2] = s2 ^ (s1 << 9);
    s[3] = (s3 << 11) | (s3 >>> 21);
    return result;
  }

  /** Standard normal (Box-Muller). */
  normal(): number {
    if (this.spareNormal !== null) {
      const z = this.spareNormal;
      this.spareNormal = null;
      return z;
    }
    const u1 = 1 - this.uniform(); // in (0, 1], so the log is finite
    const u2 = this.uniform();
    const r = Math.sqrt(-2 * Math.log(u1));
    this.spareNormal = r * Math.sin(2 * Math.PI * u2);
    return r * Math.cos(2 * Math.PI * u2);
  }
}
