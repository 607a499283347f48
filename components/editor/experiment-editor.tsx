"use client";

import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useRouter } from "next/navigation";
import { useMemo, useRef, useState } from "react";
import { flushSync } from "react-dom";
import { type ExperimentConfigInput, experimentSchema } from "@/lib/sdk/experiment";
import { configIssues, launchRefusal, sourceErrors } from "@/server/validation/browser";
import { useKeyedMutation } from "@/components/trpc/keyed-mutation";
import { useTRPC } from "@/components/trpc/provider";
import { Button, ButtonLink } from "@/components/ui/button";
import { Card, PageHeader } from "@/components/ui/card";
import { EmptyState } from "@/components/ui/empty-state";
import { RelativeTime } from "@/components/ui/time";
import { CodeEditor, type EditorDiagnostic } from "./code-editor";
import { configFields, fieldPaths, withValueAt } from "./config-fields";
import { ConfigForm } from "./config-form";
import { STARTER_ENTRY, starterConfig, starterEnvironment } from "./starter";
import { useLiveValidation } from "./use-live-validation";
import { useUnsavedChangesGuard } from "./use-unsaved-changes-guard";
import { ValidationPanel } from "./validation-panel";
import { VersionViewer, type SavedVersion } from "./version-viewer";

type Files = Record<string, string>;
type Config = Record<string, unknown>;
export type EditableExperiment = {
  id: string;
  name: string;
  latestVersion: number;
  files: Files;
  config: Config;
  /** The caller views the project only: it reads the source, but neither validates, saves nor launches. */
  readOnly?: boolean;
  /**
   * The built-in environment's own source when the saved config runs one (server/experiments/example-source.ts):
   * "Open the example's source" copies its files in, to edit and run as a custom environment.
   */
  example?: { environment: string; module: string; files: Files } | null;
};

type Tab = { kind: "file"; path: string } | { kind: "form" } | { kind: "json" };

const FILE_PATH = /^[A-Za-z0-9_.-]+(\/[A-Za-z0-9_.-]+)*\.ts$/;
const fields = configFields(experimentSchema);
const formPaths = fieldPaths(fields);

/** The experiment editor: source files, the config as a form or JSON, live validation, save and launch. */
export function ExperimentEditor({ experiment }: { experiment: EditableExperiment }) {
  const trpc = useTRPC();
  const router = useRouter();
  const queryClient = useQueryClient();
  const [files, setFiles] = useState<Files>(experiment.files);
  const [config, setConfig] = useState<Config>(experiment.config);
  const [saved, setSaved] = useState({ key: JSON.stringify([experiment.files, experiment.config]), version: experiment.latestVersion });
  const [tab, setTab] = useState<Tab>(() => {
    const first = Object.keys(experiment.files)[0];
    return first ? { kind: "file", path: first } : { kind: "form" };
  });
  const [jsonDraft, setJsonDraft] = useState<string | null>(null);
  const [jsonError, setJsonError] = useState<string | null>(null);
  const [message, setMessage] = useState("");
  const [reveal, setReveal] = useState<{ line: number | null; column: number | null } | null>(null);
  const [newFile, setNewFile] = useState<string | null>(null);
  const newFileInput = useRef<HTMLInputElement>(null);
  /** A saved version shown read-only in place of the editor (which keeps its state meanwhile). */
  const [viewing, setViewing] = useState<number | null>(null);

  const dirty = JSON.stringify([files, config]) !== saved.key;
  useUnsavedChangesGuard(dirty && !experiment.readOnly, `You have unsaved changes to ${experiment.name}: leave and lose them?`);
  const agent = (config.agent ?? {}) as { base?: unknown; sampling?: { maxTokens?: unknown } };
  const validation = useLiveValidation(experiment.readOnly ? null : experiment.id, files, {
    base: agent.base,
    maxTokens: agent.sampling?.maxTokens ?? 32,
    protocol: config.protocol,
  });
  const report = validation.report;
  const templates = useQuery(trpc.experiments.templates.queryOptions());
  // What may be launched is decided with runs.launch's own check (server/validation/browser.ts), which refuses the same.
  const launchContext = useMemo(
    () => ({ files, report: report ?? null, builtInEnvironments: templates.data?.map((t) => t.key) }),
    [files, report, templates.data],
  );
  const issues = useMemo(() => configIssues(config, launchContext), [config, launchContext]);
  const otherIssues = [...issues].filter(([path]) => !formPaths.has(path));
  const versions = useQuery(trpc.experiments.versions.queryOptions({ id: experiment.id }));

  const activePath = tab.kind === "file" ? tab.path : null;
  const fileDiagnostics = useMemo<EditorDiagnostic[]>(
    () => (report && activePath ? report.diagnostics.filter((d) => d.file === activePath) : []),
    [report, activePath],
  );

  const save = useMutation(
    trpc.experiments.save.mutationOptions({
      onSuccess: ({ version }, input) => {
        setSaved({ key: JSON.stringify([input.files, input.config]), version });
        setMessage("");
        void queryClient.invalidateQueries({ queryKey: trpc.experiments.versions.queryKey({ id: experiment.id }) });
      },
    }),
  );
  const launch = useKeyedMutation(trpc.runs.launch.mutationOptions({ onSuccess: ({ runId }) => router.push(`/runs/${runId}`) }));
  const busy = save.isPending || launch.isPending;

  // The config as edited, a draft of any shape: the server parses it and refuses a wrong field by name.
  const saveVersion = (why: string) => save.mutateAsync({ id: experiment.id, files, config: config as ExperimentConfigInput, message: message.trim() || why });
  const onLaunch = async () => {
    // A launch runs the latest saved version, so unsaved edits are saved first.
    if (dirty) {
      try {
        await saveVersion("saved for launch");
      } catch {
        return; // the save's error is shown
      }
    }
    launch.mutate({ experimentId: experiment.id });
  };

  const setFile = (path: string, text: string) => setFiles((previous) => ({ ...previous, [path]: text }));
  const startCustom = () => {
    setFiles({ [STARTER_ENTRY]: starterEnvironment });
    // The starter's base and reply length: a use case's base is made for its own prompts, often too short for others.
    const agent = (starterConfig("") as { agent: Record<string, unknown> }).agent;
    setConfig((c) => ({
      ...c,
      environment: "custom",
      protocol: { name: "single-turn" },
      agent: { ...((c.agent as Record<string, unknown>) ?? {}), base: agent.base, sampling: agent.sampling },
    }));
    setTab({ kind: "file", path: STARTER_ENTRY });
  };
  /** The example's own environment as this experiment's files: the same game, now the user's to change. */
  const openExample = (example: NonNullable<EditableExperiment["example"]>) => {
    setFiles(example.files);
    setConfig((c) => ({ ...c, environment: "custom" }));
    setTab({ kind: "file", path: STARTER_ENTRY });
  };
  const addFile = (name: string) => {
    const path = name.endsWith(".ts") ? name : `${name}.ts`;
    if (!FILE_PATH.test(path) || path in files) return;
    setFiles((previous) => ({ ...previous, [path]: "export {};\n" }));
    setTab({ kind: "file", path });
    setNewFile(null);
  };
  const openNewFile = () => {
    // The name field replaces the focused "+" button: the focus goes to the field rather than back to the page.
    flushSync(() => setNewFile(""));
    newFileInput.current?.focus();
  };
  const removeFile = (path: string) => {
    if (!window.confirm(`Remove ${path}? It stays in earlier versions.`)) return;
    const { [path]: _removed, ...rest } = files;
    setFiles(rest);
    const next = Object.keys(rest)[0];
    setTab(next ? { kind: "file", path: next } : { kind: "form" });
  };
  const restore = (version: SavedVersion) => {
    setFiles(version.files);
    setConfig(version.config);
    setMessage(`restored from v${version.version}`);
    const first = Object.keys(version.files)[0];
    showTab(first ? { kind: "file", path: first } : { kind: "form" });
    setViewing(null);
  };
  const showTab = (next: Tab) => {
    setJsonDraft(null);
    setJsonError(null);
    setTab(next);
  };

  const jsonText = jsonDraft ?? JSON.stringify(config, null, 2);
  const onJson = (text: string) => {
    setJsonDraft(text);
    try {
      const parsed: unknown = JSON.parse(text);
      if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) throw new Error("the config is a JSON object");
      setConfig(parsed as Config);
      setJsonError(null);
    } catch (error) {
      setJsonError((error as Error).message);
    }
  };

  const fileNames = Object.keys(files);
  const environment = typeof config.environment === "string" ? config.environment : "";
  // Launch waits for a config and a source without errors: a run that cannot start is not queued.
  const refusal = launchRefusal(config, launchContext);
  const launchBlocked = jsonError
    ? "the config's JSON does not parse"
    : refusal
      ? `${refusal.reason}${sourceErrors(config, launchContext.report).length > 0 ? " (see Validation)" : ""}`
      : null;
  const tabClass = (active: boolean) =>
    `-mb-px flex items-center gap-1.5 border-b-2 px-3 py-2 text-sm ${active ? "border-brand-600 font-medium text-brand-700" : "border-transparent text-slate-600 hover:text-slate-900"}`;

  return (
    <>
      <PageHeader
        title={`Edit ${experiment.name}`}
        subtitle={
          <span data-testid="editor-state">
            version {saved.version}
            {dirty ? " · unsaved changes" : " · saved"}
          </span>
        }
        actions={
          <>
            <ButtonLink variant="ghost" href={`/experiments/${experiment.id}`}>
              Back
            </ButtonLink>
            {experiment.readOnly && <span className="text-sm text-slate-500">Read only: you view this project.</span>}
            <Button
              variant="secondary"
              onClick={validation.validateNow}
              disabled={experiment.readOnly || fileNames.length === 0 || validation.state === "running"}
            >
              Validate
            </Button>
            <input
              aria-label="Version message"
              value={message}
              onChange={(event) => setMessage(event.target.value)}
              placeholder="What changed?"
              className="w-44 rounded-md border border-slate-300 bg-white px-2.5 py-1.5 text-sm focus:border-brand-500 focus:outline-none"
            />
            <Button variant="secondary" onClick={() => void saveVersion("saved from the editor")} disabled={experiment.readOnly || !dirty || busy}>
              {save.isPending ? "Saving…" : "Save"}
            </Button>
            <Button
              onClick={() => void onLaunch()}
              disabled={experiment.readOnly || busy || launchBlocked !== null}
              title={launchBlocked ? `Fix first: ${launchBlocked}` : undefined}
            >
              {launch.isPending ? "Launching…" : dirty ? "Save & launch" : "Launch run"}
            </Button>
          </>
        }
      />
      {(save.error || launch.error) && (
        <p role="alert" className="-mt-3 mb-4 whitespace-pre-line text-right text-sm text-red-600">
          {(save.error ?? launch.error)!.message}
        </p>
      )}
      <div className="grid gap-6 lg:grid-cols-[minmax(0,1fr)_20rem]">
        {viewing !== null && <VersionViewer experimentId={experiment.id} version={viewing} onRestore={restore} onClose={() => setViewing(null)} />}
        <Card className={`flex min-w-0 flex-col overflow-hidden ${viewing !== null ? "hidden" : ""}`}>
          <div role="tablist" aria-label="Experiment parts" className="flex flex-wrap items-center border-b border-slate-200 px-2">
            {fileNames.map((path) => (
              <span key={path} className="flex items-center">
                <button
                  type="button"
                  role="tab"
                  aria-selected={activePath === path}
                  className={`${tabClass(activePath === path)} font-mono`}
                  onClick={() => showTab({ kind: "file", path })}
                >
                  {path}
                  {report?.diagnostics.some((d) => d.file === path && d.severity === "error") && (
                    <span role="img" className="size-1.5 rounded-full bg-red-500" aria-label="has errors" />
                  )}
                </button>
                {fileNames.length > 1 && (
                  <button type="button" aria-label={`Remove ${path}`} className="px-1 text-slate-400 hover:text-red-600" onClick={() => removeFile(path)}>
                    ×
                  </button>
                )}
              </span>
            ))}
            {fileNames.length > 0 &&
              (newFile === null ? (
                <button type="button" className="px-2 py-2 text-sm text-slate-500 hover:text-slate-900" onClick={openNewFile} aria-label="Add a file">
                  +
                </button>
              ) : (
                <form
                  className="px-1"
                  onSubmit={(event) => {
                    event.preventDefault();
                    addFile(newFile);
                  }}
                >
                  <input
                    ref={newFileInput}
                    aria-label="New file name"
                    value={newFile}
                    placeholder="rewards.ts"
                    onChange={(event) => setNewFile(event.target.value)}
                    onBlur={() => newFile === "" && setNewFile(null)}
                    className="w-32 rounded border border-slate-300 px-2 py-0.5 font-mono text-xs focus:border-brand-500 focus:outline-none"
                  />
                </form>
              ))}
            {fileNames.length > 0 && <span className="mx-2 h-5 w-px bg-slate-200" aria-hidden />}
            <button
              type="button"
              role="tab"
              aria-selected={tab.kind === "form"}
              className={tabClass(tab.kind === "form")}
              onClick={() => showTab({ kind: "form" })}
            >
              Config
              {issues.size > 0 && <span className="rounded-full bg-red-100 px-1.5 text-[11px] font-medium text-red-700">{issues.size}</span>}
            </button>
            <button
              type="button"
              role="tab"
              aria-selected={tab.kind === "json"}
              className={tabClass(tab.kind === "json")}
              onClick={() => showTab({ kind: "json" })}
            >
              JSON
            </button>
          </div>

          <div className={`h-[36rem] ${activePath ? "" : "hidden"}`}>
            {fileNames.length > 0 && (
              <CodeEditor
                path={activePath ?? fileNames[0]!}
                value={files[activePath ?? fileNames[0]!] ?? ""}
                onChange={(text) => setFile(activePath ?? fileNames[0]!, text)}
                language="typescript"
                diagnostics={fileDiagnostics}
                reveal={reveal}
                label="Source"
              />
            )}
          </div>
          {tab.kind === "form" && (
            <form className="p-4" aria-label="Config form" onSubmit={(event) => event.preventDefault()}>
              {fileNames.length === 0 && (
                <div className="mb-4 flex flex-wrap items-center justify-between gap-3 rounded-md bg-slate-50 px-3 py-2.5 text-sm text-slate-600">
                  <span>
                    This experiment runs the built-in environment <code className="font-mono text-slate-800">{environment || "—"}</code>.
                  </span>
                  <span className="flex flex-wrap gap-2">
                    {experiment.example?.environment === environment && (
                      <Button
                        variant="secondary"
                        onClick={() => openExample(experiment.example!)}
                        title={`An editable copy of ${experiment.example.module}, run as this experiment's own environment`}
                      >
                        Open the example's source
                      </Button>
                    )}
                    <Button variant="secondary" onClick={startCustom}>
                      Write a custom environment
                    </Button>
                  </span>
                </div>
              )}
              {otherIssues.length > 0 && (
                <ul role="alert" className="mb-4 space-y-0.5 rounded-md bg-red-50 px-3 py-2 text-xs text-red-700">
                  {otherIssues.map(([path, messages]) => (
                    <li key={path}>
                      <span className="font-mono">{path || "config"}</span>: {messages.join("; ")}
                    </li>
                  ))}
                </ul>
              )}
              <ConfigForm fields={fields} config={config} issues={issues} onChange={(path, value) => setConfig((c) => withValueAt(c, path, value))} />
            </form>
          )}
          {tab.kind === "json" && (
            <div className="flex h-[36rem] flex-col">
              <div className="min-h-0 flex-1">
                <CodeEditor path="config.json" value={jsonText} onChange={onJson} language="json" label="Config JSON" />
              </div>
              <p className={`border-t border-slate-200 px-4 py-2 text-xs ${jsonError || issues.size ? "text-red-600" : "text-slate-500"}`}>
                {jsonError
                  ? `Not applied: ${jsonError}`
                  : issues.size
                    ? [...issues].map(([path, messages]) => `${path || "config"}: ${messages.join("; ")}`).join(" · ")
                    : "Valid config. Fields left out take their defaults."}
              </p>
            </div>
          )}
        </Card>

        <div className="space-y-6">
          <Card title="Validation">
            {fileNames.length === 0 ? (
              <p className="px-4 py-3 text-sm text-slate-500">
                {issues.size ? `The config has ${issues.size} problem${issues.size === 1 ? "" : "s"}.` : "The config is valid."} Built-in environments need no
                dry run.
              </p>
            ) : (
              <ValidationPanel
                validation={validation}
                onReveal={(d) => {
                  if (!d.file || !(d.file in files)) return;
                  showTab({ kind: "file", path: d.file });
                  setReveal({ line: d.line, column: d.column });
                }}
              />
            )}
          </Card>
          <Card title="Versions">
            {versions.data && versions.data.length > 0 ? (
              <ol className="max-h-80 divide-y divide-slate-100 overflow-auto" aria-label="Versions">
                {versions.data.map((v) => (
                  <li key={v.id} className="flex items-baseline justify-between gap-3 px-4 py-2 text-sm">
                    <span className="min-w-0">
                      <span className={`font-mono tabular-nums ${v.version === saved.version ? "font-semibold text-brand-700" : "text-slate-700"}`}>
                        v{v.version}
                      </span>
                      <span className="ml-2 truncate text-slate-600">{v.message || "—"}</span>
                    </span>
                    <span className="flex shrink-0 items-baseline gap-2 text-xs text-slate-500">
                      <RelativeTime date={v.createdAt} />
                      <button
                        type="button"
                        aria-label={`View version ${v.version}`}
                        aria-pressed={viewing === v.version}
                        onClick={() => setViewing(viewing === v.version ? null : v.version)}
                        className={`rounded px-1.5 py-0.5 ${viewing === v.version ? "bg-brand-50 text-brand-700" : "text-brand-700 hover:bg-slate-100"}`}
                      >
                        view
                      </button>
                    </span>
                  </li>
                ))}
              </ol>
            ) : (
              <EmptyState title={versions.isLoading ? "Loading…" : "No versions"} />
            )}
            <p className="border-t border-slate-100 px-4 py-2 text-xs text-slate-500">
              Each save is a new version; every run keeps a copy of the source and config it was launched with. View an old version to read it or restore it.
            </p>
          </Card>
        </div>
      </div>
    </>
  );
}
