import type { ActionAutomaton } from "@/lib/sdk/action-space";
import type { Tokenizer } from "./tokenizer";

/**
 * A legal-action automaton over bytes, seen token by token: a token is allowed in a state when every byte it
 * writes is, one after another. For the byte tokenizer a token is a byte; for a byte-level BPE, each ordinary
 * token of the vocabulary is walked through the automaton, once per state: the answer is kept with the automaton,
 * which automatonFor keeps per constraint, so every row, sample and step under the same legal actions shares it.
 */
export interface TokenAutomaton {
  tokens(state: number): readonly number[];
  accepting(state: number): boolean;
  next(state: number, token: number): number;
}

const byTokenizer = new WeakMap<Tokenizer, WeakMap<ActionAutomaton, TokenAutomaton>>();

export function tokenAutomaton(automaton: ActionAutomaton, tokenizer: Tokenizer): TokenAutomaton {
  if (tokenizer.kind === "byte") {
    return {
      tokens: (state) => automaton.bytes(state),
      accepting: (state) => automaton.accepting(state),
      next: (state, token) => automaton.next(state, token),
    };
  }
  let known = byTokenizer.get(tokenizer);
  if (!known) byTokenizer.set(tokenizer, (known = new WeakMap()));
  let walker = known.get(automaton);
  if (!walker) known.set(automaton, (walker = tokenWalker(automaton, tokenizer)));
  return walker;
}

function tokenWalker(automaton: ActionAutomaton, tokenizer: Tokenizer): TokenAutomaton {
  const vocabulary = tokenizer.textTokens?.() ?? [];
  if (vocabulary.length === 0) {
    throw new Error(
      "legal actions need a tokenizer whose tokens' bytes are known: the byte tokenizer or a byte-level BPE (GPT-2, Llama 3, Qwen2, SmolLM); this model's tokenizer is neither",
    );
  }
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
