/**
 * The process's signal that a credential or a right was taken away (a share link or an API key revoked, a session
 * signed out): what authenticated once and stays open, a live stream, re-checks its own at once instead of at its
 * next interval (./stream-access.ts). Process-wide, on globalThis: Next's bundles, where the revoking procedures
 * run, and the web server entry, which serves the streams, each load this module and must share one emitter. A
 * revocation made by another process reaches streams here by their interval alone.
 */
import { EventEmitter } from "node:events";

const holder = globalThis as typeof globalThis & { __tinkerlabRevocations?: EventEmitter };
const emitter = (holder.__tinkerlabRevocations ??= new EventEmitter().setMaxListeners(0));

/** The event's name (a string, not a Symbol: every copy of this module must agree on it). */
const REVOKED = "tinkerlab:revoked";

/** Says that something was revoked: every open stream of this process re-checks its credential now. */
export function announceRevocation(): void {
  emitter.emit(REVOKED);
}

/** Calls `listener` at each announced revocation; returns the function that stops it. */
export function onRevocation(listener: () => void): () => void {
  emitter.on(REVOKED, listener);
  return () => emitter.off(REVOKED, listener);
}
