/**
 * Training and sampling throughput of the runtime next to PyTorch on the same CPU, measured in one run.
 *
 *   npm run bench:train -- [--backend js|wasm|cpu|auto] [--threads 1|2] [--kernel auto|native|wasm] [--seconds 5]
 *                          [--configs tiny,small,llama30m,llama135m] [--no-torch] [--cpu-time]
 *
 * train: tokens/s of forwardBackward(cross_entropy) + optimStep(AdamW) on B random sequences of T tokens
 *        (B*T tokens per step, as the PyTorch script counts them).
 * sample: new tokens/s of sample() for B prompts of 4 tokens, generating up to T (B*(T-4) tokens per call).
 * The last line is one JSON object with every figure.
 *
 * Configs: tiny and small (GPT-2's block) run by default; llama30m (Llama's block: RMSNorm, rotary, grouped-query
 * attention, SwiGLU, tied embeddings; 27.4M parameters) and llama135m (SmolLM2-135M's shape: d 576, 30 layers, 9
 * heads, 3 key/value heads, SwiGLU 1,536, vocabulary 49,152; 134.5M parameters) run when named. A llama30m step
 * takes about a second on each side, a llama135m step about five (its row takes a few minutes).
 *
 * GFLOP/s: tokens/s times the operations a token costs, counted as is usual (PaLM's appendix B): 6 per weight of
 * every product (the tied output layer included, the embedding lookup not) and 12·L·d·T for attention in training;
 * a third of that, at the mean context T/2, in sampling. The share is of this CPU's fused multiply-add peak on one
 * thread (bench/lib/fma-peak.ts: the widest vectors the native kernel runs here; times the threads used on the
 * wall clock), measured at the start of the run; null where g++ cannot build the peak program. Each config is measured next
 * to its PyTorch anchor (bench/anchors/torch_gpt.py, torch_llama.py: the same block in plain PyTorch, timed for the
 * same --seconds), whose figure is refused unless its parameter count equals ours.
 *
 * --kernel picks the js engine's matrix kernel (default: TINKERLAB_KERNEL, auto).
 * --cpu-time compares per core on a shared machine: one thread on each side, each timed by its own process's
 * CPU time instead of the wall clock (PyTorch: torch.set_num_threads(1), OPENBLAS_NUM_THREADS=1 and
 * time.process_time), so other processes' load matters much less.
 */
import os from "node:os";
import { fileURLToPath } from "node:url";
import { BaseModel, TrainingClient, initBackend, kernelPreferences, type BackendPreference, type KernelPreference } from "@/server/runtime";
import { countParameters, parseGPTConfig } from "@/lib/model/config";
import { loadNativeKernel } from "@/native/kernel";
import { fmaPeak } from "./lib/fma-peak";
import { formatTable, peakRssMb, throughput } from "./lib/measure";
import { type AnchorResult, type AnchorShape, runTorchAnchor } from "./lib/torch-anchor";

/** Each config is its anchor's shape (Llama's block with tied embeddings). */
const configs: Record<string, AnchorShape> = {
  tiny: { d: 64, L: 2, H: 4, T: 32, V: 64, B: 32 },
  small: { d: 128, L: 4, H: 4, T: 64, V: 128, B: 32 },
  llama30m: { d: 512, L: 8, H: 8, T: 128, V: 8192, B: 8, llama: { kv: 4, ff: 1376 } },
  llama135m: { d: 576, L: 30, H: 9, T: 128, V: 49152, B: 8, llama: { kv: 3, ff: 1536 } },
};
type ConfigName = keyof typeof configs;
/** What runs without --configs: the llama row alone takes longer than both of these. */
const defaultConfigs: ConfigName[] = ["tiny", "small"];

function modelConfig(s: AnchorShape) {
  const common = { vocabSize: s.V, contextLength: s.T, dModel: s.d, nLayers: s.L, nHeads: s.H };
  if (!s.llama) return parseGPTConfig(common);
  return parseGPTConfig({ architecture: "llama", ...common, nKvHeads: s.llama.kv, dFF: s.llama.ff, tiedEmbeddings: true });
}

/** Operations per token: training (forward, backward) and sampling (forward at the mean context T/2). */
function flopsPerToken(s: AnchorShape): { train: number; sample: number } {
  const hd = s.d / s.H;
  const kvDim = s.llama ? s.llama.kv * hd : s.d;
  const ff = s.llama ? s.llama.ff : 4 * s.d;
  const perLayer = s.d * (s.d + 2 * kvDim) + s.d * s.d + s.d * ff * (s.llama ? 2 : 1) + ff * s.d;
  const weights = s.L * perLayer + s.V * s.d;
  const attention = 12 * s.L * s.d * s.T;
  return { train: 6 * weights + attention, sample: 2 * weights + attention / 6 };
}

function parseArgs(argv: string[]) {
  const args = {
    backend: "js" as BackendPreference,
    threads: undefined as number | undefined,
    kernel: undefined as KernelPreference | undefined,
    seconds: 5,
    configs: defaultConfigs,
    torch: true,
    cpuTime: false,
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--backend") args.backend = argv[++i] as BackendPreference;
    else if (a === "--seconds") args.seconds = Number(argv[++i]);
    else if (a === "--threads") args.threads = Number(argv[++i]);
    else if (a === "--kernel") {
      const kernel = argv[++i];
      if (!(kernelPreferences as readonly string[]).includes(kernel)) throw new Error(`unknown kernel '${kernel}'; accepted: ${kernelPreferences.join(", ")}`);
      args.kernel = kernel as KernelPreference;
    } else if (a === "--configs") args.configs = argv[++i].split(",") as ConfigName[];
    else if (a === "--no-torch") args.torch = false;
    else if (a === "--cpu-time") args.cpuTime = true;
    else throw new Error(`unknown argument '${a}'; accepted: --backend, --threads, --kernel, --seconds, --configs, --no-torch, --cpu-time`);
  }
  for (const c of args.configs) if (!(c in configs)) throw new Error(`unknown config '${c}'; accepted: ${Object.keys(configs).join(", ")}`);
  if (args.cpuTime && args.threads !== undefined && args.threads !== 1)
    throw new Error("--cpu-time measures one thread; leave out --threads or pass --threads 1");
  if (args.cpuTime) args.threads = 1;
  return args;
}

/** Like `throughput`, but per second of this process's CPU time. */
async function cpuThroughput(fn: () => Promise<unknown>, tokensPerCall: number, seconds: number) {
  for (let i = 0; i < 2; i++) await fn();
  const cpuSeconds = (since: NodeJS.CpuUsage) => {
    const { user, system } = process.cpuUsage(since);
    return (user + system) / 1e6;
  };
  const start = process.cpuUsage();
  let calls = 0;
  while (cpuSeconds(start) < seconds || calls < 2) {
    await fn();
    calls++;
  }
  return { tokensPerSecond: (calls * tokensPerCall) / cpuSeconds(start) };
}

const args = parseArgs(process.argv.slice(2));
const repoRoot = fileURLToPath(new URL("..", import.meta.url));
const { capabilities, engine } = await initBackend({ prefer: args.backend, threads: args.threads, kernel: args.kernel });

// This CPU's peak, on the widest vectors the native kernel runs here (whichever kernel the engine uses).
const cpuModel = os.cpus()[0]?.model ?? "unknown CPU";
const machineNative = await loadNativeKernel();
const machineIsa = machineNative.kernel?.supported()[0] ?? null;
let peakGflops: number | null = null;
if (machineIsa) {
  try {
    const peak = fmaPeak(machineIsa, capabilities.threads, 5);
    peakGflops = args.cpuTime || capabilities.threads === 1 ? peak.cpu : peak.wall;
  } catch (error) {
    console.error(`the FMA peak was not measured: ${error instanceof Error ? error.message.split("\n")[0] : String(error)}`);
  }
}
const gflops = (tokensPerSecond: number | null, flops: number) => (tokensPerSecond === null ? null : Number(((tokensPerSecond * flops) / 1e9).toFixed(1)));
const share = (g: number | null) => (g === null || peakGflops === null ? null : Number((g / peakGflops).toFixed(3)));

const results = [];
for (const name of args.configs) {
  const s = configs[name];
  const config = modelConfig(s);
  const params = countParameters(config);
  const base = BaseModel.create(config, { engine, seed: 0 });
  if (base.parameterCount() !== params) throw new Error(`${name}: countParameters says ${params}, the model holds ${base.parameterCount()}`);
  console.error(`${name}: ${params.toLocaleString("en-US")} parameters (${s.llama ? "llama" : "gpt"} block)`);
  const client = new TrainingClient(base, { seed: 0 });
  let seed = 1;
  const random = () => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) >>> 8) % s.V;
  const batch = { tokens: Array.from({ length: s.B }, () => Array.from({ length: s.T }, random)) };
  const prompts = Array.from({ length: s.B }, () => Array.from({ length: 4 }, random));

  const measure = (fn: () => Promise<unknown>, tokens: number) =>
    args.cpuTime ? cpuThroughput(fn, tokens, args.seconds) : throughput(fn, tokens, { seconds: args.seconds });
  const train = await measure(async () => {
    await client.forwardBackward(batch, "cross_entropy");
    await client.optimStep({ lr: 1e-3 });
  }, s.B * s.T);
  const sample = await measure(() => client.sample(prompts, 1, { maxTokens: s.T - 4, stop: [] }), s.B * (s.T - 4));
  const rss = peakRssMb();
  const anchor = (mode: "train" | "sample"): AnchorResult => {
    if (!args.torch) return { tokensPerSecond: null, reason: "--no-torch" };
    const r = runTorchAnchor(repoRoot, mode, s, { cpuTime: args.cpuTime, seconds: args.seconds });
    // the same shape on both sides, or the comparison means nothing
    if (r.tokensPerSecond !== null && r.params !== params) return { tokensPerSecond: null, reason: `torch model has ${r.params} parameters, ours ${params}` };
    return r;
  };
  const torchTrain = anchor("train");
  const torchSample = anchor("sample");
  for (const r of [torchTrain, torchSample]) if (r.tokensPerSecond === null) console.error(`torch ${name}: n/a (${r.reason})`);
  const flops = flopsPerToken(s);
  const trainGflops = gflops(train.tokensPerSecond, flops.train);
  const torchTrainGflops = gflops(torchTrain.tokensPerSecond, flops.train);
  results.push({
    name,
    params,
    train_tokens_per_s: Math.round(train.tokensPerSecond),
    torch_train_tokens_per_s: torchTrain.tokensPerSecond,
    train_gflops: trainGflops,
    train_peak_share: share(trainGflops),
    torch_train_gflops: torchTrainGflops,
    torch_train_peak_share: share(torchTrainGflops),
    sample_tokens_per_s: Math.round(sample.tokensPerSecond),
    torch_sample_tokens_per_s: torchSample.tokensPerSecond,
    sample_gflops: gflops(sample.tokensPerSecond, flops.sample),
    peak_rss_mb: Math.round(rss),
  });
}

const ratioValue = (a: number, b: number | null) => (b ? Number((a / b).toFixed(3)) : null);
const ratio = (a: number, b: number | null) => (b ? `${(a / b).toFixed(2)}x` : "n/a");
const percent = (x: number | null) => (x === null ? "n/a" : `${(100 * x).toFixed(0)}%`);
console.log(
  `${cpuModel}, ${os.availableParallelism()} cores, load average ${os.loadavg()[0]!.toFixed(2)}; ` +
    `FMA peak ${peakGflops === null ? "n/a" : `${peakGflops.toFixed(1)} GFLOP/s`} (${machineIsa ?? "no native kernel"}, ${capabilities.threads} thread${capabilities.threads === 1 ? "" : "s"})`,
);
console.log(
  `backend: ${capabilities.backend} (requested ${capabilities.requested}), simd: ${capabilities.simd}, kernel: ${capabilities.kernel}, threads: ${capabilities.threads}` +
    capabilities.skipped.map((s) => ` (skipped ${s.kernel ? `${s.kernel} kernel` : s.backend}: ${s.reason})`).join("") +
    (args.cpuTime ? "; tokens per CPU-second, one thread each side" : ""),
);
console.log(
  formatTable(
    [
      "config",
      "params",
      "train tok/s",
      "torch train",
      "ratio",
      "GFLOP/s (peak)",
      "torch GFLOP/s (peak)",
      "sample tok/s",
      "torch sample",
      "ratio",
      "peak RSS MB",
    ],
    results.map((r) => [
      r.name,
      r.params,
      r.train_tokens_per_s,
      r.torch_train_tokens_per_s ?? "n/a",
      ratio(r.train_tokens_per_s, r.torch_train_tokens_per_s),
      `${r.train_gflops} (${percent(r.train_peak_share)})`,
      r.torch_train_gflops === null ? "n/a" : `${r.torch_train_gflops} (${percent(r.torch_train_peak_share)})`,
      r.sample_tokens_per_s,
      r.torch_sample_tokens_per_s ?? "n/a",
      ratio(r.sample_tokens_per_s, r.torch_sample_tokens_per_s),
      r.peak_rss_mb,
    ]),
  ),
);
console.log(
  JSON.stringify({
    cpu_model: cpuModel,
    isa: machineIsa,
    kernel: capabilities.kernel,
    threads: capabilities.threads,
    peak_gflops: peakGflops === null ? null : Number(peakGflops.toFixed(1)),
    cpu_time: args.cpuTime,
    load_avg_1m: Number(os.loadavg()[0]!.toFixed(2)),
    configs: results.map((r) => ({
      ...r,
      train_ratio: ratioValue(r.train_tokens_per_s, r.torch_train_tokens_per_s),
      sample_ratio: ratioValue(r.sample_tokens_per_s, r.torch_sample_tokens_per_s),
    })),
  }),
);
