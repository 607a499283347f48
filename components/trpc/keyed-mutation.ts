"use client";

import { type UseMutationOptions, useMutation } from "@tanstack/react-query";
import { useRef } from "react";

/**
 * The idempotency keys of one kind of user action (a Launch button, an upload form). Every try of an action with the
 * same input carries the same key: a double click, a click again after an answer lost on the way, TanStack Query's
 * own retry. The server then does it once and answers every try with the first answer (server/api/idempotency.ts).
 * A success, or another input, starts a new action with a new key, so launching twice on purpose launches twice.
 */
export class ActionKeys {
  private last: { input: string; key: string } | null = null;

  constructor(private readonly newKey: () => string = () => crypto.randomUUID()) {}

  /** The key of the action now under way with this input. */
  keyFor(input: unknown): string {
    const text = JSON.stringify(input) ?? "";
    if (this.last?.input !== text) this.last = { input: text, key: this.newKey() };
    return this.last.key;
  }

  /** The action succeeded: the next one is a new request. */
  done(): void {
    this.last = null;
  }
}

/**
 * `useMutation` for a write that takes an idempotency key (create, launch, evaluate, export, upload): `mutate` and
 * `mutateAsync` take the input without the key and send it with the action's key (`ActionKeys`).
 */
export function useKeyedMutation<TData, TError, TVariables extends { idempotencyKey?: string }, TOnMutateResult = unknown>(
  options: UseMutationOptions<TData, TError, TVariables, TOnMutateResult>,
) {
  const keys = useRef<ActionKeys | null>(null);
  keys.current ??= new ActionKeys();
  const mutation = useMutation({
    ...options,
    onSuccess: (...args) => {
      keys.current?.done();
      return options.onSuccess?.(...args);
    },
  });
  const keyed = (input: Omit<TVariables, "idempotencyKey">) => ({ ...input, idempotencyKey: keys.current!.keyFor(input) }) as TVariables;
  return {
    ...mutation,
    mutate: (input: Omit<TVariables, "idempotencyKey">, callbacks?: Parameters<typeof mutation.mutate>[1]) => mutation.mutate(keyed(input), callbacks),
    mutateAsync: (input: Omit<TVariables, "idempotencyKey">, callbacks?: Parameters<typeof mutation.mutateAsync>[1]) =>
      mutation.mutateAsync(keyed(input), callbacks),
  };
}
