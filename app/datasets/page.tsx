import type { Metadata } from "next";
import { builtInSummaries } from "@/components/datasets/built-in";
import { DatasetsView } from "@/components/datasets/datasets-view";
import { PageHeader } from "@/components/ui/card";
import { serverCaller } from "@/server/api/rsc";

export const dynamic = "force-dynamic";
export const metadata: Metadata = { title: "Datasets" };

export default async function DatasetsPage() {
  const list = await (await serverCaller()).datasets.list();
  return (
    <>
      <PageHeader
        title="Datasets"
        subtitle="Rows for environments that read data, and conversations for supervised fine-tuning. Uploads are validated and split into train and test."
      />
      <DatasetsView builtIn={builtInSummaries(list.builtIn)} initialList={list} />
    </>
  );
}
