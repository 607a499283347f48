"use client";

import { useQuery, useQueryClient } from "@tanstack/react-query";
import type { inferRouterOutputs } from "@trpc/server";
import Link from "next/link";
import { CheckpointsTable, type RunCheckpoints } from "./checkpoints-table";
import { Card } from "@/components/ui/card";
import { DataTable } from "@/components/ui/data-table";
import { useTRPC } from "@/components/trpc/provider";
import type { AppRouter } from "@/server/api";
import { ImportForm } from "./import-form";

export type BaseCatalog = inferRouterOutputs<AppRouter>["checkpoints"]["bases"];

const compact = new Intl.NumberFormat("en-US", { notation: "compact", maximumSignificantDigits: 3 });
const whole = new Intl.NumberFormat("en-US");

/**
 * Every named base with its shape and origin, the checkpoints of the caller's runs, and (for the server's admin) a
 * form that imports a base.
 */
export function ModelsView({ initial, initialCheckpoints }: { initial: BaseCatalog; initialCheckpoints: RunCheckpoints }) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const bases = useQuery({ ...trpc.checkpoints.bases.queryOptions(), initialData: initial });
  const groups = [
    {
      label: "Imported models",
      items: bases.data.builtin.filter((b) => b.imported),
      empty: "None yet: import one below, or with `tinkerlab bases push <folder>`.",
    },
    { label: "Built-in bases", items: bases.data.builtin.filter((b) => !b.imported), empty: "None: run `npx tsx bin/make-base-models.ts`." },
  ];
  return (
    <div className="space-y-6">
      {groups.map((group) => (
        <Card key={group.label} title={group.label}>
          {group.items.length === 0 ? (
            <p className="px-4 py-3 text-sm text-slate-500">{group.empty}</p>
          ) : (
            <DataTable
              label={group.label}
              columns={[
                "name",
                "architecture",
                { name: "parameters", align: "right" },
                { name: "layers × width", align: "right", nowrap: true },
                { name: "vocabulary", align: "right" },
                { name: "context", align: "right" },
                "origin",
              ]}
            >
              {group.items.map((b) => (
                <tr key={b.name}>
                  <td className="whitespace-nowrap px-4 py-2 font-mono text-slate-900">{b.name}</td>
                  <td className="px-4 py-2 text-slate-600">{b.shape?.architecture ?? "?"}</td>
                  <td className="px-4 py-2 text-right tabular-nums">{b.shape ? compact.format(b.shape.parameters) : "?"}</td>
                  <td className="px-4 py-2 text-right tabular-nums">{b.shape ? `${b.shape.nLayers} × ${b.shape.dModel}` : "?"}</td>
                  <td className="px-4 py-2 text-right tabular-nums">{b.shape ? whole.format(b.shape.vocabSize) : "?"}</td>
                  <td className="px-4 py-2 text-right tabular-nums">{b.shape ? whole.format(b.shape.contextLength) : "?"}</td>
                  <td className="max-w-md px-4 py-2 text-xs text-slate-500">{b.origin}</td>
                  <td className="px-4 py-2 text-right">
                    <Link className="text-sm font-medium text-brand-700 hover:underline" href={`/playground?model=${encodeURIComponent(b.name)}`}>
                      Try
                    </Link>
                  </td>
                </tr>
              ))}
            </DataTable>
          )}
        </Card>
      ))}
      <CheckpointsTable initial={initialCheckpoints} />
      <Card title="Import a Hugging Face model">
        {bases.data.mayImport ? (
          <ImportForm onImported={() => queryClient.invalidateQueries({ queryKey: trpc.checkpoints.bases.queryKey() })} />
        ) : (
          <p className="px-4 py-3 text-sm text-slate-500">
            Importing adds a base for everyone on this server, so only its admin may (local mode&apos;s user, or a team server&apos;s first account).
          </p>
        )}
      </Card>
    </div>
  );
}
