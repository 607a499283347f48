import { randomBytes } from "node:crypto";

const ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz";

/** A new id such as `run_k3f9a0c2m1xq`: a prefix naming the kind of thing, then 12 random base-36 characters. */
export function newId(
  prefix: "usr" | "key" | "exp" | "ver" | "run" | "ckpt" | "job" | "wrk" | "dev" | "shr" | "ds" | "ses" | "acc" | "vfy" | "rl" | "prj" | "inv" | "rep",
): string {
  const bytes = randomBytes(12);
  let out = "";
  for (const byte of bytes) out += ALPHABET[byte % ALPHABET.length];
  return `${prefix}_${out}`;
}
