/**
 * Reports from a training job to the server, sent in order in the background so the training loop never waits
 * on the network or on the server's load (viewers, other jobs). `flush()` waits until everything queued so far
 * is stored; checkpoints and the end of a job flush first, so a checkpoint never claims work the server lacks.
 *
 * Reports queued together go as one when `merge` allows: a step's metrics and its rollouts (pushed one after the
 * other) make one request, and whatever piles up while a request is in flight goes in the next one. Each request
 * costs the server a round of HTTP, tRPC and a database statement, so this halves its work per training step.
 */
import type { ReportInput } from "./reports";

export class ReportQueue<T> {
  private queue: T[] = [];
  private sending: Promise<void> | null = null;
  private failure: Error | null = null;

  constructor(
    private readonly send: (item: T) => Promise<unknown>,
    private readonly options: {
      retries?: number;
      retryDelayMs?: number;
      /** One item that stands for `a` then `b`, or null when they must go apart. */
      merge?: (a: T, b: T) => T | null;
    } = {},
  ) {}

  push(item: T) {
    if (this.failure) throw this.failure;
    this.queue.push(item);
    // Start sending after the current task, so that items pushed together (a step's metrics, then its rollouts)
    // are queued together and merged.
    this.sending ??= new Promise<void>((resolve) => setImmediate(resolve)).then(() => this.drain());
  }

  async flush(): Promise<void> {
    while (this.sending) await this.sending;
    if (this.failure) throw this.failure;
  }

  private async drain() {
    try {
      while (this.queue.length > 0) {
        let item: T = this.queue[0]!;
        let count = 1;
        for (const merge = this.options.merge; merge && count < this.queue.length; count++) {
          const merged = merge(item, this.queue[count]!);
          if (merged === null) break;
          item = merged;
        }
        await this.sendWithRetries(item);
        this.queue.splice(0, count);
      }
    } catch (error) {
      this.failure = error instanceof Error ? error : new Error(String(error));
    } finally {
      this.sending = null;
    }
  }

  private async sendWithRetries(item: T) {
    const retries = this.options.retries ?? 5;
    for (let attempt = 0; ; attempt++) {
      try {
        await this.send(item);
        return;
      } catch (error) {
        // A conflict means the job was taken from this worker: retrying cannot help.
        if (attempt >= retries || /no longer assigned/.test(String(error))) throw error;
        await new Promise((resolve) => setTimeout(resolve, (this.options.retryDelayMs ?? 500) * 2 ** attempt));
      }
    }
  }
}

/** The most one report may carry (the worker API refuses more). */
export const REPORT_LIMITS = { metrics: 100_000, rollouts: 10_000, logs: 1000 } as const;

/**
 * Two reports of one job as one: their points, rollouts and log lines in order, and the later step. Null when they
 * belong to different jobs or together exceed what one report may carry.
 */
export function mergeReports(a: ReportInput, b: ReportInput): ReportInput | null {
  if (a.workerId !== b.workerId || a.jobId !== b.jobId) return null;
  const metrics = [...(a.metrics ?? []), ...(b.metrics ?? [])];
  const rollouts = [...(a.rollouts ?? []), ...(b.rollouts ?? [])];
  const logs = [...(a.logs ?? []), ...(b.logs ?? [])];
  const warnings = [...(a.warnings ?? []), ...(b.warnings ?? [])];
  if (metrics.length > REPORT_LIMITS.metrics || rollouts.length > REPORT_LIMITS.rollouts || logs.length > REPORT_LIMITS.logs) return null;
  const steps = [a.step, b.step].filter((step): step is number => step !== undefined);
  return {
    workerId: a.workerId,
    jobId: a.jobId,
    ...(steps.length ? { step: Math.max(...steps) } : {}),
    ...(metrics.length ? { metrics } : {}),
    ...(rollouts.length ? { rollouts } : {}),
    ...(logs.length ? { logs } : {}),
    ...(warnings.length ? { warnings } : {}),
  };
}
