/**
 * Type errors in the user's files, with their line and column. esbuild strips types without checking them, so
 * the TypeScript checker runs over the user's files with the SDK resolved to its real sources and only the
 * globals the sandbox has (ES2022 and console; no DOM, no Node). Parsed library and SDK files are cached across
 * calls, so after the first check (about a second) a check costs little more than the user's own files.
 */
import path from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";
import type { SandboxDiagnostic } from "./errors";
import { type SourceFiles, sandboxModules } from "./compile";

const repoRoot = fileURLToPath(new URL("../../", import.meta.url));
const USER_ROOT = "/__user__/";
const GLOBALS_FILE = "/__sandbox__/globals.d.ts";
const GLOBALS = `declare var console: { log(...args: unknown[]): void; info(...args: unknown[]): void; warn(...args: unknown[]): void; error(...args: unknown[]): void; debug(...args: unknown[]): void };\n`;

const options: ts.CompilerOptions = {
  target: ts.ScriptTarget.ES2022,
  module: ts.ModuleKind.ESNext,
  moduleResolution: ts.ModuleResolutionKind.Bundler,
  lib: ["lib.es2022.d.ts"],
  types: [],
  strict: true,
  noEmit: true,
  skipLibCheck: true,
  isolatedModules: true,
  allowImportingTsExtensions: true,
};

/** Library and SDK files, parsed once per process. */
const cachedFiles = new Map<string, ts.SourceFile>();

export function typeCheckEnvironment(files: SourceFiles): SandboxDiagnostic[] {
  const userPaths = new Map(Object.keys(files).map((name) => [USER_ROOT + name, name]));
  const host = ts.createCompilerHost(options);
  const readFile = (fileName: string) => {
    const user = userPaths.get(fileName);
    if (user !== undefined) return files[user];
    if (fileName === GLOBALS_FILE) return GLOBALS;
    return ts.sys.readFile(fileName);
  };
  host.readFile = readFile;
  host.fileExists = (fileName) => userPaths.has(fileName) || fileName === GLOBALS_FILE || ts.sys.fileExists(fileName);
  host.writeFile = () => {};
  host.getSourceFile = (fileName, languageVersion) => {
    if (!userPaths.has(fileName)) {
      const cached = cachedFiles.get(fileName);
      if (cached) return cached;
    }
    const text = readFile(fileName);
    if (text === undefined) return undefined;
    const sourceFile = ts.createSourceFile(fileName, text, languageVersion);
    if (!userPaths.has(fileName)) cachedFiles.set(fileName, sourceFile);
    return sourceFile;
  };
  host.resolveModuleNameLiterals = (literals, containingFile) =>
    literals.map((literal) => {
      const name = literal.text;
      const target = sandboxModules[name];
      if (target) return { resolvedModule: { resolvedFileName: target, extension: ts.Extension.Ts, isExternalLibraryImport: false } };
      if (userPaths.has(containingFile) && (name.startsWith("./") || name.startsWith("../"))) {
        const base = path.posix.join(path.posix.dirname(containingFile), name);
        for (const candidate of [base, `${base}.ts`, `${base}.tsx`, `${base}/index.ts`]) {
          if (userPaths.has(candidate)) return { resolvedModule: { resolvedFileName: candidate, extension: ts.Extension.Ts, isExternalLibraryImport: false } };
        }
      }
      // The SDK's own imports resolve as they do in the repository.
      return ts.resolveModuleName(name, containingFile, { ...options, baseUrl: repoRoot, paths: { "@/*": ["./*"] } }, host);
    });

  const program = ts.createProgram({ rootNames: [...userPaths.keys(), GLOBALS_FILE], options, host });
  const diagnostics = [...program.getSyntacticDiagnostics(), ...program.getSemanticDiagnostics()];
  const out: SandboxDiagnostic[] = [];
  for (const diagnostic of diagnostics) {
    const file = diagnostic.file ? userPaths.get(diagnostic.file.fileName) : undefined;
    if (!file || diagnostic.start === undefined) continue; // only the user's files are theirs to fix
    const { line, character } = diagnostic.file!.getLineAndCharacterOfPosition(diagnostic.start);
    out.push({
      severity: diagnostic.category === ts.DiagnosticCategory.Error ? "error" : "warning",
      message: ts.flattenDiagnosticMessageText(diagnostic.messageText, "\n"),
      file,
      line: line + 1,
      column: character + 1,
      source: "type",
    });
  }
  return out;
}
