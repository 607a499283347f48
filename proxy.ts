/**
 * On a team server, pages need a signed-in person: a visitor without a session cookie goes to the sign-in page,
 * which brings them back. A server taking API keys only (TINKERLAB_AUTH=apikey) answers its pages with one that
 * says so. This only spares them an error page; every procedure, stream and download checks the
 * session itself (server/api/trpc.ts).
 *
 * Downloads outside /api (a run's rollouts as JSON Lines) are no pages: they take API keys and share links, and
 * answer a refusal in plain text, so they pass untouched. A script sent to the sign-in page would save its HTML.
 */
import { type NextRequest, NextResponse } from "next/server";
import { PUBLIC_PAGES, SESSION_COOKIE } from "@/server/auth/constants";
import { serverEnv } from "@/server/env";

export function proxy(request: NextRequest) {
  const mode = serverEnv().TINKERLAB_AUTH;
  if (mode === "local") return NextResponse.next();
  const { pathname, search } = request.nextUrl;
  if (DOWNLOADS.test(pathname)) return NextResponse.next();
  // A server that takes API keys only has no pages for people, but share links open on it as anywhere.
  if (mode === "apikey") {
    return pathname.startsWith("/s/") || pathname === "/api-only" ? NextResponse.next() : NextResponse.rewrite(new URL("/api-only", request.url));
  }
  if (PUBLIC_PAGES.some((page) => (page.endsWith("/") ? pathname.startsWith(page) : pathname === page)) || request.cookies.has(SESSION_COOKIE))
    return NextResponse.next();
  const signIn = new URL("/sign-in", request.url);
  signIn.searchParams.set("next", `${pathname}${search}`);
  return NextResponse.redirect(signIn);
}

/** The routes outside /api that answer for themselves: app/runs/[id]/rollouts.jsonl. */
const DOWNLOADS = /^\/runs\/[^/]+\/rollouts\.jsonl$/;

// Pages only: the API answers 401 itself, and Next's own files are public.
export const config = { matcher: ["/((?!api/|_next/|favicon.ico).*)"] };
