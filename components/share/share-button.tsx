"use client";

import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import type { inferRouterOutputs } from "@trpc/server";
import { useEffect, useRef, useState } from "react";
import { currentView } from "@/components/run/view-params";
import { Button } from "@/components/ui/button";
import { accessStatus } from "@/components/ui/status-badge";
import { RelativeTime } from "@/components/ui/time";
import { useTRPC } from "@/components/trpc/provider";
import type { AppRouter } from "@/server/api";

type Kind = "run" | "compare" | "trajectory" | "report";
type ListedLink = inferRouterOutputs<AppRouter>["shareLinks"]["ofRun"][number];

const EXPIRIES = [
  { label: "never (until revoked)", days: null },
  { label: "1 day", days: 1 },
  { label: "7 days", days: 7 },
  { label: "30 days", days: 30 },
] as const;

/**
 * "Share": a view-only link to this run, comparison or trajectory, opening the view as it is now (the page's URL
 * parameters, plus `view`), or to a report (`reportId`: its notes and live panels). Its holder needs no account and
 * sees only what the link names. The panel lists the links already made for these runs (or this report), each
 * revocable; a new link's address is shown once (only its hash is kept).
 */
export function ShareButton({
  kind,
  runIds,
  reportId,
  canCreate,
  view = {},
  label = "Share",
  compact = false,
}: {
  kind: Kind;
  runIds: string[];
  /** With kind "report": the report shared (`runIds` is then unused: the link reads the runs its panels show). */
  reportId?: string;
  /** Editors and owners make and revoke links; viewers see the list. */
  canCreate: boolean;
  view?: Record<string, string>;
  label?: string;
  compact?: boolean;
}) {
  const [open, setOpen] = useState(false);
  const panel = useRef<HTMLDivElement>(null);
  useEffect(() => {
    if (!open) return;
    const onKey = (event: KeyboardEvent) => event.key === "Escape" && setOpen(false);
    const onClick = (event: MouseEvent) => panel.current && !panel.current.contains(event.target as Node) && setOpen(false);
    window.addEventListener("keydown", onKey);
    window.addEventListener("mousedown", onClick);
    return () => {
      window.removeEventListener("keydown", onKey);
      window.removeEventListener("mousedown", onClick);
    };
  }, [open]);
  return (
    <div className="relative" ref={panel}>
      {compact ? (
        <button type="button" onClick={() => setOpen(!open)} className="rounded border border-slate-300 px-2 py-0.5 text-slate-700 hover:bg-slate-50">
          {label}
        </button>
      ) : (
        <Button variant="secondary" onClick={() => setOpen(!open)} aria-expanded={open}>
          {label}
        </Button>
      )}
      {open && <SharePanel kind={kind} runIds={runIds} reportId={reportId} canCreate={canCreate} view={view} />}
    </div>
  );
}

function SharePanel({
  kind,
  runIds,
  reportId,
  canCreate,
  view,
}: {
  kind: Kind;
  runIds: string[];
  reportId?: string;
  canCreate: boolean;
  view: Record<string, string>;
}) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const [days, setDays] = useState<number | null>(null);
  const [made, setMade] = useState<string | null>(null);
  const [copied, setCopied] = useState(false);
  // The links listed are those of the report, or of the first run (a comparison's links show on each of its runs' pages).
  const listKey = reportId ? trpc.reports.links.queryKey({ id: reportId }) : trpc.shareLinks.ofRun.queryKey({ runId: runIds[0]! });
  const runLinks = useQuery({ ...trpc.shareLinks.ofRun.queryOptions({ runId: runIds[0] ?? "" }), enabled: !reportId });
  const reportLinks = useQuery({ ...trpc.reports.links.queryOptions({ id: reportId ?? "" }), enabled: !!reportId });
  const links = reportId ? reportLinks : runLinks;
  const refresh = () => queryClient.invalidateQueries({ queryKey: listKey });
  const onSuccess = ({ path, link }: { path: string; link: ListedLink | null }) => {
    setMade(`${window.location.origin}${path}`);
    setCopied(false);
    // The new link heads the list at once; the list is then read again for the rest.
    if (link) queryClient.setQueryData<ListedLink[]>(listKey, (listed) => [link, ...(listed ?? []).filter((other) => other.id !== link.id)]);
    void refresh();
  };
  const createForRuns = useMutation(trpc.shareLinks.create.mutationOptions({ onSuccess }));
  const createForReport = useMutation(trpc.reports.share.mutationOptions({ onSuccess }));
  const create = reportId ? createForReport : createForRuns;
  const makeLink = () =>
    reportId
      ? createForReport.mutate({ id: reportId, expiresInDays: days })
      : createForRuns.mutate({ kind, runIds, view: { ...currentView(), ...view }, expiresInDays: days });
  const revoke = useMutation(trpc.shareLinks.revoke.mutationOptions({ onSuccess: () => void refresh() }));
  const copy = async () => {
    if (!made) return;
    await navigator.clipboard?.writeText(made).catch(() => undefined);
    setCopied(true);
  };
  const listed = (links.data ?? []).filter((link) => kind !== "run" || link.kind === "run" || link.runIds.length === 1);
  return (
    <div
      role="dialog"
      aria-label="Share"
      className="absolute right-0 z-20 mt-2 w-[28rem] space-y-3 rounded-lg border border-slate-200 bg-white p-4 text-sm shadow-lg"
    >
      <p className="text-slate-600">
        {kind === "report"
          ? "A view-only link to this report: whoever has it reads its notes and live panels without an account, and nothing else."
          : `A view-only link to this ${kind === "compare" ? "comparison" : kind}, opening the view as it is now. Whoever has it sees these runs without an account, live, and nothing else.`}
      </p>
      {canCreate ? (
        <div className="flex items-center gap-2">
          <label className="flex items-center gap-1.5 text-xs text-slate-600">
            Expires
            <select
              aria-label="Expires"
              value={days ?? ""}
              onChange={(e) => setDays(e.target.value === "" ? null : Number(e.target.value))}
              className="rounded border border-slate-300 bg-white px-1 py-0.5"
            >
              {EXPIRIES.map((e) => (
                <option key={e.label} value={e.days ?? ""}>
                  {e.label}
                </option>
              ))}
            </select>
          </label>
          <Button className="ml-auto" disabled={create.isPending} onClick={makeLink}>
            {create.isPending ? "Making…" : "Make link"}
          </Button>
        </div>
      ) : (
        <p className="text-xs text-slate-500">Editors and owners of this project make share links.</p>
      )}
      {create.error && <p className="text-red-600">{create.error.message}</p>}
      {made && (
        <div className="space-y-1 rounded-md border border-brand-200 bg-brand-50 p-2">
          <div className="flex items-center gap-2">
            <input
              readOnly
              aria-label="Share link"
              value={made}
              className="min-w-0 flex-1 rounded border border-slate-300 bg-white px-2 py-1 font-mono text-xs"
            />
            <Button variant="secondary" onClick={() => void copy()}>
              {copied ? "Copied" : "Copy"}
            </Button>
          </div>
          <p className="text-xs text-slate-600">Shown once: the server keeps only a hash of it. Revoke it below when it is no longer needed.</p>
        </div>
      )}
      <div>
        <h3 className="mb-1 text-xs font-semibold text-slate-700">Links to this {kind === "report" ? "report" : "run"}</h3>
        {listed.length === 0 ? (
          <p className="text-xs text-slate-500">{links.isLoading ? "Loading…" : "None yet."}</p>
        ) : (
          <ul aria-label="Share links" className="max-h-48 divide-y divide-slate-100 overflow-auto text-xs">
            {listed.map((link) => {
              const status = accessStatus(link);
              return (
                <li key={link.id} data-status={status} className="flex items-center gap-2 py-1.5">
                  <span className="min-w-0 flex-1 truncate" title={link.title}>
                    {link.kind} · {link.createdBy} · <RelativeTime date={link.createdAt} />
                    {link.lastOpenedAt && (
                      <>
                        {" "}
                        · opened <RelativeTime date={link.lastOpenedAt} />
                      </>
                    )}
                  </span>
                  <span className={status === "active" ? "text-emerald-700" : "text-slate-400"}>
                    {status === "active" && link.expiresAt ? (
                      <>
                        expires <RelativeTime date={link.expiresAt} />
                      </>
                    ) : (
                      status
                    )}
                  </span>
                  {canCreate && status === "active" && (
                    <button
                      type="button"
                      className="text-red-700 hover:underline disabled:text-slate-400"
                      disabled={revoke.isPending}
                      onClick={() => revoke.mutate({ id: link.id })}
                    >
                      Revoke
                    </button>
                  )}
                </li>
              );
            })}
          </ul>
        )}
        {revoke.error && <p className="text-red-600">{revoke.error.message}</p>}
      </div>
    </div>
  );
}
