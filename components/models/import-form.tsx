"use client";

import { useRef, useState } from "react";
import { ActionKeys } from "@/components/trpc/keyed-mutation";
import { Button } from "@/components/ui/button";
import { baseNameFromFolder, modelFileRule } from "@/lib/model/hf/folder";

const input = "mt-1 block w-full rounded-md border border-slate-300 bg-white px-3 py-1.5 text-sm focus:border-brand-500 focus:outline-none";

const compact = new Intl.NumberFormat("en-US", { notation: "compact", maximumSignificantDigits: 3 });
const mib = (bytes: number) => `${(bytes / 1024 ** 2).toFixed(1)} MiB`;
type Imported = { name: string; modelType: string; parameters: number; config: { contextLength: number } };

async function answer(response: Response, what: string): Promise<unknown> {
  const text = await response.text();
  let body: { error?: string } = {};
  try {
    body = JSON.parse(text);
  } catch {}
  if (!response.ok) throw new Error(body.error ?? `${what} answered ${response.status}`);
  return body;
}

/**
 * Picks a model folder in the browser and sends the files an import reads, one at a time (streamed by the browser
 * from disk), then asks the server to import them; what the server refuses is shown in its own words.
 */
export function ImportForm({ onImported }: { onImported: () => void }) {
  const picker = useRef<HTMLInputElement>(null);
  // An import sent again (its answer lost, a second click) with the same name and options is done once.
  const importKeys = useRef(new ActionKeys());
  const [files, setFiles] = useState<File[]>([]);
  const [folder, setFolder] = useState("");
  const [name, setName] = useState("");
  const [contextLength, setContextLength] = useState("");
  const [progress, setProgress] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [folderProblem, setFolderProblem] = useState<string | null>(null);
  const [done, setDone] = useState<string | null>(null);
  const busy = progress !== null;

  function choose(list: FileList | null) {
    setError(null);
    setDone(null);
    const all = Array.from(list ?? []);
    const top = all[0]?.webkitRelativePath.split("/")[0] ?? "";
    // Only the folder's own files: a subfolder (e.g. onnx/, original/) is not part of the import.
    const picked = all.filter((f) => f.webkitRelativePath.split("/").length === 2 && modelFileRule.test(f.name));
    setFolder(top);
    setFiles(picked);
    setName(baseNameFromFolder(top));
    setFolderProblem(
      all.length > 0 && !picked.some((f) => f.name === "config.json") ? `${top || "the folder"} has no config.json: pick a Hugging Face model's folder` : null,
    );
  }

  async function submit() {
    setError(null);
    setDone(null);
    const total = files.reduce((sum, f) => sum + f.size, 0);
    let sent = 0;
    try {
      for (const [i, file] of files.entries()) {
        setProgress(`Sending ${file.name} (${i + 1} of ${files.length}; ${mib(sent)} of ${mib(total)})…`);
        await answer(await fetch(`/api/bases/${encodeURIComponent(name)}/files/${encodeURIComponent(file.name)}`, { method: "PUT", body: file }), file.name);
        sent += file.size;
      }
      setProgress("Converting the weights…");
      const options = contextLength.trim() === "" ? {} : { contextLength: Number(contextLength) };
      const record = (await answer(
        await fetch(`/api/bases/${encodeURIComponent(name)}/import`, {
          method: "POST",
          headers: { "content-type": "application/json", "idempotency-key": importKeys.current.keyFor({ name, options }) },
          body: JSON.stringify(options),
        }),
        "the import",
      )) as Imported;
      importKeys.current.done();
      setDone(
        `Imported ${record.modelType} as '${record.name}': ${compact.format(record.parameters)} parameters, context ${record.config.contextLength} tokens. Name it as an agent's base.`,
      );
      setFiles([]);
      if (picker.current) picker.current.value = "";
      onImported();
    } catch (failure) {
      setError((failure as Error).message);
    } finally {
      setProgress(null);
    }
  }

  return (
    <form
      aria-label="Import a Hugging Face model"
      className="space-y-3 px-4 py-3"
      onSubmit={(event) => {
        event.preventDefault();
        void submit();
      }}
    >
      <p className="text-sm text-slate-600">
        A folder with <code>config.json</code>, <code>model.safetensors</code> (or its shards and index), <code>tokenizer.json</code> and{" "}
        <code>tokenizer_config.json</code>. The weights are converted once to float32 and kept on the server; the model&apos;s own tokenizer and chat template
        come with it.
      </p>
      <div className="grid gap-3 sm:grid-cols-3">
        <label className="block text-sm font-medium text-slate-700">
          Folder
          <input
            ref={picker}
            type="file"
            className={input}
            disabled={busy}
            onChange={(event) => choose(event.target.files)}
            {...({ webkitdirectory: "", directory: "" } as Record<string, string>)}
          />
        </label>
        <label className="block text-sm font-medium text-slate-700">
          Name
          <input className={input} value={name} disabled={busy} onChange={(event) => setName(event.target.value)} placeholder="smollm2-135m-instruct" />
        </label>
        <label className="block text-sm font-medium text-slate-700">
          Context length
          <input
            className={input}
            value={contextLength}
            disabled={busy}
            inputMode="numeric"
            onChange={(event) => setContextLength(event.target.value)}
            placeholder="the model's, at most 2048"
          />
        </label>
      </div>
      {files.length > 0 && (
        <output className="block text-xs text-slate-500" aria-label="Files to send">
          {folder}: {files.map((f) => `${f.name} (${mib(f.size)})`).join(", ")}
        </output>
      )}
      <div className="flex items-center gap-3">
        <Button type="submit" disabled={busy || files.length === 0 || name === "" || folderProblem !== null}>
          Import
        </Button>
        {progress && (
          <span role="status" className="text-sm text-slate-600">
            {progress}
          </span>
        )}
      </div>
      {(folderProblem ?? error) && (
        <p role="alert" className="text-sm text-red-700">
          {folderProblem ?? error}
        </p>
      )}
      {done && (
        <p role="status" className="text-sm text-emerald-700">
          {done}
        </p>
      )}
    </form>
  );
}
