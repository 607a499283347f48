/**
 * Node's fs, looked up at call time, so that the modules reading model files stay importable where there is none
 * (the browser's playground imports them for their other parts). `what` names the caller's need in the error.
 */
export function nodeFs(what: string): typeof import("node:fs") {
  const fs = typeof process === "undefined" ? undefined : process.getBuiltinModule?.("node:fs");
  if (!fs) throw new Error(`${what} needs Node's fs (process.getBuiltinModule, Node 20.16 or later)`);
  return fs;
}
