import { metricStreamResponse } from "@/server/metrics";

export const dynamic = "force-dynamic";

/**
 * The run's live metric stream (the runs.metricStream subscription) from the run's shared feed: this static route
 * takes the path before the generic tRPC handler, so each event is serialised once for every viewer.
 */
export const GET = (request: Request) => metricStreamResponse(request);
