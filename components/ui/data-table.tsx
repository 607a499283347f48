import type { ReactNode } from "react";
import { Button } from "./button";
import { StatusBadge } from "./status-badge";
import { RelativeTime } from "./time";

/** A header cell: its name, or its name with a right alignment (numbers) or no wrapping (names of two words). */
export type Column = string | { name: string; align?: "right"; nowrap?: boolean };

function headerClass(column: Column): string {
  if (typeof column === "string") return "px-4 py-2 font-medium";
  return `${column.nowrap ? "whitespace-nowrap " : ""}px-4 py-2 ${column.align === "right" ? "text-right " : ""}font-medium`;
}

/** A card's table, named by `label`: a header row of `columns` and a last, unnamed one for each row's actions; `children` are the rows. */
export function DataTable({ label, columns, children }: { label: string; columns: Column[]; children: ReactNode }) {
  return (
    <div className="overflow-x-auto">
      <table className="w-full text-sm" aria-label={label}>
        <thead className="border-b border-slate-200 text-left text-xs uppercase tracking-wide text-slate-500">
          <tr>
            {columns.map((column) => {
              const name = typeof column === "string" ? column : column.name;
              return (
                <th key={name} className={headerClass(column)}>
                  {name}
                </th>
              );
            })}
            <th className="px-4 py-2">
              <span className="sr-only">Actions</span>
            </th>
          </tr>
        </thead>
        <tbody className="divide-y divide-slate-100">{children}</tbody>
      </table>
    </div>
  );
}

/** A row's cell of a time, or "never" where there is none (no expiry, never used). */
export function TimeCell({ date }: { date: Date | null }) {
  return <td className="whitespace-nowrap px-4 py-2 text-slate-500">{date ? <RelativeTime date={date} /> : "never"}</td>;
}

/** A row's cell of its status badge. */
export function StatusCell({ status }: { status: string }) {
  return (
    <td className="px-4 py-2">
      <StatusBadge status={status} />
    </td>
  );
}

/** A row's last cell, under the Actions header: when `show`, a "Revoke" button that asks `message` in a confirm dialog, then calls `onRevoke`; disabled while a revoke is pending. */
export function RevokeCell({ show, message, pending, onRevoke }: { show: boolean; message: string; pending: boolean; onRevoke: () => void }) {
  return (
    <td className="px-4 py-2 text-right">
      {show && (
        <Button
          variant="ghost"
          disabled={pending}
          onClick={() => {
            if (window.confirm(message)) onRevoke();
          }}
        >
          Revoke
        </Button>
      )}
    </td>
  );
}
