/**
 * A worker's jobs compute in its job host, a child process (server/worker/job-host.ts), and reach the server
 * through the worker: its reports and checkpoints arrive through the worker's channel, a stop request reaches the
 * job, and a host that dies says how (its jobs then go back to the queue, server/worker/worker-process.ts).
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ReportInput } from "@/server/jobs";
import { inProcessChannel } from "@/server/worker/channel";
import { hostKey, type JobHost, JobHostExit, JobHosts, startJobHost } from "@/server/worker/host-process";
import type { JobSpec } from "@/server/worker/run-job";
import { saveTinyBase, tinyExperiment } from "../../support/tiny-run";

const basesDir = fs.mkdtempSync(path.join(os.tmpdir(), "tinkerlab-host-bases-"));
// The host inherits this process's environment: it finds its base model here.
process.env.TINKERLAB_BASES_DIR = basesDir;
const artifactsDir = fs.mkdtempSync(path.join(os.tmpdir(), "tinkerlab-host-artifacts-"));

const reports: ReportInput[] = [];
const checkpoints: number[] = [];
let host: JobHost;

beforeAll(async () => {
  await saveTinyBase(basesDir);
  const channel = inProcessChannel({ report: (report) => void reports.push(report), checkpoint: (input) => void checkpoints.push(input.step) });
  host = startJobHost({ channel, backend: "js", log: () => {} });
  await host.ready;
}, 120_000);

afterAll(() => host?.kill());

function spec(id: string, steps: number): JobSpec {
  const { config } = tinyExperiment(id, steps);
  return {
    job: { id: `job_${id}`, runId: `run_${id}`, kind: "rl", mode: "full", lastCheckpointId: null, attempts: 0 },
    run: { id: `run_${id}`, config, seed: 1, files: {} },
    resume: null,
  } as unknown as JobSpec;
}

describe("the job host", () => {
  it("is a process of its own, whose job reports and checkpoints through the worker's channel", async () => {
    expect(host.pid).not.toBe(process.pid);
    const steps: number[] = [];
    const outcome = await host.run({ jobId: "job_a", workerId: "wrk_a", spec: spec("a", 10), artifactsDir, onStep: (step) => steps.push(step) });
    expect(outcome).toEqual({ outcome: "completed", reason: null });
    const rewardSteps = reports.flatMap((r) => (r.metrics ?? []).filter((m) => m.name === "reward/mean").map((m) => m.step));
    expect(rewardSteps).toEqual(Array.from({ length: 10 }, (_, i) => i + 1));
    // Dates cross the process boundary as dates.
    expect(reports.find((r) => r.metrics?.length)!.metrics![0]!.wallTime).toBeInstanceOf(Date);
    expect(checkpoints).toEqual([5, 10]);
    expect(steps.at(-1)).toBe(10);
  }, 120_000);

  it("stops a job when asked, and fails one whose work throws with its message", async () => {
    let firstStep!: () => void;
    const stepped = new Promise<void>((resolve) => (firstStep = resolve));
    const running = host.run({ jobId: "job_b", workerId: "wrk_a", spec: spec("b", 10_000), artifactsDir, onStep: () => firstStep() });
    await stepped;
    host.stop("job_b", "cancel");
    expect(await running).toEqual({ outcome: "cancelled", reason: "cancelled by user" });

    const broken = spec("c", 3);
    (broken.run.config as { environment: string }).environment = "no-such-environment";
    await expect(host.run({ jobId: "job_c", workerId: "wrk_a", spec: broken, artifactsDir })).rejects.toThrow(/Unknown environment 'no-such-environment'/);
  }, 120_000);

  it("says how it died, and the jobs it held end with that", async () => {
    const running = host.run({ jobId: "job_d", workerId: "wrk_a", spec: spec("d", 10_000), artifactsDir });
    process.kill(host.pid, "SIGKILL");
    const error = await running.catch((e: unknown) => e);
    expect(error).toBeInstanceOf(JobHostExit);
    expect((error as Error).message).toMatch(/its job process was killed \(SIGKILL/);
    expect((await host.exited).signal).toBe("SIGKILL");
  }, 60_000);
});

describe("a worker's job hosts", () => {
  it("runs LoRA jobs on one base in one host and every other job in its own, stopping a host when its jobs end", async () => {
    const channel = inProcessChannel({ report: () => {}, checkpoint: () => {} });
    const hosts = new JobHosts(() => startJobHost({ channel, backend: "js", log: () => {} }));
    const unasked: JobHostExit[] = [];
    hosts.onExit((exit) => unasked.push(exit));
    try {
      await hosts.first.ready;
      const lora = (id: string) => ({ ...spec(id, 1), job: { ...spec(id, 1).job, mode: "lora" } }) as JobSpec;
      const [a, b] = [hostKey("job_la", lora("la")), hostKey("job_lb", lora("lb"))];
      expect(a).toBe(b);
      const shared = await hosts.take(a);
      expect(shared).toBe(hosts.first);
      expect(await hosts.take(b)).toBe(shared);
      // A full-weight job (an evaluation, a full fine-tune) computes beside them in a process of its own.
      const ownKey = hostKey("job_f", spec("f", 1));
      const own = await hosts.take(ownKey);
      expect(own.pid).not.toBe(shared.pid);
      const outcome = await own.run({ jobId: "job_f", workerId: "wrk_h", spec: spec("f", 2), artifactsDir });
      expect(outcome.outcome).toBe("completed");
      hosts.release(ownKey);
      await own.exited;
      // The first host stays, for the next job; a retired host's exit is not a death the worker must act on.
      hosts.release(a);
      hosts.release(b);
      expect(await hosts.take(hostKey("job_g", spec("g", 1)))).toBe(hosts.first);
      expect(unasked).toEqual([]);
    } finally {
      hosts.killAll();
    }
  }, 120_000);
});
