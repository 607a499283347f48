"use client";

import Link from "next/link";
import { usePathname } from "next/navigation";
import { useEffect, useState } from "react";

const links = [
  { href: "/", label: "Experiments", match: (path: string) => path === "/" || path.startsWith("/experiments") },
  { href: "/runs", label: "Runs", match: (path: string) => path.startsWith("/runs") },
  { href: "/compare", label: "Compare", match: (path: string) => path.startsWith("/compare") },
  { href: "/reports", label: "Reports", match: (path: string) => path.startsWith("/reports") },
  { href: "/datasets", label: "Datasets", match: (path: string) => path.startsWith("/datasets") },
  { href: "/models", label: "Models", match: (path: string) => path.startsWith("/models") },
  { href: "/scheduler", label: "Scheduler", match: (path: string) => path.startsWith("/scheduler") },
  { href: "/playground", label: "Playground", match: (path: string) => path.startsWith("/playground") },
  { href: "/projects", label: "Projects", match: (path: string) => path.startsWith("/projects") },
];

const linkStyle = (active: boolean) =>
  `rounded-md px-3 py-1.5 text-sm font-medium ${active ? "bg-brand-50 text-brand-700" : "text-slate-600 hover:bg-slate-100 hover:text-slate-900"}`;

function Logo() {
  return (
    <>
      <span aria-hidden className="grid size-7 place-items-center rounded-md bg-brand-600 text-sm font-bold text-white">
        T
      </span>
      Tinkerlab
    </>
  );
}

/** `accounts`: the server has people signing in (team mode), so the bar shows who and a way out. */
export function NavBar({ accounts = false }: { accounts?: boolean }) {
  const pathname = usePathname();
  // A share link's page (/s/…) is for people without an account: its holder can open nothing else, so no links.
  const shared = pathname.startsWith("/s/");
  // On a team server, the pages a signed-out visitor may open (signing in or up, an invitation) show no workbench
  // links: each would only lead back to sign in.
  const entrance = accounts && (pathname === "/sign-in" || pathname === "/sign-up" || pathname.startsWith("/invite/"));
  return (
    <header className="border-b border-slate-200 bg-white">
      <div className="mx-auto flex h-14 max-w-7xl items-center gap-8 px-6">
        {shared ? (
          <span className="flex items-center gap-2 font-semibold tracking-tight text-slate-900">
            <Logo />
          </span>
        ) : (
          <>
            <Link href="/" className="flex items-center gap-2 font-semibold tracking-tight text-slate-900">
              <Logo />
            </Link>
            {!entrance && (
              <nav aria-label="Main" className="flex items-center gap-1">
                {links.map((link) => {
                  const active = link.match(pathname);
                  return (
                    <Link key={link.href} href={link.href} aria-current={active ? "page" : undefined} className={linkStyle(active)}>
                      {link.label}
                    </Link>
                  );
                })}
              </nav>
            )}
            {!entrance && (
              <div className="ml-auto flex items-center gap-3">
                <Link
                  href="/settings"
                  aria-current={pathname.startsWith("/settings") ? "page" : undefined}
                  className={linkStyle(pathname.startsWith("/settings"))}
                >
                  Settings
                </Link>
                {accounts && <SignedIn />}
              </div>
            )}
          </>
        )}
      </div>
    </header>
  );
}

/** Who is signed in on a team server, and a way out. */
function SignedIn() {
  const [person, setPerson] = useState<{ name: string; email: string } | null>(null);
  useEffect(() => {
    let live = true;
    // Asked once a page load (signing in and out load the page anew); asking from the browser also renews the cookie.
    fetch("/api/auth/get-session")
      .then((response) => (response.ok ? response.json() : null))
      .then((session: { user?: { name: string; email: string } } | null) => live && setPerson(session?.user ?? null))
      .catch(() => live && setPerson(null));
    return () => {
      live = false;
    };
  }, []);
  if (!person) return null;
  const signOut = async () => {
    await fetch("/api/auth/sign-out", { method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
    setPerson(null);
    window.location.assign("/sign-in");
  };
  return (
    <div className="flex items-center gap-3 text-sm text-slate-600">
      <span title={person.email}>{person.name}</span>
      <button type="button" onClick={() => void signOut()} className="rounded-md px-2 py-1 hover:bg-slate-100 hover:text-slate-900">
        Sign out
      </button>
    </div>
  );
}
