import type { Metadata } from "next";
import { Card } from "@/components/ui/card";
import { EmptyState } from "@/components/ui/empty-state";

export const metadata: Metadata = { title: "API keys only" };

/** What a browser sees on a server started with TINKERLAB_AUTH=apikey (proxy.ts sends every page here, except share links). */
export default function ApiOnlyPage() {
  return (
    <Card>
      <EmptyState title="This server takes API keys only">
        It answers scripts, the CLI and workers that send <code className="font-mono">Authorization: Bearer tl_…</code>, and opens share links. For people in a
        browser, start it with <code className="font-mono">TINKERLAB_AUTH=team</code> (sign-in with email and password) or, on your own machine,{" "}
        <code className="font-mono">TINKERLAB_AUTH=local</code>.
      </EmptyState>
    </Card>
  );
}
