"use client";

import { useRef, useState } from "react";
import { Button } from "@/components/ui/button";
import { useKeyedMutation } from "@/components/trpc/keyed-mutation";
import { useTRPC } from "@/components/trpc/provider";
import { ProjectSelect } from "@/components/ui/project-select";
import { count, datasetNameFromFile, formatBytes, formatFromFile, MAX_UPLOAD_BYTES } from "./format";

const input = "mt-1 block w-full rounded-md border border-slate-300 bg-white px-3 py-1.5 text-sm focus:border-brand-500 focus:outline-none";

type Uploaded = { name: string; kind: "rows" | "conversations"; rowCount: number; trainRows: number; testRows: number };

/** Reads a JSONL or CSV file in the browser and uploads its text; the server validates it and names the bad line. */
export function UploadForm({ onUploaded }: { onUploaded: (dataset: Uploaded) => void }) {
  const trpc = useTRPC();
  const fileInput = useRef<HTMLInputElement>(null);
  const [file, setFile] = useState<{ fileName: string; text: string; size: number } | null>(null);
  const [reading, setReading] = useState(false);
  const [name, setName] = useState("");
  const [description, setDescription] = useState("");
  const [format, setFormat] = useState<"jsonl" | "csv">("jsonl");
  const [testShare, setTestShare] = useState("0.2");
  const [projectId, setProjectId] = useState("");
  const [localError, setLocalError] = useState<string | null>(null);
  const [done, setDone] = useState<string | null>(null);
  const upload = useKeyedMutation(
    trpc.datasets.upload.mutationOptions({
      onSuccess: (dataset) => {
        setDone(
          `Uploaded ${dataset.name}: ${count(dataset.rowCount)} ${dataset.kind === "conversations" ? "conversations" : `rows (${count(dataset.trainRows)} train, ${count(dataset.testRows)} test)`}.`,
        );
        setFile(null);
        setName("");
        setDescription("");
        if (fileInput.current) fileInput.current.value = "";
        onUploaded(dataset);
      },
    }),
  );
  const fieldErrors = (upload.error?.data as { zodError?: { fieldErrors?: Record<string, string[]> } } | undefined)?.zodError?.fieldErrors;
  const serverError = upload.error
    ? fieldErrors && Object.keys(fieldErrors).length > 0
      ? Object.entries(fieldErrors)
          .map(([field, messages]) => `${field}: ${messages.join(", ")}`)
          .join("; ")
      : upload.error.message
    : null;
  const error = localError ?? serverError;

  async function choose(chosen: File | undefined) {
    upload.reset();
    setDone(null);
    setLocalError(null);
    setFile(null);
    if (!chosen) return;
    if (chosen.size > MAX_UPLOAD_BYTES) {
      setLocalError(`${chosen.name} is ${formatBytes(chosen.size)}; a dataset holds at most ${MAX_UPLOAD_BYTES / 2 ** 20} MiB`);
      return;
    }
    setReading(true);
    try {
      setFile({ fileName: chosen.name, text: await chosen.text(), size: chosen.size });
      setName(datasetNameFromFile(chosen.name));
      setFormat(formatFromFile(chosen.name));
    } catch (readError) {
      setLocalError(`could not read ${chosen.name}: ${(readError as Error).message}`);
    } finally {
      setReading(false);
    }
  }

  return (
    <form
      aria-label="Upload a dataset"
      className="space-y-3 px-4 py-3"
      onSubmit={(event) => {
        event.preventDefault();
        setDone(null);
        if (!file) return setLocalError("choose a .jsonl or .csv file first");
        const share = Number(testShare);
        if (testShare.trim() === "" || !(share >= 0 && share <= 0.9)) return setLocalError("test share: a number from 0 to 0.9");
        setLocalError(null);
        upload.mutate({ name, description, format, text: file.text, testShare: share, projectId: projectId || undefined });
      }}
    >
      <ProjectSelect value={projectId} onChange={setProjectId} />
      <label className="block">
        <span className="text-sm font-medium text-slate-700">File</span>
        <input
          ref={fileInput}
          type="file"
          name="file"
          accept=".jsonl,.csv,.json,.txt"
          onChange={(event) => void choose(event.target.files?.[0])}
          className="mt-1 block w-full text-sm text-slate-600 file:mr-3 file:rounded-md file:border file:border-slate-300 file:bg-white file:px-3 file:py-1.5 file:text-sm file:font-medium file:text-slate-800 hover:file:bg-slate-50"
        />
        {file && (
          <span className="mt-1 block text-xs text-slate-500">
            {file.fileName} · {formatBytes(file.size)}
          </span>
        )}
      </label>
      <div className="grid grid-cols-[1fr_auto] gap-3">
        <label className="block">
          <span className="text-sm font-medium text-slate-700">Name</span>
          <input name="name" value={name} onChange={(event) => setName(event.target.value)} placeholder="e.g. math-facts" className={`${input} font-mono`} />
        </label>
        <label className="block">
          <span className="text-sm font-medium text-slate-700">Format</span>
          <select name="format" value={format} onChange={(event) => setFormat(event.target.value as "jsonl" | "csv")} className={`${input} px-2`}>
            <option value="jsonl">JSONL</option>
            <option value="csv">CSV</option>
          </select>
        </label>
      </div>
      <label className="block">
        <span className="text-sm font-medium text-slate-700">Description</span>
        <textarea
          name="description"
          value={description}
          onChange={(event) => setDescription(event.target.value)}
          rows={2}
          placeholder="Where the rows come from, what they are for"
          className={input}
        />
      </label>
      <label className="block">
        <span className="text-sm font-medium text-slate-700">Test share</span>
        <input
          name="testShare"
          type="number"
          min={0}
          max={0.9}
          step={0.05}
          value={testShare}
          onChange={(event) => setTestShare(event.target.value)}
          className={`${input} w-28 tabular-nums`}
        />
        <span className="mt-1 block text-xs text-slate-500">
          Share of the rows held out for evaluation. Rows with a &quot;split&quot; field (&quot;train&quot; or &quot;test&quot;) keep theirs; conversations are
          all for training.
        </span>
      </label>
      {error && (
        <p role="alert" className="whitespace-pre-wrap break-words rounded-md bg-red-50 px-3 py-2 font-mono text-xs text-red-700">
          {error}
        </p>
      )}
      {done && (
        <p role="status" className="rounded-md bg-emerald-50 px-3 py-2 text-sm text-emerald-700">
          {done}
        </p>
      )}
      <div className="flex items-center justify-between gap-2">
        <span className="text-xs text-slate-500">JSONL or CSV, at most 16 MiB.</span>
        <Button type="submit" disabled={upload.isPending || reading}>
          {upload.isPending ? "Uploading…" : reading ? "Reading…" : "Upload"}
        </Button>
      </div>
    </form>
  );
}
