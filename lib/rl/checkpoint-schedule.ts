/**
 * When a training loop saves a resumable checkpoint: at its last step, every `checkpointEvery` steps, and once
 * `checkpointMinutes` of training have passed since the last one, so that a run whose worker is lost redoes at
 * most that much work whatever its steps cost (a 135M-parameter step can take a minute; a tiny one 10 ms).
 */
export function checkpointSchedule(
  config: { checkpointEvery: number; checkpointMinutes: number },
  lastStep: number,
  now: () => number = () => performance.now(),
) {
  let since = now();
  return {
    /** Whether to save after `done` steps. */
    due(done: number): boolean {
      if (done === lastStep) return true;
      if (config.checkpointEvery > 0 && done % config.checkpointEvery === 0) return true;
      return config.checkpointMinutes > 0 && now() - since >= config.checkpointMinutes * 60_000;
    },
    /** Whether a save is due by the steps alone (known ahead: the RL loop starts no rollouts ahead of one). */
    dueByStep(done: number): boolean {
      return done === lastStep || (config.checkpointEvery > 0 && done % config.checkpointEvery === 0);
    },
    /** A checkpoint was saved: the next one by time is `checkpointMinutes` from now. */
    saved() {
      since = now();
    },
  };
}
