import { TRPCError } from "@trpc/server";
import { getHTTPStatusCodeFromError } from "@trpc/server/http";
import { Access, authenticate, signInMessage } from "@/server/auth";
import { getDatabase } from "@/server/db";
import { serverEnv } from "@/server/env";
import { hasRolloutsAt, ROLLOUT_SPLITS, type RolloutSplit, rolloutLines, rolloutSpan } from "@/server/runs";

export const dynamic = "force-dynamic";

/**
 * `GET /runs/:id/rollouts.jsonl`: the run's stored rollouts as JSON Lines, one sample a line with its split and
 * step, streamed as a download:
 * - no parameters: every rollout of the run, training then evaluation, each by step, group and sample;
 * - `?split=train` or `?split=eval`: that split's, every step;
 * - `?step=N`: both splits' at step N; `?split=…&step=N`: one split at one step (the run page's "Export JSONL").
 *
 * It answers whoever runs.rollouts answers: the run's project members, their API keys (`Authorization: Bearer`), and
 * the holder of a share link naming the run (`x-tinkerlab-share`). The page proxy lets it through (proxy.ts), so a
 * refusal is plain text, never a sign-in page: 401 without a working credential, 404 for a run the caller may not
 * see (worded as for none, a share link's other runs too).
 */
export async function GET(request: Request, { params }: { params: Promise<{ id: string }> }) {
  const { id } = await params;
  const url = new URL(request.url);
  const splitParam = url.searchParams.get("split") || null;
  const stepParam = url.searchParams.get("step") || null;
  const text = (status: number, message: string) => new Response(`${message}\n`, { status, headers: { "content-type": "text/plain; charset=utf-8" } });
  if (splitParam !== null && !ROLLOUT_SPLITS.includes(splitParam as RolloutSplit))
    return text(400, `split: '${splitParam}' is not a split; use train or eval, or leave it out for both`);
  const splits = splitParam === null ? ROLLOUT_SPLITS : [splitParam as RolloutSplit];
  const step = stepParam === null ? undefined : Number(stepParam);
  if (step !== undefined && !(Number.isSafeInteger(step) && step >= 0))
    return text(400, `step: '${stepParam}' is not a step number (an integer, 0 or more); leave it out for every step`);

  const { db } = await getDatabase();
  const principal = await authenticate(db, request.headers, serverEnv().TINKERLAB_AUTH);
  if (principal.kind === "anonymous") return text(401, signInMessage(principal));
  try {
    // runs.rollouts's own rule (a sharedRunProcedure): viewers of the run's project, and a link naming the run.
    await new Access(db, principal).require("viewer", { kind: "run", id }, { shared: true });
  } catch (error) {
    if (error instanceof TRPCError) return text(getHTTPStatusCodeFromError(error), error.message);
    throw error;
  }
  if (step !== undefined && !(await hasRolloutsAt(db, id, splits, step))) {
    const said: string[] = [];
    for (const split of splits) {
      const span = await rolloutSpan(db, id, split);
      said.push(span ? `no ${split} rollouts at step ${step}; its ${split} rollouts span steps ${span.first} to ${span.last}` : `no ${split} rollouts`);
    }
    return text(404, `Run '${id}' has ${said.join(". It has ")}.`);
  }
  const narrowed = [splitParam, step === undefined ? null : `step-${step}`].filter((part) => part !== null);
  return new Response(rolloutLines(db, id, { splits, step }), {
    headers: {
      "content-type": "application/x-ndjson; charset=utf-8",
      "content-disposition": `attachment; filename="${id}-${narrowed.length > 0 ? narrowed.join("-") : "rollouts"}.jsonl"`,
    },
  });
}
