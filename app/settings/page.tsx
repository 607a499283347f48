import type { Metadata } from "next";
import { ApiKeysView } from "@/components/settings/api-keys-view";
import { Card, PageHeader } from "@/components/ui/card";
import { EmptyState } from "@/components/ui/empty-state";
import { pageViewer, requestContext, serverCaller } from "@/server/api/rsc";
import { isServerAdmin } from "@/server/auth";
import { serverEnv } from "@/server/env";

export const dynamic = "force-dynamic";
export const metadata: Metadata = { title: "Settings" };

export default async function SettingsPage() {
  const viewer = await pageViewer();
  const header = <PageHeader title="Settings" subtitle="API keys let scripts, the CLI and remote workers act for you in one project." />;
  // Keys belong to a person: the local user or someone signed in (a key cannot make keys).
  if (viewer.kind !== "local" && viewer.kind !== "person") {
    return (
      <>
        {header}
        <Card>
          <EmptyState title="Sign in to manage API keys">API keys are made by a signed-in person, each for one of their projects.</EmptyState>
        </Card>
      </>
    );
  }
  const caller = await serverCaller();
  const [keys, projects, context] = await Promise.all([caller.apiKeys.list(), caller.projects.list(), requestContext()]);
  return (
    <>
      {header}
      <ApiKeysView
        initialKeys={keys}
        projects={projects}
        localServer={serverEnv().TINKERLAB_AUTH === "local"}
        serverAdmin={isServerAdmin(context.access.principal)}
      />
    </>
  );
}
