/**
 * Reports from a training job to the server, sent in order in the background so the training loop never waits
 * on the network or on the server's load (viewers, other jobs). `flush()` waits until everything queued so far
 * is stored; checkpoints and the end of a job flush first, so a checkpoint never claims work the server lacks.
 */
export class ReportQueue<T> {
  private queue: T[] = [];
  private sending: Promise<void> | null = null;
  private failure: Error | null = null;

  constructor(
    private readonly send: (item: T) => Promise<unknown>,
    private readonly options: { retries?: number; retryDelayMs?: number } = {},
  ) {}

  push(item: T) {
    if (this.failure) throw this.failure;
    this.queue.push(item);
    this.sending ??= this.drain();
  }

  async flush(): Promise<void> {
    while (this.sending) await this.sending;
    if (this.failure) throw this.failure;
  }

  private async drain() {
    try {
      while (this.queue.length > 0) {
        const item = this.queue[0]!;
        await this.sendWithRetries(item);
        this.queue.shift();
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
