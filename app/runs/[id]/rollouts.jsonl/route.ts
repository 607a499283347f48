import { TRPCError } from "@trpc/server";
import { getHTTPStatusCodeFromError } from "@trpc/server/http";
import { createCaller, createTRPCContext } from "@/server/api";

export const dynamic = "force-dynamic";

/**
 * `GET /runs/:id/rollouts.jsonl?split=train&step=N`: one step's rollouts as JSON Lines, one sample a line, as a
 * download (the latest step when none is named).
 */
export async function GET(request: Request, { params }: { params: Promise<{ id: string }> }) {
  const { id } = await params;
  const url = new URL(request.url);
  const split = url.searchParams.get("split") ?? "train";
  const stepParam = url.searchParams.get("step");
  const text = (status: number, message: string) => new Response(`${message}\n`, { status, headers: { "content-type": "text/plain; charset=utf-8" } });
  if (split !== "train" && split !== "eval") return text(400, `split: '${split}' is not a split; use train or eval`);
  const step = stepParam === null || stepParam === "" ? undefined : Number(stepParam);
  if (step !== undefined && !(Number.isSafeInteger(step) && step >= 0)) return text(400, `step: '${stepParam}' is not a step number (an integer, 0 or more)`);
  try {
    const caller = createCaller(await createTRPCContext({ headers: request.headers }));
    await caller.runs.byId({ id });
    const result = await caller.runs.rollouts({ runId: id, split, step });
    if (result.step === null) return text(404, `Run '${id}' has no ${split} rollouts yet.`);
    if (result.items.length === 0)
      return text(
        404,
        `Run '${id}' has no ${split} rollouts at step ${result.step}; its ${split} rollouts span steps ${result.firstStep} to ${result.lastStep}.`,
      );
    const body = result.items.map((item) => `${JSON.stringify({ runId: id, split, step: result.step, ...item })}\n`).join("");
    return new Response(body, {
      headers: {
        "content-type": "application/x-ndjson; charset=utf-8",
        "content-disposition": `attachment; filename="${id}-${split}-step-${result.step}.jsonl"`,
      },
    });
  } catch (error) {
    if (error instanceof TRPCError) return text(getHTTPStatusCodeFromError(error), error.message);
    throw error;
  }
}
