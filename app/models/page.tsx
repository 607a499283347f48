import type { Metadata } from "next";
import { ModelsView } from "@/components/models/models-view";
import { PageHeader } from "@/components/ui/card";
import { serverCaller } from "@/server/api/rsc";

export const dynamic = "force-dynamic";
export const metadata: Metadata = { title: "Models" };

export default async function ModelsPage() {
  const bases = await (await serverCaller()).checkpoints.bases();
  return (
    <>
      <PageHeader
        title="Models"
        subtitle="The bases a run starts from: the built-in ones, and pretrained models imported from Hugging Face (GPT-2, SmolLM, Qwen2, Llama 3)."
      />
      <ModelsView initial={bases} />
    </>
  );
}
