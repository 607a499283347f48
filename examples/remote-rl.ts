/**
 * A built-in use case trained by a script through a server's remote training session alone: the script plays the
 * episodes and runs the RL algorithm (lib/rl's `trainRl`, the loop a workbench run runs), the server's worker holds
 * the model and runs every forward, backward, optimizer step and sample. With the same config and seed, the
 * scores are the workbench run's.
 *
 *   npx tsx examples/remote-rl.ts [--url http://localhost:3000] [--key tl_…] [--use-case arithmetic] [--steps 20]
 */
import { parseArgs } from "node:util";
import { createClient, type TinkerlabClient } from "tinkerlab/client";
import { useCases } from "../lib/envs";
import { trainRl } from "../lib/rl/train";
import { defineExperiment, type ExperimentConfig, type ExperimentConfigInput } from "../lib/sdk/experiment";

/** Trains `config` (a built-in use case's) on a remote session; returns its evaluations and the session's final checkpoint. */
export async function trainRemotely(client: TinkerlabClient, config: ExperimentConfig, log: (line: string) => void = () => {}) {
  const useCase = useCases[config.environment];
  if (!useCase) throw new Error(`'${config.environment}' is not a built-in use case; built in: ${Object.keys(useCases).join(", ")}`);
  const training = config.agent.training;
  const session = await client.createTrainingClient({
    base: config.agent.base,
    seed: config.seed,
    valueHead: config.agent.valueHead,
    lora: training.mode === "lora" ? { rank: training.rank, alpha: training.alpha } : null,
    name: `${config.name}-remote`,
  });
  log(`session ${session.sessionId}: ${client.url}/runs/${session.sessionId}`);
  try {
    const result = await trainRl({
      config,
      policy: { primitives: session, tokenizer: session.tokenizer, contextLength: session.contextLength },
      environment: useCase.environment,
      protocol: { name: config.protocol.name, agents: config.protocol.agents, history: config.protocol.history },
      hooks: {
        onMetrics: async (step, metrics) => {
          const reward = metrics["reward/mean"] ?? metrics["eval/reward/mean"];
          if (reward !== undefined)
            log(`step ${step}: reward ${reward.toFixed(3)}${metrics["eval/score"] !== undefined ? `, eval score ${metrics["eval/score"].toFixed(3)}` : ""}`);
        },
      },
    });
    return { sessionId: session.sessionId, evaluations: result.evaluations, saved: await session.close() };
  } catch (error) {
    await session.close().catch(() => {});
    throw error;
  }
}

async function main() {
  const { values } = parseArgs({
    options: {
      url: { type: "string", default: process.env.TINKERLAB_URL ?? "http://localhost:3000" },
      key: { type: "string", default: process.env.TINKERLAB_API_KEY },
      "use-case": { type: "string", default: "arithmetic" },
      steps: { type: "string", default: "20" },
    },
  });
  const useCase = useCases[values["use-case"]!];
  if (!useCase) throw new Error(`--use-case: no built-in use case '${values["use-case"]}'; built in: ${Object.keys(useCases).join(", ")}`);
  const template = useCase.template as ExperimentConfigInput & { algorithm: object };
  const config = defineExperiment({ ...template, algorithm: { ...template.algorithm, steps: Number(values.steps) } } as never);
  const client = createClient({ url: values.url!, apiKey: values.key });
  const { evaluations, saved } = await trainRemotely(client, config, console.log);
  console.log(`evaluations: ${evaluations.map((e) => `step ${e.step} ${e.score.toFixed(3)}`).join(", ")}; saved as ${saved.checkpointId}`);
}

if (import.meta.url === `file://${process.argv[1]}`) {
  main().catch((error: unknown) => {
    console.error(error instanceof Error ? error.message : error);
    process.exit(1);
  });
}
