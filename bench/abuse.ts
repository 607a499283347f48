/**
 * `npm run bench:abuse`: a team server (`TINKERLAB_AUTH=team`, the real `tinkerlab start` as a child process) under
 * the abuse a hostile or careless caller brings, measured from outside as that caller sees it:
 *   - revocation with streams open: a run's live metric stream opened with a share link, with an API key and with a
 *     session cookie; the link is revoked, the key revoked, the session signed out; how long each stream keeps
 *     sending before it ends (the target: within 5,000 ms);
 *   - batch storms: 5 signed-out callers each sending `health.check` batched 1,000 times, again and again for
 *     `--storm-s` seconds (default 10), while `/api/health` is asked every 100 ms; its p99 (target: under 1,000 ms);
 *   - retries: 200 `experiments.create` with one idempotency key, all at once; how many experiments exist after
 *     (target: 0 duplicates);
 *   - 20 simultaneous `experiments.validate` with type-checking: each either answers or is told to retry (429);
 *     any other failure counts;
 *   - a type-check that imports a file outside the experiment by its absolute path (and one that does not exist):
 *     the server's processes run with a preload (bench/lib/fs-watch-preload.cjs) that counts every file-system call
 *     naming the bait's folder (target: 0 reads), and the two diagnostics must not differ.
 * `--hogs N` keeps N busy processes beside the server throughout. A table, then one JSON line:
 * {"stream_close_after_revoke_ms", "health_p99_ms_under_abuse", "duplicates_created", "typecheck_file_reads", …}.
 */
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { saveTinyBase, tinyExperiment } from "../test/support/tiny-run";
import { ROOT, startServer, tempDir, type TestServer } from "../test/e2e/support/server";
import { formatTable, quantile } from "./lib/measure";

const option = (name: string, fallback: number) => (process.argv.includes(name) ? Number(process.argv[process.argv.indexOf(name) + 1]) : fallback);
const stormSeconds = option("--storm-s", 10);
const creates = option("--creates", 200);
const validations = option("--validations", 20);
/** --hogs N: busy processes beside the server for the whole run (a machine other work keeps busy). */
const hogCount = option("--hogs", 0);

type Answer = { status: number; body: unknown; text: string };

/** One tRPC call over HTTP as a client makes it (superjson envelope), with whatever headers the caller sends. */
async function call(server: TestServer, procedure: string, input: unknown, headers: Record<string, string> = {}): Promise<Answer> {
  const response = await fetch(`${server.url}/api/trpc/${procedure}`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify({ json: input }),
  });
  const text = await response.text();
  let body: unknown = null;
  try {
    body = JSON.parse(text);
  } catch {}
  return { status: response.status, body, text };
}

/** The answer's data, or a thrown error naming the procedure and what the server said. */
async function must<T>(server: TestServer, procedure: string, input: unknown, headers: Record<string, string> = {}): Promise<T> {
  const answer = await call(server, procedure, input, headers);
  const body = answer.body as { result?: { data: { json: T } } } | null;
  if (answer.status !== 200 || !body?.result) throw new Error(`${procedure}: ${answer.status} ${answer.text.slice(0, 400)}`);
  return body.result.data.json;
}

/** Signs up (the first account becomes the admin) or in, and answers the session cookie. */
async function session(server: TestServer, route: "sign-up" | "sign-in", email: string, password: string): Promise<string> {
  const response = await fetch(`${server.url}/api/auth/${route}/email`, {
    method: "POST",
    headers: { "content-type": "application/json", origin: server.url },
    body: JSON.stringify({ name: email.split("@")[0], email, password }),
  });
  if (!response.ok) throw new Error(`${route}: ${response.status} ${await response.text()}`);
  const cookie = response.headers.getSetCookie().find((c) => c.startsWith("tinkerlab.session_token="));
  if (!cookie) throw new Error(`${route} set no session cookie`);
  return cookie.split(";")[0]!;
}

/**
 * Opens a run's live metric stream as the browser's client does and resolves, once the stream has ended (by the
 * server), with the time of its last byte; `opened` resolves at its first byte.
 */
function openStream(server: TestServer, runId: string, credential: { headers?: Record<string, string>; share?: string }) {
  const controller = new AbortController();
  const query = new URLSearchParams({ input: JSON.stringify({ json: { runId } }) });
  if (credential.share) query.set("connectionParams", JSON.stringify({ share: credential.share }));
  let lastByte = 0;
  let events = 0;
  let resolveOpened!: () => void;
  const opened = new Promise<void>((resolve) => (resolveOpened = resolve));
  const ended = (async () => {
    const response = await fetch(`${server.url}/api/trpc/runs.metricStream?${query}`, { headers: credential.headers, signal: controller.signal });
    if (!response.ok || !response.body) throw new Error(`stream: ${response.status} ${await response.text()}`);
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let tail = "";
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      lastByte = performance.now();
      const text = tail + decoder.decode(value, { stream: true });
      events += text.split("\n\n").length - 1;
      tail = text.slice(text.lastIndexOf("\n\n") + 2);
      resolveOpened();
    }
    return { lastByte, events, tail };
  })();
  return { opened, ended, abort: () => controller.abort(), events: () => events, lastByte: () => lastByte };
}

/** How long after `revoke` resolves the stream ends; a stream still open after `limitMs` counts as that much and is closed. */
async function closeAfterRevoke(
  stream: ReturnType<typeof openStream>,
  revoke: () => Promise<unknown>,
  limitMs = 30_000,
): Promise<{ ms: number; closed: boolean }> {
  await stream.opened;
  const started = performance.now();
  await revoke();
  const result = await Promise.race([
    stream.ended.then(() => ({ ms: performance.now() - started, closed: true })),
    new Promise<{ ms: number; closed: boolean }>((resolve) => setTimeout(() => resolve({ ms: limitMs, closed: false }), limitMs)),
  ]);
  if (!result.closed) stream.abort();
  return result;
}

async function revocations(server: TestServer, cookie: string, password: string, email: string, runId: string, projectId: string) {
  const rows: Record<string, { ms: number; closed: boolean }> = {};
  // A share link: revoked by its maker.
  const link = await must<{ id: string; token: string }>(server, "shareLinks.create", { kind: "run", runIds: [runId] }, { cookie });
  rows["share link revoked"] = await closeAfterRevoke(openStream(server, runId, { share: link.token }), () =>
    must(server, "shareLinks.revoke", { id: link.id }, { cookie }),
  );
  // An API key: revoked on the Settings page's procedure.
  const key = await must<{ id: string; key: string }>(server, "apiKeys.create", { name: "bench", projectId, role: "viewer", expiresInDays: null }, { cookie });
  rows["API key revoked"] = await closeAfterRevoke(openStream(server, runId, { headers: { authorization: `Bearer ${key.key}` } }), () =>
    must(server, "apiKeys.revoke", { id: key.id }, { cookie }),
  );
  // A second session of the same person, signed out.
  const second = await session(server, "sign-in", email, password);
  rows["signed out"] = await closeAfterRevoke(openStream(server, runId, { headers: { cookie: second } }), () =>
    fetch(`${server.url}/api/auth/sign-out`, {
      method: "POST",
      headers: { cookie: second, origin: server.url, "content-type": "application/json" },
      body: "{}",
    }).then((r) => {
      if (!r.ok) throw new Error(`sign-out: ${r.status}`);
    }),
  );
  return rows;
}

/** `/api/health` every 100 ms while 5 signed-out callers storm with 1,000-call batches; its latencies and what the storms heard. */
async function storms(server: TestServer) {
  // As the caller sent it: the path alone (an `input` for 1,000 calls would pass Node's 16 KiB header limit).
  const batchPath = `/api/trpc/${Array.from({ length: 1000 }, () => "health.check").join(",")}?batch=1`;
  const until = performance.now() + stormSeconds * 1000;
  const statuses = new Map<number, number>();
  const stormTimes: number[] = [];
  const storm = async () => {
    while (performance.now() < until) {
      const started = performance.now();
      try {
        const response = await fetch(`${server.url}${batchPath}`);
        await response.arrayBuffer();
        statuses.set(response.status, (statuses.get(response.status) ?? 0) + 1);
      } catch {
        statuses.set(0, (statuses.get(0) ?? 0) + 1);
      }
      stormTimes.push(performance.now() - started);
    }
  };
  const health: number[] = [];
  const probe = async () => {
    while (performance.now() < until) {
      const started = performance.now();
      const response = await fetch(`${server.url}/api/health`);
      await response.arrayBuffer();
      health.push(performance.now() - started);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  };
  await Promise.all([probe(), ...Array.from({ length: 5 }, storm)]);
  return { health, statuses, stormTimes };
}

/** 200 creates at once, all with one idempotency key; how many experiments of that name exist after. */
async function retries(server: TestServer, cookie: string, projectId: string) {
  const name = `retried-${Date.now()}`;
  const input = { ...tinyExperiment(name, 4), projectId, idempotencyKey: `bench-abuse-${Date.now()}` };
  const answers = await Promise.all(Array.from({ length: creates }, () => call(server, "experiments.create", input, { cookie })));
  const ids = new Set(
    answers.flatMap((a) =>
      (a.body as { result?: { data: { json: { id: string } } } })?.result
        ? [(a.body as { result: { data: { json: { id: string } } } }).result.data.json.id]
        : [],
    ),
  );
  const listed = await fetch(`${server.url}/api/trpc/experiments.list?input=${encodeURIComponent(JSON.stringify({ json: { limit: 200 } }))}`, {
    headers: { cookie },
  }).then((r) => r.json() as Promise<{ result: { data: { json: { name: string }[] } } }>);
  const made = listed.result.data.json.filter((e) => e.name === name).length;
  const statuses = new Map<number, number>();
  for (const a of answers) statuses.set(a.status, (statuses.get(a.status) ?? 0) + 1);
  return { made, distinctIds: ids.size, statuses };
}

const ENVIRONMENT = `import { defineEnvironment } from "tinkerlab";
export default defineEnvironment<{ n: number }, number>({
  name: "count",
  data: { kind: "free" },
  systemPrompt: "Say a number.",
  maxTurns: 3,
  reset: () => ({ state: { n: 0 }, observation: "0" }),
  parseAction: (text) => (/^\\d+$/.test(text) ? { ok: true, action: Number(text) } : { ok: false, error: "a number" }),
  step: (state, action) => ({ state: { n: state.n + action }, reward: 1, done: state.n + action > 2, observation: String(state.n + action) }),
});
`;

/** 20 validations with type-checking at once: how many answered, how many were told to retry, and any other failures. */
async function simultaneousValidations(server: TestServer, cookie: string, experimentId: string) {
  const answers = await Promise.all(
    Array.from({ length: validations }, () =>
      call(server, "experiments.validate", { experimentId, files: { "environment.ts": ENVIRONMENT }, typeCheck: true }, { cookie }),
    ),
  );
  let answered = 0;
  let busy = 0;
  const failures: string[] = [];
  for (const a of answers) {
    if (a.status === 200) answered++;
    else if (a.status === 429) busy++;
    else failures.push(`${a.status} ${a.text.slice(0, 200)}`);
  }
  return { answered, busy, failures };
}

/** A type-check importing the bait by its absolute path, and a path that does not exist: diagnostics of each. */
async function sealedTypeCheck(server: TestServer, cookie: string, experimentId: string, bait: string) {
  const attack = (file: string) =>
    `${ENVIRONMENT}\ntype Stolen = typeof import(${JSON.stringify(file)});\nexport const probe: Stolen = null as unknown as Stolen;\nimport type {} from ${JSON.stringify(file.replace(/\.json$/, ""))};\n`;
  const diagnosticsOf = async (file: string) => {
    const report = await must<{ diagnostics: { message: string }[] }>(
      server,
      "experiments.validate",
      { experimentId, files: { "environment.ts": attack(file) }, typeCheck: true, episodes: 1 },
      { cookie },
    );
    return report.diagnostics.map((d) => d.message.replaceAll(file, "<path>").replaceAll(file.replace(/\.json$/, ""), "<path>"));
  };
  const existing = await diagnosticsOf(path.join(bait, "state.json"));
  const missing = await diagnosticsOf(path.join(bait, "absent", "state.json"));
  const leaked = existing.some((m) => m.includes("launchCodes"));
  return { existing, missing, differ: JSON.stringify(existing) !== JSON.stringify(missing), leaked };
}

async function main() {
  const cpu = os.cpus()[0]?.model ?? "unknown CPU";
  const hogs = Array.from({ length: hogCount }, () => spawn(process.execPath, ["-e", "for (;;) {}"], { stdio: "ignore" }));
  process.on("exit", () => {
    for (const hog of hogs) hog.kill("SIGKILL");
  });
  const basesDir = tempDir("bases");
  await saveTinyBase(basesDir);
  const bait = tempDir("bait");
  fs.writeFileSync(path.join(bait, "state.json"), JSON.stringify({ launchCodes: "0000", owner: "root" }));
  fs.writeFileSync(path.join(bait, "secret.ts"), "export const secret = 1;\n");
  const readsLog = path.join(tempDir("reads"), "reads.log");
  fs.writeFileSync(readsLog, "");
  const preload = path.join(ROOT, "bench", "lib", "fs-watch-preload.cjs");
  const server = await startServer({
    TINKERLAB_AUTH: "team",
    TINKERLAB_BASES_DIR: basesDir,
    TINKERLAB_EXAMPLES: "off",
    TINKERLAB_LOCAL_WORKERS: "0",
    ARTIFACTS_DIR: tempDir("artifacts"),
    NODE_OPTIONS: `--require ${preload}`,
    TINKERLAB_BENCH_WATCH_DIR: bait,
    TINKERLAB_BENCH_WATCH_LOG: readsLog,
  });
  try {
    const email = "admin@example.com";
    const password = "a long enough password";
    const cookie = await session(server, "sign-up", email, password);
    const projectA = await must<{ id: string }>(server, "projects.create", { name: "Alpha" }, { cookie });
    await must<{ id: string }>(server, "projects.create", { name: "Beta" }, { cookie });
    const experiment = await must<{ id: string }>(server, "experiments.create", { ...tinyExperiment("streamed", 100_000), projectId: projectA.id }, { cookie });
    // No local workers: the run stays queued, and its stream stays open (pings) until something ends it.
    const { runId } = await must<{ runId: string }>(server, "runs.launch", { experimentId: experiment.id }, { cookie });

    const revoked = await revocations(server, cookie, password, email, runId, projectA.id);
    const load = () => os.loadavg()[0]!.toFixed(1);
    const loadBefore = load();
    const stormed = await storms(server);
    const retried = await retries(server, cookie, projectA.id);
    const validated = await simultaneousValidations(server, cookie, experiment.id);
    fs.writeFileSync(readsLog, ""); // only the type-check's own reads count
    const sealed = await sealedTypeCheck(server, cookie, experiment.id, bait);
    const reads = fs.readFileSync(readsLog, "utf8").split("\n").filter(Boolean);

    const streamCloseMs = Math.max(...Object.values(revoked).map((r) => r.ms));
    const p99 = quantile(stormed.health, 0.99);
    const fmtStatuses = (m: Map<number, number>) => [...m].map(([s, n]) => `${n}×${s}`).join(", ");
    console.log(
      formatTable(
        ["measure", "value", "target"],
        [
          ...Object.entries(revoked).map(([what, r]) => [
            `stream after ${what}`,
            r.closed ? `closed in ${r.ms.toFixed(0)} ms` : `still open at ${r.ms} ms`,
            "≤ 5,000 ms",
          ]),
          [
            "/api/health during storms (p50 / p99 / max)",
            `${quantile(stormed.health, 0.5).toFixed(0)} / ${p99.toFixed(0)} / ${Math.max(...stormed.health).toFixed(0)} ms (${stormed.health.length} probes)`,
            "p99 < 1,000 ms",
          ],
          ["storm answers", `${fmtStatuses(stormed.statuses)}; median ${quantile(stormed.stormTimes, 0.5).toFixed(0)} ms`, "a clear 400, cheaply"],
          [`${creates} creates, one idempotency key`, `${retried.made} made, ${retried.distinctIds} distinct ids; ${fmtStatuses(retried.statuses)}`, "1 made"],
          [
            `${validations} simultaneous validations`,
            `${validated.answered} answered, ${validated.busy} told to retry, ${validated.failures.length} failed`,
            "0 failed",
          ],
          [
            "type-check import outside the experiment",
            `${reads.length} file reads; diagnostics ${sealed.differ ? "differ" : "identical"} for a real and a missing file${sealed.leaked ? "; file's keys leaked" : ""}`,
            "0 reads, identical",
          ],
        ],
      ),
    );
    if (validated.failures.length > 0) console.log(`validation failures:\n  ${validated.failures.join("\n  ")}`);
    if (reads.length > 0) console.log(`reads of the bait's folder:\n  ${[...new Set(reads)].slice(0, 10).join("\n  ")}`);
    console.log(
      `machine: ${cpu}, ${os.cpus().length} cores, ${hogCount} CPU hogs beside the server; load before the storms ${loadBefore}, after ${load()}; storms ${stormSeconds} s`,
    );
    console.log(
      JSON.stringify({
        stream_close_after_revoke_ms: Math.round(streamCloseMs),
        health_p99_ms_under_abuse: Math.round(p99),
        duplicates_created: Math.max(0, retried.made - 1),
        typecheck_file_reads: reads.length,
        typecheck_diagnostics_differ: sealed.differ,
        validations_failed: validated.failures.length,
        validations_busy: validated.busy,
        hogs: hogCount,
        cpu,
      }),
    );
  } finally {
    await server.stop();
  }
}

main().then(
  () => process.exit(0),
  (error) => {
    console.error(error);
    process.exit(1);
  },
);
