/**
 * The CLI's client commands: login, run, runs (ls, logs, export) and experiments (ls, push, pull). Each talks to a
 * server through `tinkerlab/client` (lib/client) and prints for people, or JSON with --json.
 */
import fs from "node:fs";
import path from "node:path";
import readline from "node:readline/promises";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { SingleBar } from "cli-progress";
import { isFinished, type Run, TinkerlabError, type TinkerlabClient } from "../../lib/client";
import { type RunState, runStates } from "../../lib/lifecycle";
import { baseNameFromFolder, modelFileRule } from "../../lib/model/hf/folder";
import { parseExperiment } from "../../lib/sdk/experiment";
import {
  CliError,
  clientFor,
  compactCount,
  parseContextLength,
  EXIT,
  type GlobalOptions,
  printJson,
  printTable,
  resolveServer,
  writeCredentials,
} from "./context";
import { readExperiment, readLink, sameContent, writeExperiment, writeLink } from "./experiment-folder";
import { RunProgress } from "./run-progress";

const runUrl = (client: TinkerlabClient, runId: string) => `${client.url}/runs/${runId}`;
const when = (date: Date | string | null) => (date ? new Date(date).toISOString().slice(0, 16).replace("T", " ") : null);

/** `tinkerlab login`: checks the server and key, then keeps them for the other commands. */
export async function login(options: GlobalOptions) {
  const { url, apiKey } = resolveServer(options);
  const client = clientFor({ url, key: apiKey });
  const experiments = await client.experiments.list(1);
  const file = writeCredentials({ url: client.url, apiKey });
  if (options.json) printJson({ url: client.url, authenticated: apiKey !== undefined, credentials: file });
  else
    console.log(
      `Logged in to ${client.url}${apiKey ? ` with key ${apiKey.slice(0, 10)}…` : " (no key: a local server)"}; ${experiments.length > 0 ? "experiments are visible" : "no experiments yet"}. Saved to ${file}.`,
    );
}

/** A stored version's config as the folder's is read: parsed (a version saved before configs were checked may not parse). */
function storedConfig(config: unknown): unknown {
  try {
    return parseExperiment(config);
  } catch {
    return config;
  }
}

/** The experiment a folder is on the server: its latest version when unchanged, a new version, or a new experiment. */
async function syncExperiment(client: TinkerlabClient, target: string, message: string) {
  const folder = readExperiment(target);
  const link = readLink(folder.dir);
  if (link && link.url === client.url) {
    try {
      const current = await client.experiments.get(link.experimentId);
      const latest = current.latest;
      if (latest && sameContent({ config: storedConfig(latest.config), files: latest.files as Record<string, string> }, folder)) {
        return { folder, experimentId: link.experimentId, version: latest.version, created: false, saved: false };
      }
      const saved = await client.experiments.save(link.experimentId, { files: folder.files, config: folder.config, message });
      writeLink(folder.dir, { ...link, version: saved.version });
      return { folder, experimentId: link.experimentId, version: saved.version, created: false, saved: true };
    } catch (error) {
      if (!(error instanceof TinkerlabError && error.code === "NOT_FOUND")) throw error;
      // the experiment was deleted, or the link is another server's: a new experiment
    }
  }
  const created = await client.experiments.create({ name: folder.config.name, files: folder.files, config: folder.config });
  writeLink(folder.dir, { url: client.url, experimentId: created.id, version: created.version });
  return { folder, experimentId: created.id, version: created.version, created: true, saved: true };
}

/** `tinkerlab experiments push <dir>`: the folder as the experiment's next version (or a new experiment). */
export async function push(target: string, options: GlobalOptions & { message?: string }) {
  const client = clientFor(options);
  const result = await syncExperiment(client, target, options.message ?? "pushed from the CLI");
  const url = `${client.url}/experiments/${result.experimentId}`;
  if (options.json) printJson({ experimentId: result.experimentId, version: result.version, created: result.created, saved: result.saved, url });
  else if (!result.saved) console.log(`Unchanged: ${result.experimentId} is at version ${result.version}. ${url}`);
  else console.log(`${result.created ? "Created" : "Saved"} ${result.experimentId} version ${result.version}. ${url}`);
}

/** `tinkerlab experiments pull <id> [dir]`: an experiment's version (default its latest) into a folder. */
export async function pull(experimentId: string, dir: string | undefined, options: GlobalOptions & { version?: string }) {
  const client = clientFor(options);
  const experiment = await client.experiments.get(experimentId);
  const version = options.version !== undefined ? Number(options.version) : experiment.latestVersion;
  if (!Number.isInteger(version) || version < 1) throw new CliError(`--version must be a whole number from 1; got '${options.version}'`, EXIT.usage);
  const saved = version === experiment.latest?.version ? experiment.latest : await client.experiments.version(experimentId, version);
  if (!saved) throw new CliError(`experiment ${experimentId} has no version ${version}`, EXIT.refused);
  const target = path.resolve(dir ?? experiment.name.replace(/[^\w.-]+/g, "-"));
  const files = saved.files as Record<string, string>;
  writeExperiment(target, saved.config, files);
  writeLink(target, { url: client.url, experimentId, version });
  if (options.json) printJson({ experimentId, version, dir: target, files: Object.keys(files) });
  else
    console.log(
      `Wrote ${experiment.name} version ${version} to ${target}: experiment.json${Object.keys(files).length ? `, ${Object.keys(files).join(", ")}` : ""}.`,
    );
}

export async function experimentsList(options: GlobalOptions & { limit?: string }) {
  const client = clientFor(options);
  const items = await client.experiments.list(Number(options.limit ?? 50));
  printTable(
    items.map((e) => ({ id: e.id, name: e.name, version: e.latestVersion, updated: when(e.updatedAt) })),
    ["id", "name", "version", "updated"],
    options.json,
  );
}

export async function runsList(options: GlobalOptions & { experiment?: string; status?: string[]; limit?: string }) {
  const client = clientFor(options);
  const { items } = await client.runs.list({
    experimentId: options.experiment,
    // commander let only these through (.choices(runStates))
    status: options.status?.filter((status): status is RunState => (runStates as readonly string[]).includes(status)),
    limit: Number(options.limit ?? 20),
  });
  printTable(
    items.map((r) => ({
      id: r.id,
      name: r.name,
      experiment: r.experimentName,
      status: r.status,
      step: `${r.step}/${r.totalSteps}`,
      created: when(r.createdAt),
    })),
    ["id", "name", "experiment", "status", "step", "created"],
    options.json,
  );
}

/** `tinkerlab bases ls`: the built-in and imported bases, then the caller's runs' checkpoints. */
export async function basesList(options: GlobalOptions) {
  const client = clientFor(options);
  const { builtin, checkpoints } = await client.models.bases();
  const size = (shape: { parameters: number } | null) => (shape ? compactCount(shape.parameters) : "?");
  printTable(
    [
      ...builtin.map((b) => ({
        base: b.name,
        kind: b.imported ? "imported" : "built-in",
        parameters: size(b.shape),
        context: String(b.shape?.contextLength ?? "?"),
        origin: b.origin,
      })),
      ...checkpoints.map((c) => ({
        base: c.id,
        kind: `checkpoint (${c.mode})`,
        parameters: size(c.shape),
        context: String(c.shape?.contextLength ?? "?"),
        origin: `${c.experimentName} / ${c.runName}, step ${c.step}`,
      })),
    ],
    ["base", "kind", "parameters", "context", "origin"],
    options.json,
  );
}

/** `tinkerlab bases push <dir>`: uploads a Hugging Face model folder to the server and imports it as a base. */
export async function basesPush(dir: string, options: GlobalOptions & { name?: string; contextLength?: string; replace?: boolean }) {
  const folder = path.resolve(dir);
  if (!fs.existsSync(folder) || !fs.statSync(folder).isDirectory())
    throw new CliError(`'${dir}' is not a folder; give a Hugging Face model's folder`, EXIT.usage);
  const names = fs.readdirSync(folder).filter((file) => modelFileRule.test(file));
  if (!names.includes("config.json")) throw new CliError(`'${dir}' has no config.json: is it a Hugging Face model's folder?`, EXIT.usage);
  const name = options.name ?? baseNameFromFolder(path.basename(folder));
  const contextLength = parseContextLength(options.contextLength);
  const files = names.map((file) => {
    const full = path.join(folder, file);
    return {
      name: file,
      bytes: fs.statSync(full).size,
      open: () => Readable.toWeb(fs.createReadStream(full)) as ReadableStream<Uint8Array>,
    };
  });
  const total = files.reduce((sum, f) => sum + f.bytes, 0);
  const bar =
    options.json || !process.stderr.isTTY
      ? null
      : new SingleBar({ format: "uploading {bar} {percentage}% | {file}", stream: process.stderr, hideCursor: true });
  bar?.start(total, 0, { file: "" });
  let sent = 0;
  const client = clientFor(options);
  const record = await client.models
    .importFolder(name, files, {
      contextLength,
      replace: options.replace,
      onFile: (file, bytes) => {
        sent += bytes;
        bar?.update(sent, { file });
      },
    })
    .finally(() => bar?.stop());
  if (options.json) printJson(record);
  else {
    console.log(
      `Imported ${record.modelType} as base '${record.name}': ${compactCount(record.parameters)} parameters (${(total / 1024 ** 2).toFixed(1)} MiB sent).`,
    );
    console.log(`Name it as a run's base: "agent": { "base": "${record.name}" }`);
  }
}

/** `tinkerlab runs logs <id>`: the run's log; with --follow, new lines until the run ends. */
export async function runsLogs(runId: string, options: GlobalOptions & { follow?: boolean }) {
  const client = clientFor(options);
  let afterSeq = 0;
  for (;;) {
    const lines = await client.runs.logs(runId, afterSeq);
    for (const line of lines) {
      if (options.json) console.log(JSON.stringify(line));
      else console.log(`${when(line.createdAt)}  ${line.level.padEnd(5)}  ${line.message}`);
      afterSeq = line.seq;
    }
    if (lines.length === 1000) continue;
    if (!options.follow || isFinished((await client.runs.get(runId)).status)) return;
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
}

/** `tinkerlab runs export <id>`: the run, its metrics as CSV, its rollouts as JSONL, its checkpoints (and their models with --onnx). */
export async function runsExport(runId: string, options: GlobalOptions & { out?: string; onnx?: boolean }) {
  const client = clientFor(options);
  const run = await client.runs.get(runId);
  const dir = path.resolve(options.out ?? runId);
  fs.mkdirSync(dir, { recursive: true });
  const written: string[] = [];
  const write = (name: string, data: string | Uint8Array) => {
    fs.mkdirSync(path.dirname(path.join(dir, name)), { recursive: true });
    fs.writeFileSync(path.join(dir, name), data);
    written.push(name);
  };
  write("run.json", `${JSON.stringify(run, null, 2)}\n`);
  const rows = ["step,name,value,wall_time"];
  for (let afterSeq = 0; ; ) {
    const page = await client.runs.metrics(runId, afterSeq);
    for (const p of page.points) rows.push(`${p.step},${csvField(p.name)},${p.value},${new Date(p.wallTime).toISOString()}`);
    if (page.points.length === 0 || page.lastSeq === afterSeq) break;
    afterSeq = page.lastSeq;
  }
  write("metrics.csv", `${rows.join("\n")}\n`);
  // Every stored rollout, training and evaluation, streamed to the file; a failed download leaves no file behind.
  const rollouts = path.join(dir, "rollouts.jsonl");
  const partial = `${rollouts}.partial`;
  const stream = await client.runs.rolloutsJsonlStream(runId);
  try {
    await pipeline(Readable.fromWeb(stream as import("node:stream/web").ReadableStream), fs.createWriteStream(partial));
  } catch (error) {
    fs.rmSync(partial, { force: true });
    throw new CliError(`the download of ${runId}'s rollouts broke off: ${(error as Error).message}; nothing was written to rollouts.jsonl`, EXIT.unreachable);
  }
  fs.renameSync(partial, rollouts);
  written.push("rollouts.jsonl");
  const checkpoints = await client.runs.checkpoints(runId);
  write("checkpoints.json", `${JSON.stringify(checkpoints, null, 2)}\n`);
  if (options.onnx) {
    for (const checkpoint of checkpoints.filter((c) => c.kind === "state")) {
      if (!options.json) process.stderr.write(`downloading ${checkpoint.id}.onnx (step ${checkpoint.step})…\n`);
      write(`models/${checkpoint.id}.onnx`, await client.models.onnx(checkpoint.id));
    }
  }
  if (options.json) printJson({ runId, dir, files: written, metricPoints: rows.length - 1 });
  else console.log(`Exported ${run.name} (${run.status}, step ${run.step}/${run.totalSteps}) to ${dir}: ${written.join(", ")}.`);
}

/** `tinkerlab export <model>`: a built-in base or a checkpoint as an ONNX file (key/value cache in and out; docs/BROWSER.md). */
export async function exportModel(name: string, options: GlobalOptions & { out?: string }) {
  const client = clientFor(options);
  const bytes = await client.models.onnx(name);
  const file = path.resolve(options.out ?? `${name}.onnx`);
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, bytes);
  if (options.json) printJson({ model: name, file, bytes: bytes.length });
  else console.log(`Wrote ${name} as ONNX to ${file} (${(bytes.length / 1e6).toFixed(2)} MB).`);
}

const csvField = (text: string) => (/[",\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text);

/**
 * `tinkerlab run <dir|config.json>`: saves the folder as the experiment's next version (or a new experiment),
 * launches a run and follows it with a progress bar (step, reward, ETA) until it ends. The server validates what it
 * launches and refuses what the experiment editor refuses, in its words (`runs.launch`): the CLI prints each problem
 * and exits 3 with nothing launched. The exit code is otherwise the run's outcome: 0 completed, 1 failed, 4
 * cancelled. Ctrl-C asks whether to cancel the run; answering no leaves it running on the server.
 */
export async function run(target: string, options: GlobalOptions & { follow?: boolean; message?: string }) {
  const client = clientFor(options);
  const synced = await syncExperiment(client, target, options.message ?? "run from the CLI");
  const say = (line: string) => !options.json && console.log(line);
  say(`${synced.created ? "Created" : synced.saved ? "Saved" : "Using"} experiment ${synced.experimentId} version ${synced.version}.`);

  let launched: Awaited<ReturnType<TinkerlabClient["runs"]["launch"]>>;
  try {
    if (!options.json && synced.folder.config.environment === "custom") console.error("Validating the source in the sandbox…");
    launched = await client.runs.launch(synced.experimentId);
  } catch (error) {
    // The refusal's first line says why, the next ones are its problems: each on a line of its own, as the editor lists them.
    if (!(error instanceof TinkerlabError && error.code === "BAD_REQUEST")) throw error;
    const [reason = error.message, ...problems] = error.message.split("\n");
    if (options.json) printJson({ experimentId: synced.experimentId, version: synced.version, refused: reason, problems });
    else for (const problem of problems) console.error(`error: ${problem}`);
    throw new CliError(reason, EXIT.refused);
  }
  const { runId } = launched;
  for (const d of launched.diagnostics) {
    const where = d.file ? `${d.file}${d.line ? `:${d.line}${d.column ? `:${d.column}` : ""}` : ""}: ` : "";
    if (!options.json) console.error(`${d.severity}: ${where}${d.message}`);
  }
  const url = runUrl(client, runId);
  if (options.follow === false) {
    if (options.json) printJson({ runId, url, experimentId: synced.experimentId, version: synced.version });
    else say(`Launched ${runId}: ${url}`);
    return EXIT.ok;
  }
  say(`Launched ${runId}: ${url}`);
  const final = await follow(client, runId, options);
  if (options.json) printJson({ runId, url, status: final.status, step: final.step, reason: final.reason });
  else say(`Run ${runId} ${final.status} at step ${final.step}/${final.totalSteps}${final.reason ? `: ${final.reason}` : ""}. ${url}`);
  return final.status === "completed" ? EXIT.ok : final.status === "cancelled" ? EXIT.runCancelled : EXIT.runFailed;
}

/** Follows a run with a progress bar (none with --json or when stdout is not a terminal); Ctrl-C asks to cancel. */
async function follow(client: TinkerlabClient, runId: string, options: GlobalOptions): Promise<Run> {
  const interactive = process.stdout.isTTY && !options.json;
  // ETA {left}: the time left as RunProgress reckons it, not cli-progress's own guess from the bar's moves.
  const bar = interactive
    ? new SingleBar({ format: "{bar} {value}/{total} steps | reward {reward} | ETA {left} | {status}{resumed}", hideCursor: true })
    : null;
  const controller = new AbortController();
  let asking = false;
  const onInterrupt = async () => {
    if (asking || !process.stdin.isTTY) {
      // a second Ctrl-C, or no one to ask: stop following, leave the run as it is
      bar?.stop();
      console.error(`\nStopped following; the run goes on: ${runUrl(client, runId)}`);
      process.exit(130);
    }
    asking = true;
    bar?.stop();
    const rl = readline.createInterface({ input: process.stdin, output: process.stderr });
    const answer = await rl.question(`\nCancel run ${runId}? [y/N] `);
    rl.close();
    asking = false;
    if (/^y(es)?$/i.test(answer.trim())) {
      await client.runs.cancel(runId);
      console.error("Cancelling…");
    } else {
      console.error(`Stopped following; the run goes on: ${runUrl(client, runId)}`);
      controller.abort();
    }
  };
  process.on("SIGINT", onInterrupt);
  let last: Run | null = null;
  let started = false;
  const progress = new RunProgress(runId);
  try {
    for await (const update of client.runs.follow(runId, { intervalMs: 1000, signal: controller.signal })) {
      last = update.run;
      const { view, note } = progress.observe(update);
      if (note && !options.json) {
        // On a line of its own above the bar, which goes on below it.
        if (bar && started) {
          bar.stop();
          started = false;
        }
        console.log(note);
      }
      if (bar) {
        if (!started) bar.start(view.total, view.value, view);
        else {
          bar.setTotal(view.total);
          bar.update(view.value, view);
        }
        started = true;
      } else if (!options.json && update.points.length > 0) {
        console.log(`step ${view.value}/${view.total}  reward ${view.reward}  ETA ${view.left}  ${view.status}${view.resumed}`);
      }
    }
  } finally {
    process.off("SIGINT", onInterrupt);
    bar?.stop();
  }
  if (controller.signal.aborted) process.exit(EXIT.ok);
  return last!;
}
