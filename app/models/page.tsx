import type { Metadata } from "next";
import { ModelsView } from "@/components/models/models-view";
import { PageHeader } from "@/components/ui/card";
import { serverCaller } from "@/server/api/rsc";

export const dynamic = "force-dynamic";
export const metadata: Metadata = { title: "Models" };

export default async function ModelsPage() {
  const caller = await serverCaller();
  const [bases, checkpoints] = await Promise.all([caller.checkpoints.bases(), caller.checkpoints.list()]);
  return (
    <>
      <PageHeader
        title="Models"
        subtitle="The bases a run starts from: the built-in ones, pretrained models imported from Hugging Face (GPT-2, SmolLM, Qwen2, Llama 3), and the checkpoints your runs saved."
      />
      <ModelsView initial={bases} initialCheckpoints={checkpoints} />
    </>
  );
}
