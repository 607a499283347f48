const styles: Record<string, string> = {
  queued: "bg-slate-100 text-slate-700 ring-slate-300",
  placing: "bg-slate-100 text-slate-700 ring-slate-300",
  running: "bg-blue-50 text-blue-700 ring-blue-300",
  paused: "bg-amber-50 text-amber-800 ring-amber-300",
  completed: "bg-emerald-50 text-emerald-700 ring-emerald-300",
  failed: "bg-red-50 text-red-700 ring-red-300",
  cancelled: "bg-slate-100 text-slate-500 ring-slate-300",
  // Invitation links, share links and API keys.
  active: "bg-emerald-50 text-emerald-700 ring-emerald-300",
  expired: "bg-slate-100 text-slate-500 ring-slate-300",
  revoked: "bg-slate-100 text-slate-500 ring-slate-300",
};

/** Whether an invitation link, share link or API key still works. */
export function accessStatus(grant: { revokedAt: Date | null; expiresAt: Date | null }, now = Date.now()): "active" | "expired" | "revoked" {
  if (grant.revokedAt) return "revoked";
  if (grant.expiresAt && grant.expiresAt.getTime() <= now) return "expired";
  return "active";
}

export function StatusBadge({ status }: { status: string }) {
  return (
    <span
      data-status={status}
      className={`inline-flex items-center gap-1 rounded-full px-2 py-0.5 text-xs font-medium ring-1 ring-inset ${styles[status] ?? styles.queued}`}
    >
      {status === "running" && <span className="size-1.5 animate-pulse rounded-full bg-blue-500" />}
      {status}
    </span>
  );
}

/** A run's status, and a ⚠ whose tooltip lists its health warnings when it has any (lib/rl/health.ts). */
export function RunStatus({ status, warnings }: { status: string; warnings: readonly { message: string }[] }) {
  return (
    <>
      <StatusBadge status={status} />
      {warnings.length > 0 && (
        <span
          role="img"
          className="ml-1.5 text-amber-600"
          title={warnings.map((w) => w.message).join("\n")}
          aria-label={`${warnings.length} health warning${warnings.length === 1 ? "" : "s"}`}
        >
          ⚠
        </span>
      )}
    </>
  );
}
