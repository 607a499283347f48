/**
 * An export run: the base (another run's checkpoint, its adapter merged) as one safetensors file to download. A
 * checkpoint of a run whose agents had separate policies holds one policy per agent (the first agent's its own, each
 * other's in `agents/<agent>`): its export is a tar archive of one safetensors per agent, `<agent>.safetensors`.
 */
import fs from "node:fs";
import path from "node:path";
import { encodeSafetensors } from "@/lib/model/safetensors";
import { tokenizerSpec } from "@/lib/model/tokenizer-spec";
import { listGPTParameters, parametersToTensorMap } from "@/lib/model/weights";
import { describeLineage } from "../jobs";
import type { BaseModel } from "../runtime";
import { loadBaseModel } from "./base-models";
import { writeTar } from "./tar";
import type { JobOptions, JobOutcome } from "./job";

export async function exportJob(options: JobOptions): Promise<JobOutcome> {
  const { channel, workerId, spec } = options;
  const config = spec.run.config;
  const base = loadBaseModel(spec.base ?? config.agent.base);
  const step = spec.base?.kind === "checkpoint" ? spec.base.step : 0;
  const dir = path.resolve(options.artifactsDir, "runs", spec.run.id, "export");
  const source = spec.base;
  const separate = config.protocol.policies === "separate" && source?.kind === "checkpoint";
  let file: string;
  let sizeBytes: number;
  if (separate) {
    const [first, ...others] = config.protocol.agents;
    const models = [{ agent: first!, model: base, origin: describeLineage(source) }];
    for (const agent of others) {
      const at = path.join(source.path, "agents", agent);
      if (!fs.existsSync(at)) {
        throw new Error(`checkpoint '${source.id}' holds no policy for agent '${agent}' (${at}): it was saved by a run whose agents shared one policy`);
      }
      // The agent's state read as a checkpoint base of its own, its adapter folded into the run's base, as the first agent's is.
      const agentSource = { ...source, id: `${source.id}/agents/${agent}`, path: at };
      models.push({ agent, model: loadBaseModel(agentSource), origin: describeLineage(agentSource) });
    }
    file = path.join(dir, `${spec.run.id}.tar`);
    fs.mkdirSync(dir, { recursive: true });
    const partial = `${file}.partial`;
    sizeBytes = writeTar(
      partial,
      models.map(({ agent, model, origin }) => ({ name: `${agent}.safetensors`, bytes: encodeModel(model, origin, agent) })),
    );
    fs.renameSync(partial, file);
  } else {
    file = path.join(dir, `${spec.run.id}.safetensors`);
    sizeBytes = writeModelFile(file, base, describeLineage(source ?? { kind: "builtin", name: config.agent.base }));
  }
  await channel.checkpoint({ workerId, jobId: spec.job.id, step, path: file, sizeBytes, kind: "export" });
  const what = separate ? `, one safetensors per agent (${config.protocol.agents.map((agent) => `${agent}.safetensors`).join(", ")})` : "";
  await channel.report({
    workerId,
    jobId: spec.job.id,
    logs: [{ level: "info", message: `Exported ${(sizeBytes / 1024 / 1024).toFixed(1)} MiB: ${path.basename(file)}${what}.` }],
  });
  return { outcome: "completed", reason: null };
}

/** A model's safetensors bytes (see writeModelFile); `agent`, when given, names the agent whose policy it is. */
function encodeModel(model: BaseModel, origin: string, agent?: string): Uint8Array {
  return encodeSafetensors(parametersToTensorMap(listGPTParameters(model.weights, model.config)), {
    format: "tinkerlab.model",
    version: "1",
    model_config: JSON.stringify(model.config),
    tokenizer: JSON.stringify(tokenizerSpec(model.tokenizer)),
    origin,
    ...(agent !== undefined ? { agent } : {}),
  });
}

/**
 * Writes a model as one safetensors file (written beside, then renamed into place): its weights under the tensor
 * names of docs/CHECKPOINTS.md, and in the header's metadata the model's config, its tokenizer and where it came
 * from, so the one file is all a loader needs.
 */
function writeModelFile(file: string, model: BaseModel, origin: string): number {
  const bytes = encodeModel(model, origin);
  fs.mkdirSync(path.dirname(file), { recursive: true });
  const partial = `${file}.partial`;
  fs.writeFileSync(partial, bytes);
  fs.renameSync(partial, file);
  return bytes.length;
}
