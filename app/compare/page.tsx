import type { Metadata } from "next";
import { Suspense } from "react";
import { CompareView } from "@/components/compare/compare-view";
import { SaveAsReportLink } from "@/components/reports/reports-list";
import { PageHeader } from "@/components/ui/card";

export const dynamic = "force-dynamic";
export const metadata: Metadata = { title: "Compare runs" };

export default function ComparePage() {
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
      <Suspense>
        <CompareView />
      </Suspense>
    </>
  );
}
