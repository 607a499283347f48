import type { ActionAutomaton } from "@/lib/sdk/action-space";
import type { Tokenizer } from "./tokenizer";

/**
 * A legal-action automaton over bytes, seen token by token: a token is allowed in a state when every byte it
 * writes is, one after another. For the byte tokenizer a token is a byte; for a byte-level BPE, each ordinary
 * token of the vocabulary is walked through the automaton (once per state: the answer is kept).
 */
export interface TokenAutomaton {
  tokens(state: number): readonly number[];
  accepting(state: number): boolean;
  next(state: number, token: number): number;
}

const textTokenLists = new WeakMap<Tokenizer, readonly (readonly [number, readonly number[]])[]>();

export function textTokensOf(tokenizer: Tokenizer): readonly (readonly [number, readonly number[]])[] {
  let list = textTokenLists.get(tokenizer);
  if (!list) {
    const withBytes = tokenizer as Tokenizer & { textTokens?: () => readonly (readonly [number, readonly number[]])[] };
    list = withBytes.textTokens?.() ?? [];
    textTokenLists.set(tokenizer, list);
  }
  return list;
}

export function tokenAutomaton(automaton: ActionAutomaton, tokenizer: Tokenizer): TokenAutomaton {
  if (tokenizer.kind === "byte") {
    return {
      tokens: (state) => automaton.bytes(state),
      accepting: (state) => automaton.accepting(state),
      next: (state, token) => automaton.next(state, token),
    };
  }
  const vocabulary = textTokensOf(tokenizer);
  const bytesOf = new Map(vocabulary);
  const walk = (state: number, bytes: readonly number[]) => {
    for (const byte of bytes) {
      state = automaton.next(state, byte);
      if (state < 0) return -1;
    }
    return state;
  };
  const allowed = new Map<number, number[]>();
  return {
    tokens(state) {
      let list = allowed.get(state);
      if (!list) {
        list = vocabulary.filter(([, bytes]) => walk(state, bytes) >= 0).map(([id]) => id);
        allowed.set(state, list);
      }
      return list;
    },
    accepting: (state) => automaton.accepting(state),
    next: (state, token) => walk(state, bytesOf.get(token) ?? []),
  };
}
