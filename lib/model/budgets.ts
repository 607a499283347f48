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
