/**
 * Training and sampling throughput of the runtime next to PyTorch on the same CPU, measured in one run.
 *
 *   npm run bench:train -- [--backend js|wasm|cpu|auto] [--threads 1|2] [--seconds 5] [--configs tiny,small] [--no-torch]
 *
 * train: tokens/s of forwardBackward(cross_entropy) + optimStep(AdamW) on B random sequences of T tokens
 *        (B*T tokens per step, as the PyTorch script counts them).
 * sample: new tokens/s of sample() for B prompts of 4 tokens, generating up to T (B*(T-4) tokens per call).
 * The last line is one JSON object with every figure.
 */
import { fileURLToPath } from "node:url";
import { BaseModel, TrainingClient, initBackend, type BackendPreference } from "@/server/runtime";
import { formatTable, peakRssMb, throughput } from "./lib/measure";
import { runTorchAnchor } from "./lib/torch-anchor";

const configs = {
  tiny: { d: 64, L: 2, H: 4, T: 32, V: 64, B: 32 },
  small: { d: 128, L: 4, H: 4, T: 64, V: 128, B: 32 },
};
type ConfigName = keyof typeof configs;

function parseArgs(argv: string[]) {
  const args = { backend: "js" as BackendPreference, threads: undefined as number | undefined, seconds: 5, configs: Object.keys(configs) as ConfigName[], torch: true };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--backend") args.backend = argv[++i] as BackendPreference;
    else if (a === "--seconds") args.seconds = Number(argv[++i]);
    else if (a === "--threads") args.threads = Number(argv[++i]);
    else if (a === "--configs") args.configs = argv[++i].split(",") as ConfigName[];
    else if (a === "--no-torch") args.torch = false;
    else throw new Error(`unknown argument '${a}'; accepted: --backend, --threads, --seconds, --configs, --no-torch`);
  }
  for (const c of args.configs) if (!(c in configs)) throw new Error(`unknown config '${c}'; accepted: ${Object.keys(configs).join(", ")}`);
  return args;
}

const args = parseArgs(process.argv.slice(2));
const repoRoot = fileURLToPath(new URL("..", import.meta.url));
const { capabilities, engine } = await initBackend({ prefer: args.backend, threads: args.threads });

const results = [];
for (const name of args.configs) {
  const s = configs[name];
  const base = BaseModel.create({ vocabSize: s.V, contextLength: s.T, dModel: s.d, nLayers: s.L, nHeads: s.H }, { engine, seed: 0 });
  const client = new TrainingClient(base, { seed: 0 });
  let seed = 1;
  const random = () => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) >>> 8) % s.V;
  const batch = { tokens: Array.from({ length: s.B }, () => Array.from({ length: s.T }, random)) };
  const prompts = Array.from({ length: s.B }, () => Array.from({ length: 4 }, random));

  const train = await throughput(
    async () => {
      await client.forwardBackward(batch, "cross_entropy");
      await client.optimStep({ lr: 1e-3 });
    },
    s.B * s.T,
    { seconds: args.seconds },
  );
  const sample = await throughput(() => client.sample(prompts, 1, { maxTokens: s.T - 4, stop: [] }), s.B * (s.T - 4), {
    seconds: args.seconds,
  });
  const rss = peakRssMb();
  const torchTrain = args.torch ? runTorchAnchor(repoRoot, "train", s) : { tokensPerSecond: null, reason: "--no-torch" };
  const torchSample = args.torch ? runTorchAnchor(repoRoot, "sample", s) : { tokensPerSecond: null, reason: "--no-torch" };
  for (const r of [torchTrain, torchSample]) if (r.tokensPerSecond === null) console.error(`torch ${name}: n/a (${r.reason})`);
  results.push({
    name,
    params: base.parameterCount(),
    train_tokens_per_s: Math.round(train.tokensPerSecond),
    torch_train_tokens_per_s: torchTrain.tokensPerSecond,
    sample_tokens_per_s: Math.round(sample.tokensPerSecond),
    torch_sample_tokens_per_s: torchSample.tokensPerSecond,
    peak_rss_mb: Math.round(rss),
  });
}

const ratio = (a: number, b: number | null) => (b ? `${(a / b).toFixed(2)}x` : "n/a");
console.log(`backend: ${capabilities.backend} (requested ${capabilities.requested}), simd: ${capabilities.simd}, threads: ${capabilities.threads}`);
console.log(
  formatTable(
    ["config", "params", "train tok/s", "torch train", "ratio", "sample tok/s", "torch sample", "ratio", "peak RSS MB"],
    results.map((r) => [
      r.name,
      r.params,
      r.train_tokens_per_s,
      r.torch_train_tokens_per_s ?? "n/a",
      ratio(r.train_tokens_per_s, r.torch_train_tokens_per_s),
      r.sample_tokens_per_s,
      r.torch_sample_tokens_per_s ?? "n/a",
      ratio(r.sample_tokens_per_s, r.torch_sample_tokens_per_s),
      r.peak_rss_mb,
    ]),
  ),
);
console.log(
  JSON.stringify({
    configs: results.map(({ name, train_tokens_per_s, torch_train_tokens_per_s, sample_tokens_per_s, torch_sample_tokens_per_s, peak_rss_mb }) => ({
      name,
      train_tokens_per_s,
      torch_train_tokens_per_s,
      sample_tokens_per_s,
      torch_sample_tokens_per_s,
      peak_rss_mb,
    })),
  }),
);
