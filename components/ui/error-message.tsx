/** The words of a failed request: a field's own message when the input was refused, else the server's message. */
function errorText(error: { message: string; data?: unknown } | null | undefined): string | null {
  if (!error) return null;
  const zod = (error.data as { zodError?: { fieldErrors?: Record<string, string[] | undefined>; formErrors?: string[] } | null } | undefined)?.zodError;
  const fieldMessages = Object.values(zod?.fieldErrors ?? {}).flatMap((messages) => messages ?? []);
  const messages = [...(zod?.formErrors ?? []), ...fieldMessages];
  return messages.length > 0 ? messages.join("; ") : error.message;
}

/** A failed request's message, inline where the action was. */
export function ErrorMessage({ error, className = "" }: { error: { message: string; data?: unknown } | null | undefined; className?: string }) {
  const text = errorText(error);
  if (!text) return null;
  return (
    <p role="alert" className={`text-sm text-red-700 ${className}`}>
      {text}
    </p>
  );
}
