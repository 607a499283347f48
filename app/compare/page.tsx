import type { Metadata } from "next";
import { Suspense } from "react";
import { CompareView } from "@/components/compare/compare-view";
import { PageHeader } from "@/components/ui/card";

export const dynamic = "force-dynamic";
export const metadata: Metadata = { title: "Compare runs" };

export default function ComparePage() {
  return (
    <>
      <PageHeader title="Compare runs" subtitle="Curves of several runs on one chart, and how their configs differ." />
      <Suspense>
        <CompareView />
      </Suspense>
    </>
  );
}
