"use client";

const roleStyles: Record<string, string> = {
  system: "bg-slate-100 text-slate-700",
  user: "bg-brand-50 text-brand-700",
  assistant: "bg-emerald-50 text-emerald-700",
};

function cell(value: unknown): string {
  if (value === undefined) return "";
  if (value === null) return "null";
  return typeof value === "string" ? value : JSON.stringify(value);
}

/** The first rows of a dataset: a table of fields, or conversations message by message. */
export function DatasetPreview({ kind, rows, fields }: { kind: "rows" | "conversations"; rows: unknown[]; fields: string[] }) {
  if (rows.length === 0) return <p className="px-4 py-6 text-sm text-slate-500">This dataset has no rows.</p>;
  if (kind === "conversations") {
    return (
      <ol className="divide-y divide-slate-100" aria-label="Preview">
        {rows.map((row, i) => (
          <li key={i} className="flex gap-3 px-4 py-3">
            <span className="w-6 shrink-0 pt-0.5 text-right text-xs tabular-nums text-slate-400">{i + 1}</span>
            <div className="min-w-0 flex-1 space-y-1.5">
              {((row as { messages?: { role: string; content: string }[] }).messages ?? []).map((message, m) => (
                <div key={m} className="flex items-start gap-2 text-sm">
                  <span className={`w-18 shrink-0 rounded px-1.5 py-0.5 text-center text-xs font-medium ${roleStyles[message.role] ?? roleStyles.system}`}>
                    {message.role}
                  </span>
                  <p className="min-w-0 whitespace-pre-wrap break-words text-slate-700">{message.content}</p>
                </div>
              ))}
            </div>
          </li>
        ))}
      </ol>
    );
  }
  // Every field the rows have, in the dataset's order, with the split last.
  const seen = new Set(fields);
  const columns = [...fields];
  for (const row of rows) for (const key of Object.keys(row as object)) if (!seen.has(key)) seen.add(key), columns.push(key);
  const ordered = [...columns.filter((c) => c !== "split"), ...columns.filter((c) => c === "split")];
  return (
    <div className="overflow-x-auto">
      <table className="w-full text-sm" aria-label="Preview">
        <thead className="border-b border-slate-200 text-left text-xs uppercase tracking-wide text-slate-500">
          <tr>
            <th className="w-10 px-4 py-2 text-right font-medium">#</th>
            {ordered.map((column) => (
              <th key={column} className="px-4 py-2 font-medium normal-case">
                {column}
              </th>
            ))}
          </tr>
        </thead>
        <tbody className="divide-y divide-slate-100">
          {rows.map((row, i) => (
            <tr key={i} className="align-top hover:bg-slate-50">
              <td className="px-4 py-1.5 text-right text-xs tabular-nums text-slate-400">{i + 1}</td>
              {ordered.map((column) => {
                const value = (row as Record<string, unknown>)[column];
                return (
                  <td key={column} className="max-w-md px-4 py-1.5 font-mono text-xs text-slate-700">
                    {column === "split" && (value === "train" || value === "test") ? (
                      <span
                        className={`rounded-full px-2 py-0.5 font-sans font-medium ring-1 ring-inset ${value === "test" ? "bg-amber-50 text-amber-800 ring-amber-300" : "bg-slate-100 text-slate-700 ring-slate-300"}`}
                      >
                        {value}
                      </span>
                    ) : (
                      <span className="line-clamp-3 whitespace-pre-wrap break-words">{cell(value)}</span>
                    )}
                  </td>
                );
              })}
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
