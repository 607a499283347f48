/**
 * The memory the engine allows itself, which the scheduler counts on when it places a job
 * (server/scheduler/resources.ts).
 */

/**
 * The activations one pass of `forward` or `forwardBackward` may hold, in bytes, by default: a batch that needs
 * more runs in parts (server/runtime/training-client.ts).
 */
export const PASS_ACTIVATION_BYTES = 1024 ** 3;

/**
 * The most key/value cache one sampling decoder holds, in bytes: a sample whose rows need more is decoded in turns
 * (server/runtime/sampler.ts).
 */
export const DECODER_CACHE_BYTES = 1024 ** 3;

/**
 * The most arithmetic one stretch of model work does without a break, in floating-point operations (a pass costs
 * about 2 × parameters a token forward, 6 × forward and backward): about 5 s of this machine's two cores. Work
 * longer than a second gives the event loop a turn between stretches (`turnClock`), so that a worker's heartbeat
 * (every second; its lease lapses after 20 s) and stop requests go on while a large model trains or samples.
 */
export const STRETCH_FLOPS = 2e11;

/** A clock of long work: `due()` says whether a second has passed since the event loop last had a turn. */
export function turnClock(): { due(): boolean; turn(): Promise<void> } {
  let last = performance.now();
  return {
    due: () => performance.now() - last >= 1000,
    turn: () =>
      new Promise<void>((resolve) =>
        setImmediate(() => {
          last = performance.now();
          resolve();
        }),
      ),
  };
}
