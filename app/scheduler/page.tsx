import type { Metadata } from "next";
import { SchedulerView } from "@/components/scheduler-view";
import { PageHeader } from "@/components/ui/card";

export const metadata: Metadata = { title: "Scheduler" };

export default function SchedulerPage() {
  return (
    <>
      <PageHeader title="Scheduler" subtitle="Devices, the jobs on them, and the queue. LoRA jobs on one base share its weights on a device." />
      <SchedulerView />
    </>
  );
}
