/**
 * Worker processes: how a worker reaches the server (its channels), the local workers a web server starts, and
 * the V8 flags their job hosts need. What loads the model code has entries of its own, kept out of this index so
 * that the web server, which imports it, does not load the runtime: `./worker-process` (a worker's main loop),
 * `./base-models` (a base loaded for computing), `./base-import` (a Hugging Face folder made a base) and
 * `./run-job` (one job run in the calling process, as bench:newcomer does).
 */
export { databaseChannel, httpChannel, inProcessChannel, listenAsServer, RUN_DATA_CHANNEL, type WorkerChannel } from "./channel";
export { missingRolloutFlags, rolloutProcessFlags, startedMarkingOnMainThread } from "./gc";
export { startLocalWorkers } from "./local-workers";
