/**
 * Type errors in the user's files, with their line and column. esbuild strips types without checking them, so
 * the TypeScript checker runs over the user's files with the SDK's sources and only the globals the sandbox has
 * (ES2022 and console; no DOM, no Node).
 *
 * The checker is sealed: its compiler host holds in memory every file it can see, and has no file system behind
 * it. Besides the user's files those are the SDK's sources (the files `sandboxModules` names and what they import,
 * followed from the repository's own imports) and TypeScript's ES2022 library, read once when this module loads.
 * Nothing a user writes names a file to read: an import of an absolute path, of `../` out of the experiment or of
 * a package finds nothing, with the same "Cannot find module" whether or not such a file exists on the server.
 * Parsed library and SDK files are kept across calls, and only the user's files are checked (the SDK's are checked
 * where the repository is): a starter's check takes about 40 ms of CPU, the first of a process about 0.8 s.
 */
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";
import type { SandboxDiagnostic } from "./errors";
import { type SourceFiles, sandboxModules } from "./compile";

const repoRoot = fileURLToPath(new URL("../../", import.meta.url));

/** Where each kind of file sits in the checker's file system, which is in memory: nothing is read from these paths. */
const USER_ROOT = "/experiment/";
const SDK_ROOT = "/tinkerlab/";
const LIB_ROOT = "/typescript/";
const GLOBALS_FILE = "/sandbox/globals.d.ts";
const GLOBALS = `declare var console: { log(...args: unknown[]): void; info(...args: unknown[]): void; warn(...args: unknown[]): void; error(...args: unknown[]): void; debug(...args: unknown[]): void };\n`;
const LIB_FILE = "lib.es2022.d.ts";

const options: ts.CompilerOptions = {
  target: ts.ScriptTarget.ES2022,
  module: ts.ModuleKind.ESNext,
  moduleResolution: ts.ModuleResolutionKind.Bundler,
  lib: [LIB_FILE],
  // Library references resolve in LIB_ROOT only, never through a package (`@typescript/lib-*`).
  libReplacement: false,
  types: [],
  strict: true,
  noEmit: true,
  skipLibCheck: true,
  isolatedModules: true,
  allowImportingTsExtensions: true,
};

/**
 * Every file the checker may read besides the user's, by its path in the checker's file system, and how the SDK's
 * files resolve their own imports. Read once, from paths fixed by the repository's code.
 */
const sealed = loadSealedFiles();

/** Library and SDK files, parsed once per process. */
const parsedFiles = new Map<string, ts.SourceFile>();

function loadSealedFiles() {
  const texts = new Map<string, string>([[GLOBALS_FILE, GLOBALS]]);

  // TypeScript's library: lib.es2022.d.ts and the libraries it references, transitively.
  const libDir = path.dirname(ts.getDefaultLibFilePath(options));
  const libs = [LIB_FILE];
  for (const name of libs) {
    const text = fs.readFileSync(path.join(libDir, name), "utf8");
    texts.set(LIB_ROOT + name, text);
    // (the references head each file: `/// <reference lib="es2015.core" />`)
    for (const [, name] of text.matchAll(/^\/\/\/\s*<reference\s+lib="([\w.-]+)"\s*\/>/gm)) {
      const referenced = `lib.${name!.toLowerCase()}.d.ts`;
      if (!libs.includes(referenced)) libs.push(referenced);
    }
  }

  // The SDK: the files the sandbox's module names point at, and the repository files they import (types included).
  const sdkPath = (file: string) => SDK_ROOT + path.relative(repoRoot, file).split(path.sep).join("/");
  const sdkImports = new Map<string, Map<string, string>>();
  const pending = [...new Set(Object.values(sandboxModules))];
  for (const file of pending) {
    const text = fs.readFileSync(file, "utf8");
    const imports = new Map<string, string>();
    for (const { fileName: specifier } of ts.preProcessFile(text, true, true).importedFiles) {
      const target = resolveSdkImport(file, specifier);
      imports.set(specifier, sdkPath(target));
      if (!pending.includes(target)) pending.push(target);
    }
    texts.set(sdkPath(file), text);
    sdkImports.set(sdkPath(file), imports);
  }
  const moduleNames = new Map(Object.entries(sandboxModules).map(([name, file]) => [name, sdkPath(file)]));
  return { texts, sdkImports, moduleNames };
}

/** A file of the repository that an SDK file imports ('@/lib/…' or relative); anything else is the SDK's bug. */
function resolveSdkImport(importer: string, specifier: string): string {
  const base = specifier.startsWith("@/")
    ? path.join(repoRoot, specifier.slice(2))
    : specifier.startsWith(".")
      ? path.resolve(path.dirname(importer), specifier)
      : null;
  const found = base === null ? undefined : [`${base}.ts`, path.join(base, "index.ts"), base].find((candidate) => fs.existsSync(candidate));
  if (!found?.startsWith(repoRoot) || !found.endsWith(".ts")) {
    throw new Error(
      `the sandbox's SDK may import only the repository's own TypeScript files ('@/…' or relative); ${path.relative(repoRoot, importer)} imports '${specifier}'`,
    );
  }
  return found;
}

/** The names a message may give the checker's files, as the user knows them: the SDK's module names, their own files. */
const userFacingNames: [RegExp, string][] = [
  ...[...sealed.moduleNames].map(([name, file]): [RegExp, string] => [new RegExp(escapeRegExp(file.replace(/\.ts$/, "")), "g"), name]),
  [new RegExp(escapeRegExp(SDK_ROOT), "g"), "@/"],
  [new RegExp(escapeRegExp(USER_ROOT), "g"), "./"],
];

function userFacing(message: string): string {
  return userFacingNames.reduce((text, [pattern, name]) => text.replace(pattern, name), message);
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

const unresolved: ts.ResolvedModuleWithFailedLookupLocations = { resolvedModule: undefined };
const resolved = (fileName: string): ts.ResolvedModuleWithFailedLookupLocations => ({
  resolvedModule: { resolvedFileName: fileName, extension: ts.Extension.Ts, isExternalLibraryImport: false },
});

export function typeCheckEnvironment(files: SourceFiles): SandboxDiagnostic[] {
  const userPaths = new Map(Object.keys(files).map((name) => [USER_ROOT + name, name]));
  const readFile = (fileName: string) => {
    const user = userPaths.get(fileName);
    return user !== undefined ? files[user] : sealed.texts.get(fileName);
  };
  const fileExists = (fileName: string) => readFile(fileName) !== undefined;
  const host: ts.CompilerHost = {
    readFile,
    fileExists,
    directoryExists: (name) => {
      const prefix = name.endsWith("/") ? name : `${name}/`;
      return [...userPaths.keys(), ...sealed.texts.keys()].some((file) => file.startsWith(prefix));
    },
    getDirectories: () => [],
    realpath: (name) => name,
    getCurrentDirectory: () => "/",
    getCanonicalFileName: (name) => name,
    useCaseSensitiveFileNames: () => true,
    getNewLine: () => "\n",
    getDefaultLibFileName: () => LIB_ROOT + LIB_FILE,
    getDefaultLibLocation: () => LIB_ROOT.slice(0, -1),
    writeFile: () => {},
    getSourceFile: (fileName, languageVersion) => {
      const user = userPaths.has(fileName);
      if (!user) {
        const parsed = parsedFiles.get(fileName);
        if (parsed) return parsed;
      }
      const text = readFile(fileName);
      if (text === undefined) return undefined;
      const sourceFile = ts.createSourceFile(fileName, text, languageVersion);
      if (!user) parsedFiles.set(fileName, sourceFile);
      return sourceFile;
    },
    resolveModuleNameLiterals: (literals, containingFile) =>
      literals.map(({ text: name }) => {
        if (!userPaths.has(containingFile)) {
          const target = sealed.sdkImports.get(containingFile)?.get(name);
          return target ? resolved(target) : unresolved;
        }
        const sdk = sealed.moduleNames.get(name);
        if (sdk) return resolved(sdk);
        if (name.startsWith("./") || name.startsWith("../")) {
          const base = path.posix.join(path.posix.dirname(containingFile), name);
          const found = [base, `${base}.ts`, `${base}.tsx`, `${base}/index.ts`].find((candidate) => userPaths.has(candidate));
          if (found) return resolved(found);
        }
        return unresolved;
      }),
    resolveTypeReferenceDirectiveReferences: (references) => references.map(() => ({ resolvedTypeReferenceDirective: undefined })),
  };

  const program = ts.createProgram({ rootNames: [...userPaths.keys(), GLOBALS_FILE], options, host });
  // Only the user's files are checked: checking the SDK's too cost ten times as much as the user's own.
  const diagnostics = [...userPaths.keys()].flatMap((fileName) => {
    const sourceFile = program.getSourceFile(fileName);
    return sourceFile ? [...program.getSyntacticDiagnostics(sourceFile), ...program.getSemanticDiagnostics(sourceFile)] : [];
  });
  const out: SandboxDiagnostic[] = [];
  for (const diagnostic of diagnostics) {
    const file = diagnostic.file ? userPaths.get(diagnostic.file.fileName) : undefined;
    if (!file || diagnostic.start === undefined) continue; // only the user's files are theirs to fix
    const { line, character } = diagnostic.file!.getLineAndCharacterOfPosition(diagnostic.start);
    out.push({
      severity: diagnostic.category === ts.DiagnosticCategory.Error ? "error" : "warning",
      message: userFacing(ts.flattenDiagnosticMessageText(diagnostic.messageText, "\n")),
      file,
      line: line + 1,
      column: character + 1,
      source: "type",
    });
  }
  return out;
}
