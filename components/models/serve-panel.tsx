"use client";

import { CopyField } from "@/components/ui/copy-field";
import { servingExamples } from "@/lib/serving/examples";

/**
 * How to call a checkpoint through the server's OpenAI-compatible endpoint: the endpoint, the model name (the
 * checkpoint, or the run's latest weights) and copyable examples. The first request starts a serving job.
 */
export function ServePanel({ checkpointId, runId }: { checkpointId: string; runId: string }) {
  const origin = typeof window === "undefined" ? "http://localhost:3000" : window.location.origin;
  const pinned = servingExamples(origin, checkpointId);
  return (
    <div className="space-y-3 bg-slate-50 px-4 py-3 text-sm" data-serve-panel={checkpointId}>
      <p className="text-slate-600">
        Any OpenAI client can sample this checkpoint. The first request starts a serving job on a worker (answered 503 with Retry-After while it loads); it
        stops after it idles. Send a project API key (Settings) as the bearer token.
      </p>
      <dl className="grid grid-cols-[8rem_1fr] gap-x-3 gap-y-1">
        <dt className="text-slate-500">Endpoint</dt>
        <dd className="font-mono text-xs text-slate-800">{pinned.endpoint}</dd>
        <dt className="text-slate-500">Model</dt>
        <dd className="font-mono text-xs text-slate-800">{checkpointId}</dd>
        <dt className="text-slate-500">Latest of its run</dt>
        <dd className="font-mono text-xs text-slate-800" title="The run's newest checkpoint at each request: new weights as the run saves them">
          {runId}:latest
        </dd>
      </dl>
      <div className="grid gap-3 md:grid-cols-2">
        <div>
          <p className="mb-1 text-xs font-medium text-slate-600">curl</p>
          <CopyField value={pinned.curl} label="curl example" />
        </div>
        <div>
          <p className="mb-1 text-xs font-medium text-slate-600">openai (npm)</p>
          <CopyField value={pinned.node} label="openai npm example" />
        </div>
      </div>
    </div>
  );
}
