/**
 * Live metrics: one in-memory feed per run in the web server (./feed.ts), the server-sent event stream written
 * straight to each viewer's socket (./stream-sse.ts), and the in-process signal that a run has new data
 * (./run-events.ts). docs/ARCHITECTURE.md, "Live metrics", says how they fit.
 */
export { feedFrames, followLiveRuns, metricStreamInput, runFeed, RunNotFoundError, type FeedEvent, type FeedFrame, type SeriesBatch } from "./feed";
export { isMetricStreamRequest, metricStreamResponse, serveMetricStream } from "./stream-sse";
export { announceRunData, onAnyRunData, onRunData } from "./run-events";
