// Preloaded (NODE_OPTIONS=--require) by `bench:chaos` into every process of the server's tree: records the metric
// points of each `worker.report` call a process sends, before the server sees it, as one JSON line per report in
// BENCH_REPORT_TAP_DIR/<pid>.jsonl: {"at","workerId","jobId","points":[[step, name, value], …]}. The server stores
// the first point of each (run, name, step) and drops later ones, so this is the only record of what a step trained
// again after a worker's loss computed.
const fs = require("node:fs");
const path = require("node:path");
const dir = process.env.BENCH_REPORT_TAP_DIR;

// tRPC over HTTP: /api/trpc/a,b?batch=1 carries {"0": {json: input of a}, "1": …}; without batch, {json: input}.
function reportLines(address, body) {
  const procedures = decodeURIComponent(address.pathname.split("/").at(-1)).split(",");
  const parsed = JSON.parse(body);
  const inputs = address.searchParams.get("batch") === "1" ? procedures.map((_, i) => parsed[i]?.json) : [parsed.json];
  const lines = [];
  for (const [i, input] of inputs.entries()) {
    if (procedures[i] !== "worker.report" || !input?.metrics?.length) continue;
    // superjson sends NaN and infinities as strings ("NaN", "Infinity"), which Number reads back
    const points = input.metrics.map((m) => [m.step, m.name, Number(m.value)]);
    lines.push(JSON.stringify({ at: Date.now(), workerId: input.workerId, jobId: input.jobId, points }));
  }
  return lines;
}

if (dir && typeof globalThis.fetch === "function") {
  const file = path.join(dir, `${process.pid}.jsonl`);
  const send = globalThis.fetch;
  globalThis.fetch = function tappedFetch(input, init) {
    try {
      const address = new URL(typeof input === "string" || input instanceof URL ? input : input.url);
      if (address.pathname.includes("worker.report") && typeof init?.body === "string") {
        const lines = reportLines(address, init.body);
        if (lines.length) fs.appendFileSync(file, `${lines.join("\n")}\n`);
      }
    } catch {
      // a body this tap cannot read is sent all the same
    }
    return send.call(this, input, init);
  };
}
