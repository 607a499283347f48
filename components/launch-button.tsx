"use client";

import { useRouter } from "next/navigation";
import { Button } from "@/components/ui/button";
import { useKeyedMutation } from "@/components/trpc/keyed-mutation";
import { useTRPC } from "@/components/trpc/provider";

/** Launches a run of the experiment's latest version and opens its page. */
export function LaunchButton({ experimentId }: { experimentId: string }) {
  const trpc = useTRPC();
  const router = useRouter();
  const launch = useKeyedMutation(trpc.runs.launch.mutationOptions({ onSuccess: ({ runId }) => router.push(`/runs/${runId}`) }));
  return (
    <div className="flex flex-col items-end gap-1">
      <Button onClick={() => launch.mutate({ experimentId })} disabled={launch.isPending}>
        {launch.isPending ? "Launching…" : "Launch run"}
      </Button>
      {launch.error && (
        <p role="alert" className="max-w-md whitespace-pre-line text-right text-sm text-red-600">
          {launch.error.message}
        </p>
      )}
    </div>
  );
}
