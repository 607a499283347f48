/**
 * A job's reports on their way to the server (server/worker/report-queue.ts): in order, in the background, and
 * merged when queued together, so that a training step costs the server one request rather than two.
 */
import { describe, expect, it } from "vitest";
import type { ReportInput } from "@/server/jobs";
import { mergeReports, REPORT_LIMITS, ReportQueue } from "@/server/jobs/report-queue";

const point = (step: number, name = "loss") => ({ step, name, value: step });
const rollout = (step: number) => ({
  step,
  split: "train" as const,
  groupIndex: 0,
  sampleIndex: 0,
  prompt: "",
  turns: [],
  rewards: {},
  totalReward: 0,
  advantage: null,
  tokens: null,
  tokenLogprobs: null,
});

/** A server that takes `ms` per report and records what it got. */
function slowServer(ms = 20) {
  const received: ReportInput[] = [];
  return {
    received,
    send: async (report: ReportInput) => {
      await new Promise((resolve) => setTimeout(resolve, ms));
      received.push(report);
    },
  };
}

describe("ReportQueue", () => {
  it("sends a step's metrics and its rollouts, pushed one after the other, as one report", async () => {
    const server = slowServer();
    const queue = new ReportQueue<ReportInput>(server.send, { merge: mergeReports });
    queue.push({ workerId: "w", jobId: "j", step: 1, metrics: [point(1), point(1, "reward/mean")] });
    queue.push({ workerId: "w", jobId: "j", rollouts: [rollout(1)] });
    await queue.flush();
    expect(server.received).toEqual([{ workerId: "w", jobId: "j", step: 1, metrics: [point(1), point(1, "reward/mean")], rollouts: [rollout(1)] }]);
  });

  it("sends whatever piles up while a report is in flight as the next one, in order, never across jobs", async () => {
    const server = slowServer(30);
    const queue = new ReportQueue<ReportInput>(server.send, { merge: mergeReports });
    queue.push({ workerId: "w", jobId: "j", step: 1, metrics: [point(1)] });
    await new Promise((resolve) => setTimeout(resolve, 5)); // the first is on its way
    for (let step = 2; step <= 5; step++) queue.push({ workerId: "w", jobId: "j", step, metrics: [point(step)] });
    queue.push({ workerId: "w", jobId: "other", step: 1, metrics: [point(1)] });
    queue.push({ workerId: "w", jobId: "j", logs: [{ level: "info", message: "back" }] });
    await queue.flush();
    expect(server.received.map((r) => [r.jobId, r.step, r.metrics?.map((m) => m.step), r.logs?.length ?? 0])).toEqual([
      ["j", 1, [1], 0],
      ["j", 5, [2, 3, 4, 5], 0],
      ["other", 1, [1], 0],
      ["j", undefined, undefined, 1],
    ]);
  });

  it("sends reports apart when together they would exceed what one report may carry", () => {
    const many = Array.from({ length: REPORT_LIMITS.metrics - 1 }, (_, i) => point(i));
    expect(mergeReports({ workerId: "w", jobId: "j", metrics: many }, { workerId: "w", jobId: "j", metrics: [point(1), point(2)] })).toBeNull();
    expect(mergeReports({ workerId: "w", jobId: "j", metrics: many }, { workerId: "w", jobId: "j", metrics: [point(1)] })?.metrics).toHaveLength(
      REPORT_LIMITS.metrics,
    );
    expect(mergeReports({ workerId: "w", jobId: "j", step: 4 }, { workerId: "w", jobId: "j", step: 3 })).toEqual({ workerId: "w", jobId: "j", step: 4 });
  });

  it("retries a merged report as a whole, and stops at a conflict with the error it got", async () => {
    let calls = 0;
    const received: ReportInput[] = [];
    const queue = new ReportQueue<ReportInput>(
      async (report) => {
        if (++calls === 1) throw new Error("connection reset");
        received.push(report);
      },
      { merge: mergeReports, retryDelayMs: 1 },
    );
    queue.push({ workerId: "w", jobId: "j", step: 1, metrics: [point(1)] });
    queue.push({ workerId: "w", jobId: "j", rollouts: [rollout(1)] });
    await queue.flush();
    expect(calls).toBe(2);
    expect(received).toEqual([{ workerId: "w", jobId: "j", step: 1, metrics: [point(1)], rollouts: [rollout(1)] }]);

    const refused = new ReportQueue<ReportInput>(
      async () => {
        throw new Error("Job 'j' is no longer assigned to worker 'w'");
      },
      { merge: mergeReports, retryDelayMs: 1 },
    );
    refused.push({ workerId: "w", jobId: "j", step: 2, metrics: [point(2)] });
    await expect(refused.flush()).rejects.toThrow(/no longer assigned/);
    expect(() => refused.push({ workerId: "w", jobId: "j", step: 3 })).toThrow(/no longer assigned/);
  });
});
