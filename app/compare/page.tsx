import { dehydrate, HydrationBoundary } from "@tanstack/react-query";
import type { Metadata } from "next";
import { Suspense } from "react";
import { parseCompareState, seriesInput } from "@/components/compare/compare-state";
import { CompareView } from "@/components/compare/compare-view";
import { SaveAsReportLink } from "@/components/reports/reports-list";
import { PageHeader } from "@/components/ui/card";
import { getQueryClient, trpc } from "@/server/api/rsc";

export const dynamic = "force-dynamic";
export const metadata: Metadata = { title: "Compare runs" };

type Props = { searchParams: Promise<Record<string, string | string[] | undefined>> };

export default async function ComparePage({ searchParams }: Props) {
  const query = new URLSearchParams();
  for (const [key, value] of Object.entries(await searchParams)) if (typeof value === "string") query.set(key, value);
  const state = parseCompareState(query);
  // The runs and every series of the panels are read as the page renders and come with its HTML, so the charts need
  // no request after hydration. What fails (a run that is not there) is left to the view, which asks again and shows
  // the server's words.
  const queryClient = getQueryClient();
  if (state.runs.length > 0) {
    await Promise.all([
      ...state.runs.map((id) => queryClient.prefetchQuery(trpc.runs.byId.queryOptions({ id }))),
      queryClient.prefetchQuery(trpc.compare.series.queryOptions(seriesInput(state))),
      queryClient.prefetchQuery(trpc.compare.sources.queryOptions({ runIds: state.runs })),
    ]);
  }
  return (
    <>
      <PageHeader
        title="Compare runs"
        subtitle="Several runs' curves panel by panel, grouped by a config field if you like, and how their configs and sources differ."
        actions={
          <Suspense>
            <SaveAsReportLink />
          </Suspense>
        }
      />
      <HydrationBoundary state={dehydrate(queryClient)}>
        <Suspense>
          <CompareView />
        </Suspense>
      </HydrationBoundary>
    </>
  );
}
