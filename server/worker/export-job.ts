/** An export run: the base (another run's checkpoint, its adapter merged) as one safetensors file to download. */
import fs from "node:fs";
import path from "node:path";
import { encodeSafetensors } from "@/lib/model/safetensors";
import { tokenizerSpec } from "@/lib/model/tokenizer-spec";
import { listGPTParameters, parametersToTensorMap } from "@/lib/model/weights";
import { describeLineage } from "../jobs";
import type { BaseModel } from "../runtime";
import { loadBaseModel } from "./base-models";
import type { JobOptions, JobOutcome } from "./job";

export async function exportJob(options: JobOptions): Promise<JobOutcome> {
  const { channel, workerId, spec } = options;
  const config = spec.run.config;
  const base = loadBaseModel(spec.base ?? config.agent.base);
  const step = spec.base?.kind === "checkpoint" ? spec.base.step : 0;
  const file = path.resolve(options.artifactsDir, "runs", spec.run.id, "export", `${spec.run.id}.safetensors`);
  const sizeBytes = writeModelFile(file, base, describeLineage(spec.base ?? { kind: "builtin", name: config.agent.base }));
  await channel.checkpoint({ workerId, jobId: spec.job.id, step, path: file, sizeBytes, kind: "export" });
  await channel.report({
    workerId,
    jobId: spec.job.id,
    logs: [{ level: "info", message: `Exported ${(sizeBytes / 1024 / 1024).toFixed(1)} MiB: ${path.basename(file)}.` }],
  });
  return { outcome: "completed", reason: null };
}

/**
 * Writes a model as one safetensors file (written beside, then renamed into place): its weights under the tensor
 * names of docs/CHECKPOINTS.md, and in the header's metadata the model's config, its tokenizer and where it came
 * from, so the one file is all a loader needs.
 */
function writeModelFile(file: string, model: BaseModel, origin: string): number {
  const bytes = encodeSafetensors(parametersToTensorMap(listGPTParameters(model.weights, model.config)), {
    format: "tinkerlab.model",
    version: "1",
    model_config: JSON.stringify(model.config),
    tokenizer: JSON.stringify(tokenizerSpec(model.tokenizer)),
    origin,
  });
  fs.mkdirSync(path.dirname(file), { recursive: true });
  const partial = `${file}.partial`;
  fs.writeFileSync(partial, bytes);
  fs.renameSync(partial, file);
  return bytes.length;
}
