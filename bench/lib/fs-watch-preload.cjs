/**
 * Preloaded into every process of a server under bench:abuse (NODE_OPTIONS=--require …): appends one line to
 * TINKERLAB_BENCH_WATCH_LOG for each file-system call that names a path inside TINKERLAB_BENCH_WATCH_DIR (the bait
 * a hostile type-check tries to read), so the bench counts reads from outside the process that makes them.
 */
const fs = require("node:fs");
const watched = process.env.TINKERLAB_BENCH_WATCH_DIR;
const log = process.env.TINKERLAB_BENCH_WATCH_LOG;
if (watched && log) {
  const appendFileSync = fs.appendFileSync;
  const names = (value) => {
    try {
      const text = typeof value === "string" ? value : value instanceof URL ? value.pathname : Buffer.isBuffer(value) ? value.toString() : "";
      return text.includes(watched);
    } catch {
      return false;
    }
  };
  const wrap = (holder, name, label) => {
    const original = holder[name];
    if (typeof original !== "function") return;
    holder[name] = function (...args) {
      if (names(args[0])) appendFileSync.call(fs, log, `${process.pid} ${label} ${String(args[0])}\n`);
      return original.apply(this, args);
    };
  };
  for (const name of [
    "readFileSync",
    "readFile",
    "statSync",
    "stat",
    "lstatSync",
    "lstat",
    "existsSync",
    "exists",
    "openSync",
    "open",
    "readdirSync",
    "readdir",
    "realpathSync",
    "realpath",
    "accessSync",
    "access",
    "createReadStream",
  ]) {
    wrap(fs, name, `fs.${name}`);
  }
  wrap(fs.realpathSync, "native", "fs.realpathSync.native");
  for (const name of ["readFile", "stat", "lstat", "open", "readdir", "realpath", "access"]) wrap(fs.promises, name, `fs.promises.${name}`);
}
