"use client";

import { useEffect, useState } from "react";

const RELOADED_AT = "tinkerlab:playground-isolation-reload";

/**
 * Whether the page is cross-origin isolated, which WebAssembly threads need. The server sends the isolation headers
 * with /playground, but a page reached by an in-app link keeps the document it came from; such a page reloads
 * itself once to get them. A reload that did not help (a proxy dropping the headers) is not repeated for a while,
 * and the page runs on one thread and says why.
 */
export function useCrossOriginIsolation(): "pending" | "isolated" | "not-isolated" {
  const [state, setState] = useState<"pending" | "isolated" | "not-isolated">("pending");
  useEffect(() => {
    if (window.crossOriginIsolated) {
      sessionStorage.removeItem(RELOADED_AT);
      setState("isolated");
      return;
    }
    const last = Number(sessionStorage.getItem(RELOADED_AT) ?? 0);
    if (Date.now() - last > 60_000) {
      sessionStorage.setItem(RELOADED_AT, String(Date.now()));
      window.location.reload();
      return;
    }
    setState("not-isolated");
  }, []);
  return state;
}
