import type { Metadata } from "next";
import { Suspense } from "react";
import { ReportsList } from "@/components/reports/reports-list";
import { PageHeader } from "@/components/ui/card";

export const dynamic = "force-dynamic";
export const metadata: Metadata = { title: "Reports" };

export default function ReportsPage() {
  return (
    <>
      <PageHeader
        title="Reports"
        subtitle="Saved pages of runs' charts and notes: live while runs train, editable by the project's editors, shareable by link."
      />
      <Suspense>
        <ReportsList />
      </Suspense>
    </>
  );
}
