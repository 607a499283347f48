"use client";

import { useEffect, useState } from "react";
import { BACKEND_PARAM, BACKEND_STORAGE_KEY, type BackendPreference, parseBackendPreference } from "./backend-choice";

/**
 * The backend the playground is asked to run on: the page's `?backend=` when it has one (a shared link says which),
 * else the one this browser last picked, else "auto". Null until read, on the client: the model's worker waits for
 * it rather than start on one backend and restart on another. Picking one writes both the address and the browser's
 * storage; "auto" clears both.
 */
export function useBackendPreference(): [BackendPreference | null, (next: BackendPreference) => void] {
  const [preference, setPreference] = useState<BackendPreference | null>(null);
  useEffect(() => {
    const fromUrl = new URLSearchParams(window.location.search).get(BACKEND_PARAM);
    setPreference(parseBackendPreference(fromUrl ?? readStorage()));
  }, []);
  const choose = (next: BackendPreference) => {
    const query = new URLSearchParams(window.location.search);
    if (next === "auto") query.delete(BACKEND_PARAM);
    else query.set(BACKEND_PARAM, next);
    const search = query.toString();
    window.history.replaceState(null, "", `${window.location.pathname}${search ? `?${search}` : ""}`);
    try {
      if (next === "auto") localStorage.removeItem(BACKEND_STORAGE_KEY);
      else localStorage.setItem(BACKEND_STORAGE_KEY, next);
    } catch {
      // Storage refused (a private window's quota, a policy): the address still carries the choice.
    }
    setPreference(next);
  };
  return [preference, choose];
}

function readStorage(): string | null {
  try {
    return localStorage.getItem(BACKEND_STORAGE_KEY);
  } catch {
    return null;
  }
}
