#!/usr/bin/env node
/**
 * `npm test`: every test, on a fresh machine too. It installs what is missing (npm packages; Debian's chromium and
 * postgresql when running as root), starts a throwaway PostgreSQL cluster on a free loopback port unless
 * TEST_DATABASE_URL names one, builds the workbench for the end-to-end tests when its sources changed (a few minutes
 * on two cores, timed apart from the tests), runs vitest's projects (unit, integration on PGlite and on PostgreSQL,
 * end-to-end in Chromium), and ends with the line `N passed, N failed`.
 *
 *   npm test                  everything
 *   npm test -- unit          only the projects named (unit, integration-pglite, integration-postgres, e2e)
 */
import { execFileSync, spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { buildIfStale, ensureDependencies } from "./build-if-stale.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const PROJECTS = ["unit", "integration-pglite", "integration-postgres", "e2e"];
const requested = process.argv.slice(2).filter((arg) => !arg.startsWith("-"));
const extraArgs = process.argv.slice(2).filter((arg) => arg.startsWith("-"));
for (const name of requested) {
  if (!PROJECTS.includes(name)) {
    console.error(`npm test: unknown project '${name}'; choose from ${PROJECTS.join(", ")}`);
    process.exit(2);
  }
}
const projects = requested.length ? requested : PROJECTS;
const isRoot = process.getuid?.() === 0;
const cleanups = [];

function which(command) {
  const found = spawnSync("sh", ["-c", `command -v ${command}`], { encoding: "utf8" });
  return found.status === 0 ? found.stdout.trim() : null;
}

function aptInstall(...packages) {
  if (!isRoot || !which("apt-get")) return false;
  console.log(`Installing ${packages.join(", ")} from Debian's packages…`);
  const env = { ...process.env, DEBIAN_FRONTEND: "noninteractive" };
  spawnSync("apt-get", ["update", "-qq"], { stdio: "inherit", env });
  return spawnSync("apt-get", ["install", "-y", "-qq", ...packages], { stdio: "inherit", env }).status === 0;
}

function ensureChromium() {
  if (fs.existsSync("/usr/bin/chromium")) return;
  if (!aptInstall("chromium") || !fs.existsSync("/usr/bin/chromium")) {
    throw new Error("The end-to-end tests need Debian's Chromium at /usr/bin/chromium: run 'apt-get install -y chromium'.");
  }
}

function postgresBinDir() {
  const candidates = [];
  const pgConfig = which("pg_config");
  if (pgConfig) {
    try {
      candidates.push(execFileSync(pgConfig, ["--bindir"], { encoding: "utf8" }).trim());
    } catch {}
  }
  if (fs.existsSync("/usr/lib/postgresql")) {
    for (const version of fs.readdirSync("/usr/lib/postgresql").sort().reverse()) candidates.push(`/usr/lib/postgresql/${version}/bin`);
  }
  return candidates.find((dir) => fs.existsSync(path.join(dir, "initdb")) && fs.existsSync(path.join(dir, "pg_ctl"))) ?? null;
}

function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

/** A PostgreSQL cluster in a temporary folder, on a free loopback port, removed at exit. */
async function startThrowawayPostgres() {
  let bin = postgresBinDir();
  if (!bin && aptInstall("postgresql")) bin = postgresBinDir();
  if (!bin) throw new Error("The PostgreSQL tests need initdb and pg_ctl: run 'apt-get install -y postgresql', or set TEST_DATABASE_URL.");
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "tinkerlab-pg-"));
  const port = await freePort();
  // PostgreSQL refuses to run as root; as root, the cluster belongs to the postgres user.
  const asPostgres = isRoot ? ["runuser", "-u", "postgres", "--"] : [];
  if (isRoot) execFileSync("chown", ["postgres", dir]);
  const run = (args) => {
    const [command, ...rest] = [...asPostgres, ...args];
    const result = spawnSync(command, rest, { encoding: "utf8" });
    if (result.status !== 0) throw new Error(`${args.join(" ")} failed:\n${result.stdout}${result.stderr}`);
  };
  run([path.join(bin, "initdb"), "-D", path.join(dir, "data"), "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8"]);
  run([
    path.join(bin, "pg_ctl"),
    "-D",
    path.join(dir, "data"),
    "-l",
    path.join(dir, "log"),
    "-w",
    "-t",
    "60",
    "-o",
    `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c max_connections=200`,
    "start",
  ]);
  cleanups.push(() => {
    const [command, ...rest] = [...asPostgres, path.join(bin, "pg_ctl"), "-D", path.join(dir, "data"), "-m", "immediate", "stop"];
    spawnSync(command, rest, { stdio: "ignore" });
    fs.rmSync(dir, { recursive: true, force: true });
  });
  console.log(`Started a throwaway PostgreSQL on 127.0.0.1:${port}`);
  return `postgres://postgres@127.0.0.1:${port}/postgres`;
}

function cleanup() {
  while (cleanups.length) {
    try {
      cleanups.pop()();
    } catch {}
  }
}
process.on("exit", cleanup);
for (const signal of ["SIGINT", "SIGTERM"]) {
  process.on(signal, () => {
    cleanup();
    process.exit(130);
  });
}

async function main() {
  ensureDependencies(root);
  const env = { ...process.env, NODE_ENV: "test" };
  if (projects.includes("e2e")) {
    ensureChromium();
    // The e2e project's global setup would build too, inside vitest's time; built here, vitest's figure is the tests'.
    const started = Date.now();
    if (buildIfStale(root)) console.log(`Built the workbench in ${Math.round((Date.now() - started) / 1000)} s (not in vitest's time).`);
  }
  const needsPostgres = projects.includes("integration-postgres") || projects.includes("e2e");
  if (needsPostgres && !env.TEST_DATABASE_URL) env.TEST_DATABASE_URL = await startThrowawayPostgres();

  const resultsDir = path.join(root, "test-results");
  fs.mkdirSync(resultsDir, { recursive: true });
  const jsonFile = path.join(resultsDir, "vitest.json");
  fs.rmSync(jsonFile, { force: true });
  const args = ["run", ...projects.map((p) => `--project=${p}`), "--reporter=default", "--reporter=json", `--outputFile.json=${jsonFile}`, ...extraArgs];
  const code = await new Promise((resolve) => {
    const child = spawn(path.join(root, "node_modules", ".bin", "vitest"), args, { cwd: root, stdio: "inherit", env });
    child.on("exit", (status, signal) => resolve(status ?? (signal ? 1 : 0)));
  });

  let passed = 0;
  let failed = 0;
  let skipped = 0;
  if (fs.existsSync(jsonFile)) {
    const report = JSON.parse(fs.readFileSync(jsonFile, "utf8"));
    passed = report.numPassedTests;
    const notRun = filesNotRun(report, projects);
    if (notRun.length > 0) console.error(`\n${notRun.length} test files never ran (vitest stopped before them):\n  ${notRun.join("\n  ")}`);
    failed = report.numFailedTests + filesFailedWithoutATest(report) + notRun.length;
    skipped = (report.numPendingTests ?? 0) + (report.numTodoTests ?? 0);
  } else {
    failed = 1; // vitest died before reporting: count that as a failure rather than claim success
  }
  console.log(`\n${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ""}`);
  cleanup();
  process.exit(code !== 0 || failed > 0 ? code || 1 : 0);
}

// A file that fails to load (or whose hooks fail) has no failing test of its own; count it once so the summary
// never hides it.
function filesFailedWithoutATest(report) {
  return report.testResults.filter((file) => file.status === "failed" && !file.assertionResults.some((t) => t.status === "failed")).length;
}

// Vitest runs the end-to-end project's single fork after the others, and skips it without a word when a worker of
// the others failed (an RPC timeout, a crash): each file the projects hold but the report lacks counts as a failure.
function filesNotRun(report, projectNames) {
  const projectArgs = projectNames.map((p) => `--project=${p}`);
  const listed = spawnSync(path.join(root, "node_modules", ".bin", "vitest"), ["list", "--filesOnly", "--json", ...projectArgs], {
    cwd: root,
    encoding: "utf8",
  });
  if (listed.status !== 0) return [`(vitest list failed: ${listed.stderr.trim().split("\n").pop()})`];
  const ran = new Map();
  for (const file of report.testResults) ran.set(file.name, (ran.get(file.name) ?? 0) + 1);
  const missing = [];
  for (const { file, projectName } of JSON.parse(listed.stdout)) {
    const left = ran.get(file) ?? 0;
    if (left > 0) ran.set(file, left - 1);
    else missing.push(`${projectName}: ${path.relative(root, file)}`);
  }
  return missing;
}

main().catch((error) => {
  console.error(`npm test: ${error.message}`);
  console.log("\n0 passed, 1 failed");
  cleanup();
  process.exit(1);
});
