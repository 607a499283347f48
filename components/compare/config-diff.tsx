/** Configs of several runs side by side, one row per setting, with the settings that differ marked. */

export type ConfigColumn = { id: string; name: string; color: string; config: unknown };

/** Flattens nested objects to dotted paths; arrays and other leaves are kept whole. */
function flattenConfig(value: unknown, prefix = "", out = new Map<string, unknown>()): Map<string, unknown> {
  if (value !== null && typeof value === "object" && !Array.isArray(value)) {
    const entries = Object.entries(value as Record<string, unknown>);
    if (entries.length === 0 && prefix) out.set(prefix, {});
    for (const [key, child] of entries) flattenConfig(child, prefix ? `${prefix}.${key}` : key, out);
  } else if (prefix) {
    out.set(prefix, value);
  }
  return out;
}

export type DiffRow = { path: string; values: (string | undefined)[]; differs: boolean };

/** One row per setting any of the configs has (dotted paths, sorted), with each config's value as JSON. */
export function diffConfigs(configs: unknown[]): DiffRow[] {
  const flat = configs.map((config) => flattenConfig(config));
  const paths = [...new Set(flat.flatMap((map) => [...map.keys()]))].sort();
  return paths.map((path) => {
    const values = flat.map((map) => (map.has(path) ? JSON.stringify(map.get(path)) : undefined));
    return { path, values, differs: values.some((v) => v !== values[0]) };
  });
}

/** `sourceDiffers`: the runs' source files differ, which the config alone does not show. */
export function ConfigDiff({
  columns,
  differencesOnly,
  sourceDiffers = false,
}: {
  columns: ConfigColumn[];
  differencesOnly: boolean;
  sourceDiffers?: boolean;
}) {
  const rows = diffConfigs(columns.map((c) => c.config));
  const shown = differencesOnly ? rows.filter((r) => r.differs) : rows;
  const differing = rows.filter((r) => r.differs).length;
  return (
    <div className="overflow-x-auto">
      <table className="w-full text-sm" aria-label="Config diff">
        <thead className="border-b border-slate-200 text-left text-xs text-slate-500">
          <tr>
            <th className="px-4 py-2 font-medium uppercase tracking-wide">Setting</th>
            {columns.map((c) => (
              <th key={c.id} className="px-4 py-2 font-medium">
                <span className="flex items-center gap-1.5">
                  <span className="size-2.5 shrink-0 rounded-full" style={{ backgroundColor: c.color }} aria-hidden />
                  <span className="truncate font-mono normal-case text-slate-700" title={c.name}>
                    {c.name}
                  </span>
                </span>
              </th>
            ))}
          </tr>
        </thead>
        <tbody className="divide-y divide-slate-100 font-mono text-xs">
          {shown.map((row) => (
            <tr key={row.path} data-differs={row.differs || undefined} className={row.differs ? "bg-amber-50/60" : ""}>
              <th scope="row" className="whitespace-nowrap px-4 py-1.5 text-left font-normal text-slate-600">
                {row.differs && <span className="mr-1.5 inline-block size-1.5 rounded-full bg-amber-500 align-middle" aria-hidden />}
                {row.path}
              </th>
              {row.values.map((value, i) => (
                <td
                  key={columns[i]!.id}
                  className={`max-w-72 truncate px-4 py-1.5 ${row.differs ? "font-medium text-slate-900" : "text-slate-500"}`}
                  title={value}
                >
                  {value ?? <span className="text-slate-400">—</span>}
                </td>
              ))}
            </tr>
          ))}
        </tbody>
      </table>
      {shown.length === 0 && (
        <p className="px-4 py-6 text-center text-sm text-slate-500">
          {columns.length < 2
            ? "Add another run to compare configs."
            : sourceDiffers
              ? "The configs are identical; the runs' source files differ (see Source below)."
              : "The configs are identical."}
        </p>
      )}
      <p className="border-t border-slate-100 px-4 py-2 text-xs text-slate-500">
        {differing} of {rows.length} settings differ.
      </p>
    </div>
  );
}
