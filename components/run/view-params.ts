"use client";

import { usePathname, useSearchParams } from "next/navigation";
import { useCallback } from "react";

/**
 * A page's view state in its URL's query (smoothing, x-axis, zoom, the rollouts' split, step and sample...), so a
 * reload, a copied address or a share link opens the same view. Changes replace the URL through the History API,
 * which Next.js syncs into `useSearchParams` without a round trip to the server; defaults are left out.
 */
export function useViewParams(): [URLSearchParams, (changes: Record<string, string | null>) => void] {
  const params = useSearchParams();
  const pathname = usePathname();
  const set = useCallback(
    (changes: Record<string, string | null>) => {
      const next = new URLSearchParams(window.location.search);
      for (const [key, value] of Object.entries(changes)) {
        if (value === null) next.delete(key);
        else next.set(key, value);
      }
      const query = next.toString().replace(/%2C/g, ",").replace(/%2F/g, "/");
      // State null: Next.js then syncs useSearchParams (with its own state object, it would take the call for its own and not).
      window.history.replaceState(null, "", query ? `${pathname}?${query}` : pathname);
    },
    [pathname],
  );
  return [new URLSearchParams(params.toString()), set];
}

/** A number from the query, within [min, max], or `fallback` when absent or not a number. */
export function numberParam(params: URLSearchParams, key: string, fallback: number, min = -Infinity, max = Infinity): number {
  const raw = params.get(key);
  const value = raw === null || raw === "" ? Number.NaN : Number(raw);
  return Number.isFinite(value) ? Math.min(max, Math.max(min, value)) : fallback;
}

/** The query string of a page's current view (what a share link carries), as a record. */
export function currentView(): Record<string, string> {
  return Object.fromEntries(new URLSearchParams(window.location.search));
}
