"use client";

import { type ReactNode, useEffect, useId, useRef } from "react";
import { Button } from "@/components/ui/button";

/**
 * A modal dialog (the browser's own `<dialog>`: focus kept inside, Escape closes it), open while it is rendered.
 * `onClose` runs on Escape, on Cancel and after the form's action succeeds.
 */
export function Dialog({
  title,
  onClose,
  onSubmit,
  submitLabel,
  submitDisabled = false,
  pending = false,
  danger = false,
  children,
}: {
  title: string;
  onClose(): void;
  onSubmit(): void;
  submitLabel: string;
  submitDisabled?: boolean;
  pending?: boolean;
  danger?: boolean;
  children: ReactNode;
}) {
  const ref = useRef<HTMLDialogElement>(null);
  const titleId = useId();
  useEffect(() => {
    const dialog = ref.current;
    // Removed from the page when closed; never closed from here, so a second mount (React's strict mode) keeps it open.
    if (dialog && !dialog.open) dialog.showModal();
  }, []);
  return (
    <dialog
      ref={ref}
      aria-labelledby={titleId}
      onClose={onClose}
      className="m-auto w-full max-w-md rounded-lg border border-slate-200 bg-white p-0 shadow-xl backdrop:bg-slate-900/30"
    >
      <form
        method="dialog"
        onSubmit={(event) => {
          event.preventDefault();
          if (!submitDisabled && !pending) onSubmit();
        }}
      >
        <h2 id={titleId} className="border-b border-slate-200 px-4 py-2.5 text-sm font-semibold text-slate-800">
          {title}
        </h2>
        <div className="space-y-3 px-4 py-3 text-sm text-slate-700">{children}</div>
        <div className="flex justify-end gap-2 border-t border-slate-200 bg-slate-50 px-4 py-2.5">
          <Button variant="ghost" onClick={onClose}>
            Cancel
          </Button>
          <Button type="submit" disabled={submitDisabled || pending} className={danger ? "bg-red-600 hover:bg-red-700 disabled:bg-red-600/50" : ""}>
            {pending ? "Working…" : submitLabel}
          </Button>
        </div>
      </form>
    </dialog>
  );
}
