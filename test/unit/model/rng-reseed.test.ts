/**
 * Rng: seeding keeps its original words, a generator started over gives the draws of a new one, and the draws
 * are xoshiro128**'s as first written (unsigned arithmetic), whatever the words are kept as.
 */
import { describe, expect, it } from "vitest";
import { Rng } from "@/lib/model/rng";

/** The splitmix32 seeding as it was first written (unsigned arithmetic): the words every seed must still get. */
function referenceWords(seed: number): number[] {
  const words: number[] = [];
  let x = seed >>> 0;
  for (let i = 0; i < 4; i++) {
    x = (x + 0x9e3779b9) >>> 0;
    let z = x;
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
    words.push((z ^ (z >>> 16)) >>> 0);
  }
  return words;
}

const seeds = [0, 1, 2, 7, 12_345, 0x7fffffff, 0x80000000, 0x9e3779b9, 0xffffffff, 2 ** 32 + 5, -1, -123_456, 1.5, -7.9, 1e20, Number.NaN];

describe("Rng seeding", () => {
  it("gives every seed the words of the original splitmix32 seeding", () => {
    for (const seed of [...seeds, ...Array.from({ length: 2_000 }, (_, i) => (i * 2_654_435_761) % 2 ** 32)]) {
      expect(new Rng(seed).getState(), `seed ${seed}`).toEqual(referenceWords(seed));
    }
  });

  it("reseeds a used generator to the draws of a new one, a pending normal included", () => {
    const reused = new Rng(99);
    for (const seed of seeds) {
      reused.uniform();
      reused.normal(); // leaves a second Box-Muller normal cached, which reseed must drop
      Rng.reseed(reused, seed);
      const fresh = new Rng(seed);
      const draws = (rng: Rng) => [rng.nextU32(), rng.uniform(), rng.normal(), rng.normal(), rng.normal()];
      expect(draws(reused), `seed ${seed}`).toEqual(draws(fresh));
    }
  });
});

/** xoshiro128** as it was first written, on unsigned words: the outputs every state must still give. */
function referenceDraws(state: number[], count: number): number[] {
  const s = [...state];
  const rotl = (x: number, k: number) => ((x << k) | (x >>> (32 - k))) >>> 0;
  const out: number[] = [];
  for (let i = 0; i < count; i++) {
    out.push(Math.imul(rotl(Math.imul(s[1]!, 5) >>> 0, 7), 9) >>> 0);
    const t = (s[1]! << 9) >>> 0;
    s[2] = (s[2]! ^ s[0]!) >>> 0;
    s[3] = (s[3]! ^ s[1]!) >>> 0;
    s[1] = (s[1]! ^ s[2]!) >>> 0;
    s[0] = (s[0]! ^ s[3]!) >>> 0;
    s[2] = (s[2]! ^ t) >>> 0;
    s[3] = rotl(s[3]!, 11);
  }
  return out;
}

describe("Rng draws", () => {
  it("gives xoshiro128**'s outputs, uniforms from their top 24 bits, and its state as unsigned words", () => {
    for (const seed of [...seeds, 31, 4_096]) {
      const rng = new Rng(seed);
      const reference = referenceDraws(referenceWords(seed), 2_001);
      const draws = Array.from({ length: 2_000 }, () => rng.nextU32());
      expect(draws, `seed ${seed}`).toEqual(reference.slice(0, 2_000));
      expect(rng.uniform()).toBe((reference[2_000]! >>> 8) / 16_777_216);
      const state = rng.getState();
      expect(state.every((word) => Number.isInteger(word) && word >= 0 && word < 2 ** 32)).toBe(true);
      expect(Rng.fromState(state).nextU32()).toBe(referenceDraws(state, 1)[0]);
    }
  });
});
