"use client";

import { QueryClientProvider, type QueryClient } from "@tanstack/react-query";
import { createTRPCClient, httpBatchLink, httpSubscriptionLink, splitLink } from "@trpc/client";
import { createTRPCContext } from "@trpc/tanstack-react-query";
import { useState } from "react";
import superjson from "superjson";
import type { AppRouter } from "@/server/api";
import { SHARE_HEADER } from "@/server/auth/constants";
import { MAX_BATCH_CALLS } from "@/lib/trpc/limits";
import { makeQueryClient } from "@/lib/trpc/query-client";

const { TRPCProvider, useTRPC, useTRPCClient } = createTRPCContext<AppRouter>();
export { useTRPC, useTRPCClient };

let browserQueryClient: QueryClient | undefined;

function getQueryClient() {
  // On the server every request gets a fresh client; in the browser one client lives for the page's lifetime.
  if (typeof window === "undefined") return makeQueryClient();
  browserQueryClient ??= makeQueryClient();
  return browserQueryClient;
}

/**
 * The share token of a shared page (`/s/<token>`), which its requests carry so the server answers them as the
 * link's holder; null elsewhere.
 */
function shareTokenOfPage(): string | null {
  if (typeof window === "undefined") return null;
  return window.location.pathname.match(/^\/s\/([\w-]+)/)?.[1] ?? null;
}

function shareHeaders(): Record<string, string> {
  const token = shareTokenOfPage();
  return token ? { [SHARE_HEADER]: token } : {};
}

export function TRPCReactProvider({ children }: { children: React.ReactNode }) {
  const queryClient = getQueryClient();
  const [trpcClient] = useState(() =>
    createTRPCClient<AppRouter>({
      links: [
        splitLink({
          // Subscriptions (live metric streams) travel as server-sent events; everything else in batches.
          condition: (op) => op.type === "subscription",
          // An EventSource sends no headers: a shared page's token travels in tRPC's connectionParams instead.
          true: httpSubscriptionLink({
            url: "/api/trpc",
            transformer: superjson,
            connectionParams: () => {
              const share = shareTokenOfPage();
              return share ? { share } : null;
            },
          }),
          // At most as many calls in one request as the server takes; more go in the next request.
          false: httpBatchLink({ url: "/api/trpc", transformer: superjson, headers: shareHeaders, maxItems: MAX_BATCH_CALLS }),
        }),
      ],
    }),
  );
  return (
    <QueryClientProvider client={queryClient}>
      <TRPCProvider trpcClient={trpcClient} queryClient={queryClient}>
        {children}
      </TRPCProvider>
    </QueryClientProvider>
  );
}
