import { ButtonLink } from "@/components/ui/button";
import { Card } from "@/components/ui/card";
import { EmptyState } from "@/components/ui/empty-state";

export default function NotFound() {
  return (
    <Card>
      <EmptyState title="Not found" action={<ButtonLink href="/">Back to experiments</ButtonLink>}>
        Nothing lives at this address. It may have been deleted, or the link may be mistyped.
      </EmptyState>
    </Card>
  );
}
