/**
 * The native matrix kernel (native/src: a Node-API addon with AVX-512 and AVX2+FMA code), built on first use
 * and loaded. Nothing is compiled at install time (a plain `npm ci` must never fail, and npm may not run install
 * scripts): the first process that wants the kernel compiles it with g++ into a cache folder, under a name made
 * of the sources' hash, Node's ABI and the architecture, and later processes load that file. Every failure (not
 * x86-64, no g++, no Node headers, a CPU without AVX2) is returned as a reason, and the engine keeps its
 * WebAssembly kernel.
 */
import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { mkdir, mkdtemp, readdir, rename, rm } from "node:fs/promises";
import { createRequire } from "node:module";
import { homedir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import type { NativeGemm } from "@/lib/model/simd-gemm";

export type NativeIsa = "avx512" | "avx2";

/** The addon's interface (native/src/addon.cc). */
export interface NativeKernel extends NativeGemm {
  /** the instruction sets this CPU runs, widest first */
  supported(): NativeIsa[];
  /** the kernel to use; it must be supported (the widest is chosen at load) */
  setIsa(isa: NativeIsa): void;
}

export type NativeKernelLoad = { kernel: NativeKernel; isa: NativeIsa; path: string } | { kernel: null; reason: string };

const sourceDir = fileURLToPath(new URL("./src/", import.meta.url));
const repoRoot = fileURLToPath(new URL("..", import.meta.url));
const defaultCacheDir = join(repoRoot, "node_modules", ".cache", "tinkerlab-native");

const commonFlags = ["-O3", "-std=c++17", "-fPIC", "-fvisibility=hidden"];
// Each instruction set in its own file with its own flags; addon.cc (baseline x86-64) checks the CPU first.
const units: { source: string; flags: string[] }[] = [
  { source: "addon.cc", flags: [] },
  { source: "gemm-avx512.cc", flags: ["-mavx512f", "-mfma"] },
  { source: "gemm-avx2.cc", flags: ["-mavx2", "-mfma"] },
];
const headers = ["gemm.h", "gemm-kernel.h", "ops-kernel.h"];
const buildTimeoutMs = 180_000;

const run = promisify(execFile);
const loads = new Map<string, Promise<NativeKernelLoad>>();

/**
 * The kernel, built if needed (once per process and options; later calls return the same result).
 * cacheDir: where compiled kernels are kept; compiler: the g++-compatible compiler to build with.
 */
export function loadNativeKernel(options: { cacheDir?: string; compiler?: string } = {}): Promise<NativeKernelLoad> {
  const { cacheDir = defaultCacheDir, compiler = "g++" } = options;
  const key = JSON.stringify([cacheDir, compiler]);
  let loaded = loads.get(key);
  if (!loaded) {
    loaded = load(cacheDir, compiler).catch((error: unknown) => ({ kernel: null, reason: error instanceof Error ? error.message : String(error) }));
    loads.set(key, loaded);
  }
  return loaded;
}

async function load(cacheDir: string, compiler: string): Promise<NativeKernelLoad> {
  if (process.arch !== "x64") return { kernel: null, reason: `the native kernel is for x86-64; this machine is ${process.arch}` };
  const path = join(cacheDir, `gemm-${buildKey()}.node`);
  if (!existsSync(path)) await build(path, compiler);
  const kernel = createRequire(import.meta.url)(path) as NativeKernel;
  const [isa] = kernel.supported();
  if (!isa) return { kernel: null, reason: "this CPU has neither AVX-512 nor AVX2 with FMA" };
  kernel.setIsa(isa);
  return { kernel, isa, path };
}

/** Sources, flags, Node's ABI and the architecture: what the compiled file depends on. */
function buildKey(): string {
  const hash = createHash("sha256");
  for (const file of [...units.map((u) => u.source), ...headers]) hash.update(file).update(readFileSync(join(sourceDir, file)));
  hash.update(JSON.stringify({ commonFlags, units, modules: process.versions.modules, napi: process.versions.napi, arch: process.arch }));
  return hash.digest("hex").slice(0, 16);
}

/** Node's own headers (node_api.h): beside the binary in a standard install, or where node-gyp keeps them. */
function nodeIncludeDir(): string {
  const candidates = [
    join(dirname(process.execPath), "..", "include", "node"),
    join(homedir(), ".cache", "node-gyp", process.versions.node, "include", "node"),
  ];
  const found = candidates.find((dir) => existsSync(join(dir, "node_api.h")));
  if (!found) throw new Error(`Node's headers (node_api.h) are not installed; looked in ${candidates.join(", ")}`);
  return found;
}

/** Compiles the addon in a fresh folder beside `path` and moves it into place in one rename. */
async function build(path: string, compiler: string): Promise<void> {
  const include = nodeIncludeDir();
  await mkdir(dirname(path), { recursive: true });
  const work = await mkdtemp(join(dirname(path), "build-"));
  const compile = async (args: string[]) => {
    try {
      await run(compiler, args, { timeout: buildTimeoutMs });
    } catch (error) {
      const e = error as NodeJS.ErrnoException & { stderr?: string };
      if (e.code === "ENOENT") throw new Error(`no C++ compiler: ${compiler} is not on PATH`);
      throw new Error(`${compiler} failed: ${(e.stderr ?? e.message).trim().split("\n").slice(0, 6).join(" | ")}`);
    }
  };
  try {
    const objects = units.map((u) => join(work, u.source.replace(/\.cc$/, ".o")));
    await Promise.all(units.map((u, i) => compile([...commonFlags, ...u.flags, `-I${include}`, "-c", join(sourceDir, u.source), "-o", objects[i]])));
    const output = join(work, "gemm.node");
    await compile(["-shared", "-pthread", "-o", output, ...objects]);
    await rename(output, path);
  } finally {
    await rm(work, { recursive: true, force: true });
  }
  // Kernels built from earlier sources are never loaded again (a process that has one open keeps its copy).
  for (const file of await readdir(dirname(path))) {
    if (/^gemm-[0-9a-f]{16}\.node$/.test(file) && join(dirname(path), file) !== path) await rm(join(dirname(path), file), { force: true });
  }
}
