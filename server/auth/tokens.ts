/**
 * Secrets handed out once and stored only as hashes: API keys, share links and invitation links. Each carries 256
 * random bits; SHA-256 (no salt, no stretching) suffices for tokens that cannot be guessed, and lets a request find
 * its row by the hash in one indexed lookup.
 */
import { createHash, randomBytes } from "node:crypto";

/** A new token: a short prefix saying what it is (`tl_` API key, `tls_` share link, `tli_` invitation), then 256 random bits. */
export function newToken(prefix: "tl" | "tls" | "tli"): string {
  return `${prefix}_${randomBytes(32).toString("base64url")}`;
}

/** The moment `days` days from now (an expiry), or null for none. */
export function daysFromNow(days: number | null): Date | null {
  return days === null ? null : new Date(Date.now() + days * 86_400_000);
}

export function hashToken(token: string): string {
  return createHash("sha256").update(token).digest("hex");
}

/** Whether a string could be a token of ours at all (a cheap check before a lookup; the lookup decides). */
export function looksLikeToken(value: string, prefix: "tl" | "tls" | "tli"): boolean {
  return value.startsWith(`${prefix}_`) && /^[\w-]{16,200}$/.test(value.slice(prefix.length + 1));
}
