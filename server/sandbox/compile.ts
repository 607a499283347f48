/**
 * Turns the user's TypeScript files into one script for QuickJS: esbuild bundles them with the guest bridge and
 * the SDK (the same modules the server runs natively), and writes a source map so errors point at the user's
 * own lines. Imports are an allow-list: the user's own files, the SDK under its public names, nothing else.
 */
import path from "node:path";
import { fileURLToPath } from "node:url";
import * as esbuild from "esbuild";
import { type SandboxDiagnostic, type SourceLocation, runtimeName } from "./errors";
import { SourceMapIndex, type RawSourceMap } from "./source-map";

/** The user's files by path relative to the experiment root, e.g. { "environment.ts": "..." }. */
export type SourceFiles = Record<string, string>;

export type CompiledEnvironment = {
  code: string;
  /** The file the bundle was built from. */
  entry: string;
  /** The user's sources, kept to locate functions named in contract errors. */
  files: SourceFiles;
  sourceMap: SourceMapIndex;
};

export type CompileResult = { ok: true; compiled: CompiledEnvironment; warnings: SandboxDiagnostic[] } | { ok: false; diagnostics: SandboxDiagnostic[] };

const repoRoot = fileURLToPath(new URL("../../", import.meta.url));
const guestDir = fileURLToPath(new URL("./guest/", import.meta.url));
const sdkModule = path.join(guestDir, "sdk.ts");

/** What user code may import, and the file each name means. */
export const sandboxModules: Record<string, string> = {
  tinkerlab: sdkModule,
  "@tinkerlab/sdk": sdkModule,
  // The built-in environments import the SDK by its repository path; a user's copy of one must compile too.
  "@/lib/sdk": sdkModule,
  "@/lib/sdk/environment": path.join(repoRoot, "lib/sdk/environment.ts"),
  "@/lib/model/rng": path.join(repoRoot, "lib/model/rng.ts"),
};

/** Files the sandbox bundles from the repository: the SDK's pure modules, the guest bridge and the wire's constants. */
const trustedFiles = new Set([
  path.join(repoRoot, "lib/sdk/environment.ts"),
  path.join(repoRoot, "lib/sdk/action-space.ts"),
  path.join(repoRoot, "lib/sdk/protocol.ts"),
  path.join(repoRoot, "lib/model/rng.ts"),
  sdkModule,
  path.join(guestDir, "bridge.ts"),
  path.join(repoRoot, "server/sandbox/wire.ts"),
]);

const USER = "user";
const ENTRY = "sandbox-entry";
const EXTENSIONS = ["", ".ts", ".tsx", ".js", ".mjs", "/index.ts", "/index.js"];
export const bundleFileName = "sandbox.js";

/** The default entry: environment.ts if present, else the only file. */
function pickEntry(files: SourceFiles, entry?: string): string {
  if (entry !== undefined) {
    const normalized = normalizeUserPath(entry);
    if (!(normalized in files)) throw new Error(`entry '${entry}' is not among the files: ${Object.keys(files).join(", ")}`);
    return normalized;
  }
  if ("environment.ts" in files) return "environment.ts";
  const names = Object.keys(files);
  if (names.length === 1) return names[0]!;
  throw new Error(`name the entry file: there are ${names.length} files (${names.join(", ")}) and none is environment.ts`);
}

export async function compileEnvironment(inputFiles: SourceFiles, options: { entry?: string } = {}): Promise<CompileResult> {
  const files: SourceFiles = {};
  for (const [name, text] of Object.entries(inputFiles)) files[normalizeUserPath(name)] = text;
  let entry: string;
  try {
    entry = pickEntry(files, options.entry);
  } catch (error) {
    return { ok: false, diagnostics: [diagnostic("syntax", (error as Error).message, null)] };
  }

  let result: esbuild.BuildResult & { outputFiles: esbuild.OutputFile[] };
  try {
    result = await esbuild.build({
      entryPoints: [`${ENTRY}:${entry}`],
      bundle: true,
      write: false,
      format: "iife",
      platform: "neutral",
      target: "es2022",
      outfile: bundleFileName,
      // Messages name files relative to this folder (see `userFacingBundlerText`), wherever the process runs.
      absWorkingDir: repoRoot,
      sourcemap: "external",
      sourcesContent: false,
      legalComments: "none",
      logLevel: "silent",
      charset: "utf8",
      plugins: [sandboxResolver(files)],
    });
  } catch (error) {
    const failure = error as esbuild.BuildFailure;
    if (!failure.errors) throw error;
    return { ok: false, diagnostics: failure.errors.map((message) => fromEsbuild(message, "error")) };
  }
  const code = result.outputFiles.find((file) => file.path.endsWith(".js"))!.text;
  const map = JSON.parse(result.outputFiles.find((file) => file.path.endsWith(".map"))!.text) as RawSourceMap;
  return {
    ok: true,
    compiled: { code, entry, files, sourceMap: new SourceMapIndex(map, userSourceName) },
    warnings: result.warnings.map((message) => fromEsbuild(message, "warning")),
  };
}

/** Source-map names of user files look like "user:environment.ts"; SDK and bridge frames are not the user's. */
function userSourceName(source: string): string | null {
  const index = source.indexOf(`${USER}:`);
  return index === -1 ? null : source.slice(index + USER.length + 1);
}

function sandboxResolver(files: SourceFiles): esbuild.Plugin {
  return {
    name: "tinkerlab-sandbox",
    setup(build) {
      build.onResolve({ filter: /.*/ }, (args) => {
        if (args.kind === "entry-point") return { path: args.path.slice(ENTRY.length + 1), namespace: ENTRY };
        if (args.namespace === ENTRY) {
          if (args.path === "bridge") return { path: path.join(guestDir, "bridge.ts"), sideEffects: true };
          return { path: args.path.slice(USER.length + 1), namespace: USER };
        }
        const specifier = args.path;
        if (specifier in sandboxModules) return { path: sandboxModules[specifier]!, sideEffects: false };
        if (args.namespace === USER) {
          if (specifier.startsWith("./") || specifier.startsWith("../")) {
            // A path out of the experiment ('../../x') is not among the files either: the same answer as for a
            // missing file, whatever is there on the server.
            const base = path.posix.join(path.posix.dirname(args.importer), specifier);
            const found = EXTENSIONS.map((ext) => path.posix.normalize(base + ext)).find((name) => name in files);
            if (found) return { path: found, namespace: USER };
            return { errors: [{ text: `cannot find '${specifier}' among your files (${Object.keys(files).join(", ")})` }] };
          }
          return {
            errors: [
              {
                text:
                  `'${specifier}' cannot be imported in the sandbox: there is no file system, network, process or ` +
                  `package access. Import the SDK as 'tinkerlab' (${Object.keys(sandboxModules).join(", ")}) or your own files ('./name').`,
              },
            ],
          };
        }
        // The SDK's own relative imports, kept within the trusted files.
        if (specifier.startsWith(".") || specifier.startsWith("@/")) {
          const base = specifier.startsWith("@/") ? path.join(repoRoot, specifier.slice(2)) : path.resolve(path.dirname(args.importer), specifier);
          const file = [".ts", "/index.ts", ""].map((ext) => base + ext).find((candidate) => trustedFiles.has(candidate));
          if (file) return { path: file, sideEffects: false };
        }
        return { errors: [{ text: `${runtimeName} may not import '${specifier}' in the sandbox` }] };
      });
      build.onLoad({ filter: /.*/, namespace: ENTRY }, (args) => ({
        contents: `import { install } from "bridge";\nimport * as user from ${JSON.stringify(`${USER}:${args.path}`)};\ninstall(user);\n`,
        loader: "js",
        resolveDir: guestDir,
      }));
      build.onLoad({ filter: /.*/, namespace: USER }, (args) => ({
        contents: files[args.path]!,
        loader: args.path.endsWith(".js") || args.path.endsWith(".mjs") ? "js" : "ts",
      }));
    },
  };
}

/**
 * Where the user defined a function of their environment ("step", "reset", "tools.search.run",
 * "rewardFunctions.correct"), for errors about what it returned, which carry no stack. A textual search for
 * the property in the entry file first, then the others; null when it cannot be found.
 */
export function locateFunction(compiled: Pick<CompiledEnvironment, "files" | "entry">, fn: string): SourceLocation | null {
  const parts = fn.split(".");
  const name = parts[0] === "tools" || parts[0] === "rewardFunctions" ? parts[1] : parts[0];
  if (!name || !/^[A-Za-z_$][\w$]*$/.test(name)) return null;
  const pattern = new RegExp(`(^|[\\s,{])((?:async\\s+)?${name})\\s*(?:\\(|:|=)`, "m");
  const names = [compiled.entry, ...Object.keys(compiled.files).filter((file) => file !== compiled.entry)];
  for (const file of names) {
    const text = compiled.files[file]!;
    const match = pattern.exec(text);
    if (!match) continue;
    const offset = match.index + match[1]!.length;
    const before = text.slice(0, offset);
    const line = before.split("\n").length;
    return { file, line, column: offset - before.lastIndexOf("\n") };
  }
  return null;
}

function normalizeUserPath(name: string): string {
  const normalized = path.posix
    .normalize(name.replace(/\\/g, "/"))
    .replace(/^(\.\/)+/, "")
    .replace(/^\/+/, "");
  if (normalized.startsWith("../")) throw new Error(`file '${name}' is outside the experiment`);
  return normalized;
}

/** An esbuild message located in the user's file, or, when it arose in the SDK or the bridge, in no file at all. */
function fromEsbuild(message: esbuild.Message, severity: "error" | "warning"): SandboxDiagnostic {
  const location = message.location;
  const file = location?.file ? userSourceName(location.file) : null;
  const text = userFacingBundlerText(message.text);
  if (location && file) return diagnostic("syntax", text, { file, line: location.line, column: location.column + 1 }, severity);
  return diagnostic("syntax", location ? `${text} (inside ${runtimeName})` : text, null, severity);
}

/** The bundler's name for each file the sandbox bundles from the repository (relative to it) → the name the user knows it by. */
const bundledFileNames = new Map<string, string>([
  ...[...trustedFiles].map((file): [string, string] => [path.relative(repoRoot, file), runtimeName]),
  // The SDK's modules by the name the user imports them with; of several names for one file the first ('tinkerlab').
  ...Object.entries(sandboxModules)
    .reverse()
    .map(([name, file]): [string, string] => [path.relative(repoRoot, file), `'${name}'`]),
]);

/** esbuild's text ("No matching export in \"server/sandbox/guest/sdk.ts\" for import \"x\"") without the server's file names. */
function userFacingBundlerText(text: string): string {
  return text.replace(/"([^"\s]+\.ts)"/g, (quoted, file: string) => bundledFileNames.get(file) ?? quoted);
}

function diagnostic(
  source: SandboxDiagnostic["source"],
  message: string,
  location: SourceLocation | null,
  severity: SandboxDiagnostic["severity"] = "error",
): SandboxDiagnostic {
  return { severity, message, file: location?.file ?? null, line: location?.line ?? null, column: location?.column ?? null, source };
}
