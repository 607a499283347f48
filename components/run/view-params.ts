"use client";

import { usePathname, useSearchParams } from "next/navigation";
import { useCallback, useEffect, useMemo, useState } from "react";

/**
 * A page's view state in its URL's query (smoothing, x-axis, zoom, the rollouts' split, step and sample...), so a
 * reload, a copied address or a share link opens the same view. A change shows at once (the hook's own copy) and
 * replaces the URL through the History API, which Next.js syncs into `useSearchParams` in a transition, without a
 * round trip to the server; a change of the URL from elsewhere (back, a link) wins. Defaults are left out.
 */
export function useViewParams(): [URLSearchParams, (changes: Record<string, string | null>) => void] {
  const urlKey = useSearchParams().toString();
  const pathname = usePathname();
  const [key, setKey] = useState(urlKey);
  // Next.js reports URL changes late (in a transition): by then this hook may have written newer ones, so it takes
  // the address as it is now, not the one reported.
  // biome-ignore lint/correctness/useExhaustiveDependencies: urlKey only signals that the address changed
  useEffect(() => setKey(new URLSearchParams(window.location.search).toString()), [urlKey]);
  const set = useCallback(
    (changes: Record<string, string | null>) => {
      const next = new URLSearchParams(window.location.search);
      for (const [name, value] of Object.entries(changes)) {
        if (value === null) next.delete(name);
        else next.set(name, value);
      }
      setKey(next.toString());
      const query = next.toString().replace(/%2C/g, ",").replace(/%2F/g, "/");
      // State null: Next.js then syncs useSearchParams (with its own state object, it would take the call for its own and not).
      window.history.replaceState(null, "", query ? `${pathname}?${query}` : pathname);
    },
    [pathname],
  );
  const params = useMemo(() => new URLSearchParams(key), [key]);
  return [params, set];
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
