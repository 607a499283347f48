/**
 * Makes the built-in base checkpoints in lib/envs/bases/: for each recipe of lib/envs/bases.ts, a scripted,
 * deliberately imperfect demonstrator plays the use case, and a small randomly initialised model is SFT'd on its
 * conversations. The generalist base (`generalist-base`, lib/envs/generalist.ts) is SFT'd instead on a corpus of
 * generic skills generated afresh for every batch, and its held-out score per skill is printed. Deterministic on
 * one machine: the same recipe gives the same weights.
 *
 *   npx tsx bin/make-base-models.ts [--only arithmetic-base] [--steps N] [--out DIR] [--eval-every N]
 *                                   [--kernel wasm|native|auto] [--threads 1|2]
 *
 * The engine defaults to the WebAssembly kernel on one thread, the one every shipped base was made with, so the
 * script reproduces them; `--kernel native --threads 2` runs 2-3 times faster on this machine but rounds
 * differently, so its bases differ from the shipped ones in their last bits (and so in what they sample).
 */
import { mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { parseArgs } from "node:util";
import { builtInBaseDir, builtInBases } from "../lib/envs/bases";
import { readBuiltInDataset } from "../lib/envs/datasets";
import { demonstrate, demonstrators, toConversations } from "../lib/envs/demonstrations";
import { generalistConversation, generalistRecipe, generalistSkills, heldOutSkills, scoreSkills } from "../lib/envs/generalist";
import { useCases } from "../lib/envs/index";
import { Rng } from "../lib/model/rng";
import { evaluate } from "../lib/rl/evaluate";
import { sftStep } from "../lib/rl/sft";
import { splitDataset } from "../lib/rl/train";
import { BaseModel, TrainingClient, initBackend } from "../server/runtime/index";

const { values: args } = parseArgs({
  options: {
    only: { type: "string" },
    steps: { type: "string" },
    out: { type: "string" },
    "eval-every": { type: "string", default: "0" },
    kernel: { type: "string", default: "wasm" },
    threads: { type: "string", default: "1" },
  },
});
if (!["wasm", "native", "auto"].includes(args.kernel!)) throw new Error(`--kernel must be wasm, native or auto; got ${JSON.stringify(args.kernel)}`);
const { capabilities } = await initBackend({ prefer: "js", kernel: args.kernel as "wasm" | "native" | "auto", threads: Number(args.threads) });
console.error(`engine: kernel ${capabilities.kernel}, ${capabilities.threads} thread(s)`);
const names = args.only ? args.only.split(",") : [...Object.keys(builtInBases), "generalist-base"];
const evalEvery = Number(args["eval-every"]);

for (const name of names) {
  if (name === "generalist-base") {
    await makeGeneralist();
    continue;
  }
  const recipe = builtInBases[name];
  if (!recipe) throw new Error(`no recipe '${name}'; recipes: ${Object.keys(builtInBases).join(", ")}`);
  const started = performance.now();
  const useCase = useCases[recipe.useCase]!;
  const { environment, protocol } = useCase;
  const split = environment.data.kind === "dataset" ? splitDataset(readBuiltInDataset(environment.data.dataset)) : null;
  const trajectories = await demonstrate(useCase, demonstrators[recipe.useCase]!, recipe.sft.episodes, recipe.sft.seed, split?.train);
  const conversations = toConversations(trajectories, protocol.history);
  const demoScore = trajectories.reduce((a, t) => a + t.score, 0) / trajectories.length;

  const base = BaseModel.create(recipe.model, { seed: recipe.sft.seed });
  const client = new TrainingClient(base, { seed: recipe.sft.seed });
  const policy = { primitives: client, tokenizer: base.tokenizer, contextLength: recipe.model.contextLength };
  const evalSpecs = Array.from({ length: 100 }, (_, i) => (split ? { seed: 1_000_000 + i, sample: split.test[i]! } : { seed: 1_000_000 + i }));
  const maxTokens = useCase.template.agent.sampling?.maxTokens ?? 16;
  const report = async (step: number, loss: number) => {
    const greedy = await evaluate({ policy, environment, protocol, specs: evalSpecs, maxTokens });
    const sampled = await evaluate({ policy, environment, protocol, specs: evalSpecs, maxTokens, temperature: 1 });
    const seconds = (performance.now() - started) / 1000;
    console.log(
      `${name} step ${step} loss ${loss.toFixed(3)} ${environment.scoreName} greedy ${greedy.score.toFixed(2)} sampled ${sampled.score.toFixed(2)} (${seconds.toFixed(0)} s)`,
    );
  };
  console.log(
    `${name}: ${conversations.length} conversations from ${trajectories.length} demonstrations (demonstrator ${environment.scoreName} ${demoScore.toFixed(2)}), ${base.parameterCount()} parameters`,
  );

  const { steps: defaultSteps, batch, learningRate, seed } = recipe.sft;
  const steps = args.steps ? Number(args.steps) : defaultSteps;
  const rng = new Rng(seed);
  let loss = NaN;
  for (let step = 0; step < steps; step++) {
    const lr = learningRate * (0.1 + 0.45 * (1 + Math.cos((Math.PI * step) / steps)));
    const chosen = Array.from({ length: batch }, () => conversations[rng.nextU32() % conversations.length]!);
    loss = (await sftStep(policy, chosen, { learningRate: lr }))["loss/sft"]!;
    if (evalEvery > 0 && step > 0 && step % evalEvery === 0) await report(step, loss);
  }
  await report(steps, loss);
  const dir = args.out ? path.join(args.out, name) : builtInBaseDir(name);
  mkdirSync(path.dirname(dir), { recursive: true });
  await client.saveWeightsForSampler(dir);
  console.log(`${name}: wrote ${dir} in ${((performance.now() - started) / 1000).toFixed(0)} s`);
}

/** The generalist base: SFT on fresh conversations of the corpus's skills, scored per skill on held-out ones. */
async function makeGeneralist() {
  const name = "generalist-base";
  const started = performance.now();
  const { model, sft } = generalistRecipe;
  const base = BaseModel.create(model, { seed: sft.seed });
  const client = new TrainingClient(base, { seed: sft.seed });
  const policy = { primitives: client, tokenizer: base.tokenizer, contextLength: model.contextLength };
  const steps = args.steps ? Number(args.steps) : sft.steps;
  const rng = new Rng(sft.seed);
  console.log(`${name}: ${base.parameterCount()} parameters, ${steps} steps of ${sft.batch} conversations`);
  const report = async (step: number, loss: number) => {
    const seen = await scoreSkills(policy, generalistSkills);
    const unseen = await scoreSkills(policy, heldOutSkills);
    const mean = (scores: Record<string, number>) => Object.values(scores).reduce((a, b) => a + b, 0) / Object.keys(scores).length;
    const seconds = (performance.now() - started) / 1000;
    console.log(
      `${name} step ${step} loss ${loss.toFixed(3)} corpus skills ${mean(seen).toFixed(2)} held-out skills ${mean(unseen).toFixed(2)} (${seconds.toFixed(0)} s)`,
    );
    console.log(
      `  ${Object.entries({ ...seen, ...unseen })
        .map(([skill, score]) => `${skill} ${score.toFixed(2)}`)
        .join(" · ")}`,
    );
    return { seen, unseen };
  };
  let loss = NaN;
  let tokens = 0;
  for (let step = 0; step < steps; step++) {
    const warm = Math.min(1, (step + 1) / 100);
    const lr = sft.learningRate * warm * (0.1 + 0.45 * (1 + Math.cos((Math.PI * step) / steps)));
    const chosen = Array.from({ length: sft.batch }, () => generalistConversation(rng));
    const metrics = await sftStep(policy, chosen, { learningRate: lr, promptWeight: sft.promptWeight });
    loss = metrics["loss/sft"]!;
    tokens += metrics["train/tokens"]!;
    if (step % 100 === 0)
      console.log(
        `${name} step ${step} loss ${loss.toFixed(3)} (${((performance.now() - started) / 1000).toFixed(0)} s, ${Math.round(tokens)} weighted tokens)`,
      );
    if (evalEvery > 0 && step > 0 && step % evalEvery === 0) await report(step, loss);
  }
  const scores = await report(steps, loss);
  const dir = args.out ? path.join(args.out, name) : path.join(path.dirname(builtInBaseDir("arithmetic-base")), name);
  mkdirSync(path.dirname(dir), { recursive: true });
  await client.saveWeightsForSampler(dir);
  writeFileSync(path.join(dir, "skills.json"), `${JSON.stringify({ steps, seconds: Math.round((performance.now() - started) / 1000), ...scores }, null, 2)}\n`);
  console.log(`${name}: wrote ${dir} in ${((performance.now() - started) / 1000).toFixed(0)} s`);
}
