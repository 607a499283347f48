"use client";

import { useSearchParams } from "next/navigation";
import { useState } from "react";
import { Button } from "@/components/ui/button";
import { Card } from "@/components/ui/card";

const field = "block w-full rounded-md border border-slate-300 bg-white px-2.5 py-1.5 text-sm focus:border-brand-500 focus:outline-none";

/**
 * Sign in, or make an account: a team server's first, or one with an invitation link (`?invite=`), which the server
 * checks and then joins the new account to its project. The form posts to the server's auth routes (/api/auth/…),
 * which set the session cookie, then goes on to the page the visitor came from.
 */
export function AccountForm({ kind }: { kind: "sign-in" | "sign-up" }) {
  const params = useSearchParams();
  const next = params.get("next");
  const invite = kind === "sign-up" ? params.get("invite") : null;
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const submit = async (form: FormData) => {
    setBusy(true);
    setError(null);
    const body = Object.fromEntries([...form.entries()].map(([key, value]) => [key, String(value)]));
    try {
      const url = invite ? `/api/auth/${kind}/email?invite=${encodeURIComponent(invite)}` : `/api/auth/${kind}/email`;
      const response = await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
      if (!response.ok) {
        const answer = (await response.json().catch(() => null)) as { message?: string; error?: string } | null;
        // A refusal for too many tries says itself when to try again (Retry-After, in its message).
        setError(answer?.message ?? answer?.error ?? `The server answered ${response.status}.`);
        return;
      }
      // Only a path on this server: a "next" that names another site is ignored. A full load, not a client-side
      // push: the router may hold a prefetch of the page from before the session (a redirect here).
      window.location.assign(next?.startsWith("/") && !next.startsWith("//") ? next : "/");
    } finally {
      setBusy(false);
    }
  };
  return (
    <div className="mx-auto max-w-sm">
      <Card title={kind === "sign-in" ? "Sign in" : invite ? "Make your account" : "Make the first account"}>
        <form
          // onSubmit rather than a form action: React resets a form after its action, which would clear what was typed
          // when the server refuses it (a taken email, a link that no longer works).
          onSubmit={(event) => {
            event.preventDefault();
            void submit(new FormData(event.currentTarget));
          }}
          aria-label={kind === "sign-in" ? "Sign in" : "Sign up"}
          className="space-y-3 px-4 py-4"
        >
          {kind === "sign-up" && (
            <label className="block text-sm font-medium text-slate-700">
              Name
              <input name="name" required autoComplete="name" className={field} />
            </label>
          )}
          <label className="block text-sm font-medium text-slate-700">
            Email
            <input name="email" type="email" required autoComplete="email" className={field} />
          </label>
          <label className="block text-sm font-medium text-slate-700">
            Password
            <input
              name="password"
              type="password"
              required
              minLength={kind === "sign-up" ? 12 : undefined}
              autoComplete={kind === "sign-in" ? "current-password" : "new-password"}
              className={field}
            />
          </label>
          {error && (
            <p role="alert" className="text-sm text-red-700">
              {error}
            </p>
          )}
          <Button type="submit" disabled={busy}>
            {kind === "sign-in" ? "Sign in" : "Make the account"}
          </Button>
          <p className="text-xs text-slate-500">
            {kind === "sign-in" ? (
              <>
                A new server has no account yet:{" "}
                <a className="text-brand-700 hover:underline" href="/sign-up">
                  make the first one
                </a>
                ; it becomes the admin.
              </>
            ) : invite ? (
              "The invitation adds your account to its project. Passwords have at least 12 characters."
            ) : (
              "The first account of a server becomes its admin; after it, people join by invitation. Passwords have at least 12 characters."
            )}
          </p>
        </form>
      </Card>
    </div>
  );
}
