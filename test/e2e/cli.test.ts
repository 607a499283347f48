/**
 * The `tinkerlab` command line against a running server, as a script or a person in a terminal uses it: login,
 * pull an example into a folder, change it, run it to the end (exit code from the run), push, export, Ctrl-C while
 * following a run (with no terminal, and in a terminal that asks whether to cancel it), refusing what the editor
 * refuses (in its words, with no run launched), and clear one-line errors with their own exit codes for a folder
 * without a config, code that does not validate, an unknown run, and a server that is not there.
 */
import { spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { stripVTControlCharacters } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort, ROOT, startServer, tempDir, type TestServer } from "./support/server";

/** util-linux's `script`, which gives the CLI a terminal (Debian's bsdutils, installed everywhere). */
const hasScript = spawnSync("script", ["--version"]).status === 0;

let server: TestServer;
let home: string;
let work: string;

beforeAll(async () => {
  server = await startServer({ ARTIFACTS_DIR: tempDir("artifacts") });
  home = tempDir("cli-home");
  work = tempDir("cli-work");
}, 180_000);
afterAll(() => server?.stop());

/**
 * Runs the CLI (bin/tinkerlab) in `work` with its own config folder; resolves with its exit code and output.
 * `onStdout` sees the output as it comes, with the child (to signal it).
 */
function cli(
  args: string[],
  env: Record<string, string> = {},
  onStdout?: (text: string, child: ReturnType<typeof spawn>) => void,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(path.join(ROOT, "bin", "tinkerlab"), args, {
      cwd: work,
      env: { NODE_ENV: "production", PATH: process.env.PATH, HOME: home, XDG_CONFIG_HOME: path.join(home, ".config"), ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk) => {
      stdout += chunk;
      onStdout?.(stdout, child);
    });
    child.stderr.on("data", (chunk) => (stderr += chunk));
    // "close", not "exit": the process can end before its last output has been read.
    child.on("close", (code) => resolve({ code, stdout, stderr }));
  });
}

/** A folder `name` in `work` holding a 2,000-step arithmetic experiment: a run that goes on until stopped. */
function longExperiment(name: string) {
  fs.mkdirSync(path.join(work, name), { recursive: true });
  const config = { name, environment: "arithmetic", agent: { base: "arithmetic-base" }, algorithm: { name: "grpo", steps: 2000, groupsPerStep: 4 } };
  fs.writeFileSync(path.join(work, name, "experiment.json"), JSON.stringify(config));
}

describe("the tinkerlab CLI", () => {
  it("logs in, pulls an example, runs a changed copy to the end, and exports the run", async () => {
    const login = await cli(["login", "--url", server.url]);
    expect(login.code, login.stderr).toBe(0);
    expect(login.stdout).toMatch(/Logged in to http:\/\/127\.0\.0\.1:\d+ \(no key: a local server\)/);
    const saved = JSON.parse(fs.readFileSync(path.join(home, ".config", "tinkerlab", "credentials.json"), "utf8"));
    expect(saved).toEqual({ url: server.url });

    // From here on the server comes from the saved login.
    const list = await cli(["experiments", "ls", "--json"]);
    const arithmetic = (JSON.parse(list.stdout) as { id: string; name: string }[]).find((e) => e.name === "arithmetic-grpo")!;
    expect(arithmetic).toBeDefined();
    const pulled = await cli(["experiments", "pull", arithmetic.id, "arith"]);
    expect(pulled.code, pulled.stderr).toBe(0);
    const configFile = path.join(work, "arith", "experiment.json");
    const config = JSON.parse(fs.readFileSync(configFile, "utf8"));
    expect(config.environment).toBe("arithmetic");

    // Unchanged, a push saves nothing; changed, the run saves a version and launches it.
    expect((await cli(["experiments", "push", "arith"])).stdout).toMatch(new RegExp(`Unchanged: ${arithmetic.id} is at version 1`));
    config.algorithm = { ...config.algorithm, steps: 4, groupsPerStep: 4 };
    config.evaluation = { every: 0, episodes: 8 };
    fs.writeFileSync(configFile, JSON.stringify(config, null, 2));
    const run = await cli(["run", "arith", "--json"]);
    expect(run.code, run.stderr).toBe(0);
    const outcome = JSON.parse(run.stdout) as { runId: string; url: string; status: string; step: number };
    expect(outcome).toMatchObject({ status: "completed", step: 4 });
    expect(outcome.url).toBe(`${server.url}/runs/${outcome.runId}`);
    const versions = await cli(["experiments", "ls", "--json"]);
    expect((JSON.parse(versions.stdout) as { id: string; version: number }[]).find((e) => e.id === arithmetic.id)!.version).toBe(2);

    const runs = await cli(["runs", "ls", "--experiment", arithmetic.id]);
    expect(runs.stdout).toMatch(new RegExp(`${outcome.runId} .* completed +4/4`));

    const exported = await cli(["runs", "export", outcome.runId, "-o", "out", "--onnx"]);
    expect(exported.code, exported.stderr).toBe(0);
    const out = path.join(work, "out");
    const csv = fs.readFileSync(path.join(out, "metrics.csv"), "utf8").trim().split("\n");
    expect(csv[0]).toBe("step,name,value,wall_time");
    expect(csv.some((line) => /^4,reward\/mean,/.test(line))).toBe(true);
    const rollouts = fs.readFileSync(path.join(out, "rollouts.jsonl"), "utf8").trim().split("\n");
    expect(rollouts.length).toBeGreaterThan(0);
    expect(JSON.parse(rollouts[0]!)).toHaveProperty("turns");
    const checkpoints = JSON.parse(fs.readFileSync(path.join(out, "checkpoints.json"), "utf8")) as { id: string; kind: string }[];
    const state = checkpoints.filter((c) => c.kind === "state");
    expect(state.length).toBeGreaterThan(0);
    for (const c of state) expect(fs.statSync(path.join(out, "models", `${c.id}.onnx`)).size).toBeGreaterThan(10_000);

    const onnx = await cli(["export", state[0]!.id, "-o", "model.onnx"]);
    expect(onnx.stdout).toMatch(new RegExp(`Wrote ${state[0]!.id} as ONNX to .*model\\.onnx`));
    expect(fs.readFileSync(path.join(work, "model.onnx"))).toEqual(fs.readFileSync(path.join(out, "models", `${state[0]!.id}.onnx`)));
    const missing = await cli(["export", "no-such-base"]);
    expect(missing.code).toBe(3);
    expect(missing.stderr).toMatch(/No model named 'no-such-base'/);

    const logs = await cli(["runs", "logs", outcome.runId]);
    expect(logs.code).toBe(0);
    expect(logs.stdout.trim().split("\n").length).toBeGreaterThan(0);
  }, 240_000);

  it("stops following on Ctrl-C with no terminal to ask on, leaving the run going on the server", async () => {
    longExperiment("long");
    let interrupted = false;
    const followed = await cli(["run", "long", "--url", server.url], {}, (text, child) => {
      if (!interrupted && /Launched run_\w+/.test(text)) {
        interrupted = true;
        setTimeout(() => child.kill("SIGINT"), 1500);
      }
    });
    expect(followed.code).toBe(130);
    const runId = /Launched (run_\w+)/.exec(followed.stdout)![1]!;
    expect(followed.stderr).toContain(`Stopped following; the run goes on: ${server.url}/runs/${runId}`);
    const status = await cli(["runs", "ls", "--json", "--url", server.url]);
    const run = (JSON.parse(status.stdout) as { id: string; status: string }[]).find((r) => r.id === runId)!;
    expect(["queued", "running"]).toContain(run.status);
    await fetch(`${server.url}/api/trpc/runs.control`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ json: { id: runId, action: "cancel" } }),
    });
  }, 120_000);

  it("says where a run it follows resumed from, rather than jump back", async () => {
    longExperiment("paused");
    const control = (id: string, action: string) =>
      fetch(`${server.url}/api/trpc/runs.control`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ json: { id, action } }),
      });
    const runStatus = async (id: string) =>
      (
        (await (await fetch(`${server.url}/api/trpc/runs.byId?input=${encodeURIComponent(JSON.stringify({ json: { id } }))}`)).json()) as {
          result: { data: { json: { status: string } } };
        }
      ).result.data.json.status;
    let stage = "running";
    const followed = await cli(["run", "paused", "--url", server.url], {}, (text) => {
      const runId = /Launched (run_\w+)/.exec(text)?.[1];
      if (!runId) return;
      if (stage === "running" && /step ([3-9]|\d\d+)\/2000/.test(text)) {
        stage = "pausing";
        void (async () => {
          await control(runId, "pause");
          while ((await runStatus(runId)) !== "paused") await new Promise((resolve) => setTimeout(resolve, 250));
          stage = "resuming";
          await control(runId, "resume");
        })();
      }
      if (stage === "resuming" && /resumed from the checkpoint of step \d+/.test(text)) {
        stage = "done";
        void control(runId, "cancel");
      }
    });
    const resumed = /resumed from the checkpoint of step (\d+); `tinkerlab runs logs run_\w+` says why/.exec(followed.stdout);
    expect(resumed, `the CLI printed:\n${followed.stdout}\n${followed.stderr}`).not.toBeNull();
    // It paused at step 3 or later, and resumed from where it paused.
    expect(Number(resumed![1])).toBeGreaterThanOrEqual(3);
    expect(followed.code).toBe(4);
  }, 180_000);

  // A terminal for the CLI: `script` runs it on a pseudo-terminal fed from this test, where Ctrl-C is the byte 0x03
  // that the terminal turns into SIGINT, as when a person presses it.
  it.skipIf(!hasScript)(
    "asks on Ctrl-C in a terminal whether to cancel the run; yes cancels it, and the exit code says so",
    async () => {
      longExperiment("to-cancel");
      // exec: the CLI in place of script's shell, which Ctrl-C would end first (and script would return its 130).
      const command = `exec ${path.join(ROOT, "bin", "tinkerlab")} run to-cancel --url ${server.url}`;
      const { code, output } = await new Promise<{ code: number | null; output: string }>((resolve) => {
        const child = spawn("script", ["--quiet", "--return", "--command", command, "/dev/null"], {
          cwd: work,
          env: { NODE_ENV: "production", PATH: process.env.PATH, HOME: home, XDG_CONFIG_HOME: path.join(home, ".config"), TERM: "xterm" },
          stdio: ["pipe", "pipe", "pipe"],
        });
        let output = "";
        let stage: "launching" | "interrupting" | "asked" = "launching";
        const onOutput = (chunk: Buffer) => {
          output += chunk;
          if (stage === "launching" && /Launched run_\w+/.test(output)) {
            stage = "interrupting";
            setTimeout(() => child.stdin.write("\x03"), 1500);
          } else if (stage === "interrupting" && /Cancel run run_\w+\? \[y\/N\]/.test(output)) {
            stage = "asked";
            child.stdin.write("y\r");
          }
        };
        child.stdout.on("data", onOutput);
        child.stderr.on("data", onOutput);
        child.on("close", (exitCode) => resolve({ code: exitCode, output }));
      });
      const runId = /Launched (run_\w+)/.exec(output)?.[1];
      expect(runId, output).toBeDefined();
      expect(output).toContain("Cancelling…");
      expect(output).toMatch(new RegExp(`Run ${runId} cancelled at step \\d+/2000`));
      expect(code, output).toBe(4);
      const status = await cli(["runs", "ls", "--json", "--url", server.url]);
      expect((JSON.parse(status.stdout) as { id: string; status: string }[]).find((r) => r.id === runId)!.status).toBe("cancelled");
    },
    120_000,
  );

  // The bar as a person sees it, in a terminal, while the run's worker is killed: the job is requeued and starts
  // again from its checkpoint of step 0 (or from nothing), far below the step the bar had shown.
  it.skipIf(!hasScript)(
    "draws a bar that never goes back when the run is requeued, with no NaN, no '60s' and no warning in it",
    async () => {
      fs.mkdirSync(path.join(work, "requeued"), { recursive: true });
      const config = {
        name: "requeued",
        environment: "arithmetic",
        agent: { base: "arithmetic-base" },
        algorithm: { name: "grpo", steps: 100_000, groupsPerStep: 4 },
        evaluation: { every: 0, episodes: 8 },
        checkpointEvery: 50_000,
      };
      fs.writeFileSync(path.join(work, "requeued", "experiment.json"), JSON.stringify(config));
      const command = `exec ${path.join(ROOT, "bin", "tinkerlab")} run requeued --url ${server.url}`;
      const plain = stripVTControlCharacters;
      const barSteps = (text: string) => [...plain(text).matchAll(/(\d+)\/100000 steps/g)].map((m) => Number(m[1]));
      const { code, output } = await new Promise<{ code: number | null; output: string }>((resolve) => {
        const child = spawn("script", ["--quiet", "--return", "--command", command, "/dev/null"], {
          cwd: work,
          env: { NODE_ENV: "production", PATH: process.env.PATH, HOME: home, XDG_CONFIG_HOME: path.join(home, ".config"), TERM: "xterm" },
          stdio: ["pipe", "pipe", "pipe"],
        });
        const started = Date.now();
        let output = "";
        let stage: "training" | "killed" | "resumed" | "cancelled" = "training";
        const onOutput = (chunk: Buffer) => {
          output += chunk;
          const runId = /Launched (run_\w+)/.exec(output)?.[1];
          const shown = barSteps(output).at(-1) ?? 0;
          if (stage === "training" && runId && shown >= 10) {
            stage = "killed";
            const pids = [...server.output().matchAll(/\[worker (\d+)\] job/g)];
            process.kill(Number(pids.at(-1)![1]), "SIGKILL");
          } else if (stage === "killed" && /(resumed from the checkpoint of|went back to) step \d+/.test(plain(output))) {
            stage = "resumed";
            // Followed for more than ten looks, so that a listener added per look would have raised Node's warning.
            setTimeout(
              () => {
                stage = "cancelled";
                void fetch(`${server.url}/api/trpc/runs.control`, {
                  method: "POST",
                  headers: { "content-type": "application/json" },
                  body: JSON.stringify({ json: { id: runId, action: "cancel" } }),
                });
              },
              Math.max(3000, 15_000 - (Date.now() - started)),
            );
          }
        };
        child.stdout.on("data", onOutput);
        child.stderr.on("data", onOutput);
        child.on("close", (exitCode) => resolve({ code: exitCode, output }));
      });
      const text = plain(output);
      expect(code, text).toBe(4);
      const back =
        /(resumed from the checkpoint of|went back to) step (\d+)(?: with no checkpoint to resume from)? \(it had reached step (\d+); the steps after \d+ are trained again\)/.exec(
          text,
        );
      expect(back, text).not.toBeNull();
      const [from, reached] = [Number(back![2]), Number(back![3])];
      expect(reached).toBeGreaterThan(from);
      if (back![1] === "resumed from the checkpoint of") expect(text).toContain(`| resumed from step ${from}`);
      // Never a lower step after a higher one.
      const steps = barSteps(output);
      expect(
        steps.filter((step, i) => i > 0 && step < steps[i - 1]!),
        text,
      ).toEqual([]);
      expect(steps.at(-1)).toBeGreaterThanOrEqual(reached);
      // A duration never reads "60s" (it rolls over to "1m 00s"); ids such as exp_1b024s60setd are not durations.
      expect(text).not.toMatch(/NaN|NFs|INF|(^|[^\w.])60s\b|MaxListenersExceededWarning/);
      expect(text).toMatch(/ETA (—|\d+(\.\d)?s|\d+m \d\ds|\d+h \d\dm) \|/);
    },
    180_000,
  );

  it("refuses what the editor refuses, in its words, before any run exists: SFT on a demonstrator the environment lacks", async () => {
    const dir = path.join(work, "imitate");
    fs.mkdirSync(dir, { recursive: true });
    const config = {
      name: "imitate",
      environment: "custom",
      agent: { base: "generalist-base", sampling: { maxTokens: 4 } },
      algorithm: { name: "grpo", steps: 2 },
      sft: { data: "demonstrator", steps: 5 },
    };
    fs.writeFileSync(path.join(dir, "experiment.json"), JSON.stringify(config));
    // A take-away game with legal actions and no demonstrate(state).
    fs.writeFileSync(
      path.join(dir, "environment.ts"),
      `import { defineEnvironment } from "tinkerlab";\nexport default defineEnvironment<{ left: number }, number>({ name: "stones", data: { kind: "free" },\n  systemPrompt: "Take 1, 2 or 3 stones.", maxTurns: 5, actions: ["1", "2", "3"],\n  reset: () => ({ state: { left: 7 }, observation: "7 stones" }),\n  parseAction: (t) => (/^[123]$/.test(t) ? { ok: true, action: Number(t) } : { ok: false, error: "1, 2 or 3" }),\n  step: (s, take) => ({ state: { left: Math.max(s.left - take, 0) }, reward: s.left <= take ? 1 : 0, done: s.left <= take, observation: "stones" }) });\n`,
    );
    const runIds = async () =>
      (JSON.parse((await cli(["runs", "ls", "--json", "--limit", "200", "--url", server.url])).stdout) as { id: string }[]).map((r) => r.id);
    const before = await runIds();
    const editorsWords =
      "sft.data: the run takes SFT steps on the environment's demonstrator, but environment.ts defines no demonstrate(state): add one, set sft.steps to 0 (and, to learn from the reward alone, algorithm.klCoef to 0 and algorithm.entropyCoef to 0.01: explore, not stay near the base), or imitate an uploaded dataset";

    const refused = await cli(["run", dir, "--url", server.url]);
    expect(refused.code, refused.stderr).toBe(3);
    expect(refused.stdout).toMatch(/^Created experiment exp_\w+ version 1\.$/m);
    expect(refused.stdout).not.toMatch(/Launched/);
    expect(refused.stderr).toContain(`error: ${editorsWords}\n`);
    expect(refused.stderr).toMatch(/^tinkerlab: Fix first: the config has 1 error; nothing was launched$/m);

    // An sft run that imitates the same missing demonstrator: refused alike, and --json says why for a script.
    fs.writeFileSync(path.join(dir, "experiment.json"), JSON.stringify({ ...config, algorithm: { name: "sft", steps: 3 }, sft: { data: "demonstrator" } }));
    const asJson = await cli(["run", dir, "--json", "--url", server.url]);
    expect(asJson.code, asJson.stderr).toBe(3);
    expect(JSON.parse(asJson.stdout)).toMatchObject({
      version: 2,
      refused: "Fix first: the config has 1 error; nothing was launched",
      problems: [editorsWords],
    });

    const { experimentId } = JSON.parse(fs.readFileSync(path.join(dir, ".tinkerlab.json"), "utf8")) as { experimentId: string };
    const ofExperiment = await cli(["runs", "ls", "--experiment", experimentId, "--json", "--url", server.url]);
    expect(JSON.parse(ofExperiment.stdout)).toEqual([]);
    expect(await runIds()).toEqual(before);
  }, 120_000);

  it("refuses, in one line with its own exit code, what it cannot do", async () => {
    fs.mkdirSync(path.join(work, "empty"), { recursive: true });
    const noConfig = await cli(["run", "empty", "--url", server.url]);
    expect(noConfig.code).toBe(2);
    expect(noConfig.stderr).toMatch(/^tinkerlab: empty has no experiment\.json; write the experiment's config there/);

    fs.mkdirSync(path.join(work, "broken"), { recursive: true });
    fs.writeFileSync(
      path.join(work, "broken", "experiment.json"),
      JSON.stringify({ name: "broken", environment: "custom", agent: { base: "arithmetic-base" } }),
    );
    fs.writeFileSync(
      path.join(work, "broken", "environment.ts"),
      `import { defineEnvironment } from "tinkerlab";\nexport default defineEnvironment({ name: "b", data: { kind: "free" }, systemPrompt: "x", maxTurns: 1,\n  reset: () => { throw new Error("no reset for you"); },\n  parseAction: (t) => ({ ok: true, action: t }), step: (s) => ({ state: s, reward: 0, done: true }) });\n`,
    );
    const broken = await cli(["run", "broken", "--url", server.url]);
    expect(broken.code).toBe(3);
    expect(broken.stderr).toMatch(/error: environment\.ts:3:\d+: .*no reset for you/);
    expect(broken.stderr).toMatch(/tinkerlab: Fix first: the source has 1 error; nothing was launched/);

    const unknown = await cli(["runs", "logs", "run_doesnotexist", "--url", server.url]);
    expect(unknown.code).toBe(3);
    expect(unknown.stderr).toMatch(/^tinkerlab: .*run_doesnotexist/);

    const port = await freePort();
    const away = await cli(["runs", "ls", "--url", `http://127.0.0.1:${port}`]);
    expect(away.code).toBe(5);
    expect(away.stderr).toMatch(new RegExp(`^tinkerlab: cannot reach http://127\\.0\\.0\\.1:${port}: is the server running\\?`));

    const badUrl = await cli(["runs", "ls", "--url", "localhost:3000"]);
    expect(badUrl.code).toBe(2);
    expect(badUrl.stderr).toMatch(/url must start with http:\/\/ or https:\/\//);
  }, 120_000);
});
