// Builds the Next.js workbench when its sources changed since the last build. Plain Node: it runs before
// dependencies are known to be installed.
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import fs from "node:fs";
import path from "node:path";

const SOURCES = ["app", "components", "lib", "server", "next.config.ts", "postcss.config.mjs", "package-lock.json", "tsconfig.json"];

function walk(root, entry, hash) {
  const full = path.join(root, entry);
  let stat;
  try {
    stat = fs.statSync(full);
  } catch {
    return;
  }
  if (stat.isDirectory()) {
    for (const child of fs.readdirSync(full).sort()) walk(root, path.join(entry, child), hash);
  } else {
    hash.update(`${entry}\0${stat.size}\0`);
    hash.update(fs.readFileSync(full));
  }
}

function sourceHash(root) {
  const hash = createHash("sha256");
  for (const entry of SOURCES) walk(root, entry, hash);
  return hash.digest("hex");
}

/** Runs `next build` unless .next holds a build of exactly these sources. Returns true when it built. */
export function buildIfStale(root, { log = console.log } = {}) {
  const stamp = path.join(root, ".next", "tinkerlab-source-hash");
  const wanted = sourceHash(root);
  if (fs.existsSync(stamp) && fs.readFileSync(stamp, "utf8") === wanted && fs.existsSync(path.join(root, ".next", "BUILD_ID"))) {
    return false;
  }
  log("Building the workbench (first start or changed sources; about a minute)…");
  const result = spawnSync(path.join(root, "node_modules", ".bin", "next"), ["build"], {
    cwd: root,
    stdio: ["ignore", "inherit", "inherit"],
    env: { ...process.env, NEXT_TELEMETRY_DISABLED: "1" },
  });
  if (result.status !== 0) throw new Error(`next build failed (exit ${result.status ?? result.signal})`);
  fs.writeFileSync(stamp, wanted);
  return true;
}

export function ensureDependencies(root, { log = console.log } = {}) {
  const marker = path.join(root, "node_modules", ".package-lock.json");
  const lock = path.join(root, "package-lock.json");
  if (fs.existsSync(marker) && fs.statSync(marker).mtimeMs >= fs.statSync(lock).mtimeMs - 1000) return;
  log("Installing dependencies (npm ci)…");
  // onnxruntime-node ships its CPU binary; its install script would only try to download a GPU one, and when that
  // fails npm leaves the (optional) package out, which the ONNX parity tests need.
  const env = { ONNXRUNTIME_NODE_INSTALL: "skip", ...process.env };
  const result = spawnSync("npm", ["ci", "--no-audit", "--no-fund"], { cwd: root, stdio: "inherit", env });
  if (result.status !== 0) throw new Error(`npm ci failed (exit ${result.status})`);
}
