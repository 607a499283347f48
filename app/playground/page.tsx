import type { Metadata } from "next";
import { Suspense } from "react";
import { PlaygroundView } from "@/components/playground/playground-view";
import { PageHeader } from "@/components/ui/card";

export const dynamic = "force-dynamic";
export const metadata: Metadata = { title: "Playground" };

export default function PlaygroundPage() {
  return (
    <>
      <PageHeader
        title="Playground"
        subtitle="Try a base or a checkpoint in this browser: the model runs here with onnxruntime-web, on WebGPU when the browser has a GPU's adapter, else on WebAssembly (or either, picked under Runtime), or on this workbench's /v1 endpoint, served by a worker (Server, under Runtime)."
      />
      <Suspense>
        <PlaygroundView />
      </Suspense>
    </>
  );
}
