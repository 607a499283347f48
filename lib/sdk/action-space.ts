/**
 * Action spaces: the legal actions of a turn, as a list of strings or a pattern, and the byte automaton that
 * constrains sampling to them. A constrained policy cannot write an invalid action, and the logprob it reports is
 * that of the constrained distribution (softmax over the legal next tokens only): `forward` and `forwardBackward`
 * compute the same quantity from the same allowed sets, which the sampler returns with every token.
 *
 * Patterns are a subset of regular expressions, always matched against the whole action: literal characters,
 * `.` (any printable ASCII character), classes `[a-z0-9_]` and `[^,]` (ASCII), the escapes `\d \w \s \. \( …`,
 * groups `( )`, alternation `|`, and the quantifiers `* + ? {n} {n,} {n,m}`. Anchors, backreferences and
 * lookarounds are refused with a message naming them.
 */

/** The legal actions of one turn, as the protocol hands them to the policy. */
export type ActionConstraint = { actions: string[] } | { pattern: string };

export const MAX_LEGAL_ACTIONS = 10_000;
export const MAX_ACTION_BYTES = 512;
const MAX_PATTERN_LENGTH = 1_000;
/** Repetitions a `{n,m}` may unroll to: each costs automaton states. */
const MAX_REPEAT = 256;

/** What `.` and a negated class stand for: tab and the printable ASCII characters. */
const PRINTABLE: number[] = [9, ...Array.from({ length: 0x7f - 0x20 }, (_, i) => 0x20 + i)];

/** A string's UTF-8 bytes (the sandbox's QuickJS has no TextEncoder). */
function utf8Bytes(text: string): number[] {
  const bytes: number[] = [];
  for (const char of text) {
    const c = char.codePointAt(0)!;
    if (c < 0x80) bytes.push(c);
    else if (c < 0x800) bytes.push(0xc0 | (c >> 6), 0x80 | (c & 63));
    else if (c < 0x10000) bytes.push(0xe0 | (c >> 12), 0x80 | ((c >> 6) & 63), 0x80 | (c & 63));
    else bytes.push(0xf0 | (c >> 18), 0x80 | ((c >> 12) & 63), 0x80 | ((c >> 6) & 63), 0x80 | (c & 63));
  }
  return bytes;
}

/** Checks a list of legal actions: at least one, non-empty strings, not too long; duplicates are dropped. */
export function checkActionList(actions: unknown, where = "actions"): string[] {
  if (!Array.isArray(actions)) throw new Error(`${where} must be an array of strings; got ${typeof actions}`);
  if (actions.length === 0) throw new Error(`${where} is empty: a turn needs at least one legal action`);
  if (actions.length > MAX_LEGAL_ACTIONS) throw new Error(`${where} has ${actions.length} actions; at most ${MAX_LEGAL_ACTIONS} are accepted`);
  for (const [i, action] of actions.entries()) {
    if (typeof action !== "string" || action.length === 0) throw new Error(`${where}[${i}] must be a non-empty string; got ${JSON.stringify(action)}`);
    if (utf8Bytes(action).length > MAX_ACTION_BYTES) throw new Error(`${where}[${i}] is longer than ${MAX_ACTION_BYTES} bytes`);
  }
  return [...new Set(actions as string[])];
}

// ---- the automaton ----

/** A nondeterministic automaton over bytes: `edges[s]` lists [bytes, to]; `epsilon[s]` the free moves. */
type Nfa = { edges: [Uint8Array | number[], number][][]; epsilon: number[][]; accept: Set<number> };

class NfaBuilder {
  edges: [number[], number][][] = [];
  epsilon: number[][] = [];
  state(): number {
    this.edges.push([]);
    this.epsilon.push([]);
    return this.edges.length - 1;
  }
}

/** A fragment of a Thompson construction: enter at `start`, leave from `end`. */
type Fragment = { start: number; end: number };

/**
 * A pattern's syntax tree: sequences of atoms with repeat counts, alternatives of sequences. Each node is turned
 * into automaton states by `build`, so a `{n,m}` repeat is built n..m times.
 */
type Node =
  | { type: "bytes"; set: number[] }
  | { type: "literal"; bytes: number[] }
  | { type: "seq"; items: Node[] }
  | { type: "alt"; options: Node[] }
  | { type: "repeat"; node: Node; min: number; max: number | null };

class PatternParser {
  private at = 0;
  constructor(private readonly source: string) {}

  parse(): Node {
    const node = this.alternation();
    if (this.at < this.source.length) this.fail(`unexpected '${this.source[this.at]}'`);
    return node;
  }

  private fail(message: string): never {
    throw new Error(`action pattern ${JSON.stringify(this.source)}: ${message} at position ${this.at}; ${PATTERN_HELP}`);
  }

  private alternation(): Node {
    const options = [this.sequence()];
    while (this.source[this.at] === "|") {
      this.at++;
      options.push(this.sequence());
    }
    return options.length === 1 ? options[0]! : { type: "alt", options };
  }

  private sequence(): Node {
    const items: Node[] = [];
    while (this.at < this.source.length && this.source[this.at] !== "|" && this.source[this.at] !== ")") items.push(this.quantified());
    return { type: "seq", items };
  }

  private quantified(): Node {
    let node = this.atom();
    for (;;) {
      const c = this.source[this.at];
      if (c === "*") node = { type: "repeat", node, min: 0, max: null };
      else if (c === "+") node = { type: "repeat", node, min: 1, max: null };
      else if (c === "?") node = { type: "repeat", node, min: 0, max: 1 };
      else if (c === "{") {
        const match = /^\{(\d+)(,(\d*))?\}/.exec(this.source.slice(this.at));
        if (!match) this.fail("a '{' must start a repeat like {3}, {1,} or {1,3}");
        const min = Number(match[1]);
        const max = match[2] === undefined ? min : match[3] === "" ? null : Number(match[3]);
        if ((max !== null && max < min) || min > MAX_REPEAT || (max ?? 0) > MAX_REPEAT) this.fail(`a repeat must be {n,m} with n ≤ m ≤ ${MAX_REPEAT}`);
        node = { type: "repeat", node, min, max };
        this.at += match[0].length - 1;
      } else return node;
      this.at++;
    }
  }

  private atom(): Node {
    const c = this.source[this.at]!;
    if (c === "(") {
      this.at++;
      if (this.source[this.at] === "?") {
        if (this.source.startsWith("?:", this.at)) this.at += 2;
        else this.fail("lookarounds and named groups are not supported");
      }
      const node = this.alternation();
      if (this.source[this.at] !== ")") this.fail("a group is not closed");
      this.at++;
      return node;
    }
    if (c === "[") return this.charClass();
    if (c === ".") {
      this.at++;
      return { type: "bytes", set: PRINTABLE };
    }
    if (c === "^" || c === "$") this.fail(`anchors ('${c}') are not needed: a pattern always matches the whole action`);
    if (c === "*" || c === "+" || c === "?" || c === "{") this.fail(`'${c}' has nothing to repeat`);
    if (c === "\\") {
      const escaped = this.escape();
      return typeof escaped === "number" ? { type: "literal", bytes: [escaped] } : { type: "bytes", set: escaped };
    }
    const codePoint = this.source.codePointAt(this.at)!;
    const char = String.fromCodePoint(codePoint);
    this.at += char.length;
    return { type: "literal", bytes: utf8Bytes(char) };
  }

  /** After a backslash: one byte, or a set of them (\d, \w, \s). */
  private escape(): number | number[] {
    this.at++;
    const c = this.source[this.at++];
    if (c === undefined) this.fail("the pattern ends with a lone '\\'");
    if (c === "d") return range(48, 57);
    if (c === "w") return [...range(48, 57), ...range(65, 90), 95, ...range(97, 122)];
    if (c === "s") return [32, 9, 10, 13];
    if (c === "n") return 10;
    if (c === "t") return 9;
    if (/[\\.^$|?*+()[\]{}\-\/]/.test(c)) return c.charCodeAt(0);
    if (/[0-9bBDWSkpP]/.test(c)) this.fail(`'\\${c}' is not supported`);
    return c.charCodeAt(0);
  }

  private charClass(): Node {
    this.at++;
    const negated = this.source[this.at] === "^";
    if (negated) this.at++;
    const set = new Set<number>();
    let first = true;
    while (this.at < this.source.length && (this.source[this.at] !== "]" || first)) {
      first = false;
      const low = this.classChar();
      if (typeof low !== "number") {
        low.forEach((b) => set.add(b));
        continue;
      }
      if (this.source[this.at] === "-" && this.source[this.at + 1] !== "]" && this.at + 1 < this.source.length) {
        this.at++;
        const high = this.classChar();
        if (typeof high !== "number" || high < low) this.fail("a class range must go from a lower to a higher character, like a-z");
        range(low, high).forEach((b) => set.add(b));
      } else set.add(low);
    }
    if (this.source[this.at] !== "]") this.fail("a class '[' is not closed");
    this.at++;
    const bytes = negated ? PRINTABLE.filter((b) => !set.has(b)) : [...set].sort((a, b) => a - b);
    if (bytes.length === 0) this.fail("a class matches no character");
    return { type: "bytes", set: bytes };
  }

  private classChar(): number | number[] {
    if (this.source[this.at] === "\\") return this.escape();
    const code = this.source.charCodeAt(this.at++);
    if (code > 0x7e) this.fail("classes hold ASCII characters only");
    return code;
  }
}

const PATTERN_HELP = "patterns accept literals, '.', classes like [a-z] or [^,], \\d \\w \\s, groups ( ), '|', and * + ? {n,m}";

function range(low: number, high: number): number[] {
  return Array.from({ length: high - low + 1 }, (_, i) => low + i);
}

function build(node: Node, nfa: NfaBuilder): Fragment {
  switch (node.type) {
    case "bytes": {
      const start = nfa.state(),
        end = nfa.state();
      nfa.edges[start]!.push([node.set, end]);
      return { start, end };
    }
    case "literal": {
      const start = nfa.state();
      let at = start;
      for (const byte of node.bytes) {
        const next = nfa.state();
        nfa.edges[at]!.push([[byte], next]);
        at = next;
      }
      return { start, end: at };
    }
    case "seq": {
      const start = nfa.state();
      let at = start;
      for (const item of node.items) {
        const fragment = build(item, nfa);
        nfa.epsilon[at]!.push(fragment.start);
        at = fragment.end;
      }
      return { start, end: at };
    }
    case "alt": {
      const start = nfa.state(),
        end = nfa.state();
      for (const option of node.options) {
        const fragment = build(option, nfa);
        nfa.epsilon[start]!.push(fragment.start);
        nfa.epsilon[fragment.end]!.push(end);
      }
      return { start, end };
    }
    case "repeat": {
      const start = nfa.state();
      let at = start;
      for (let i = 0; i < node.min; i++) {
        const fragment = build(node.node, nfa);
        nfa.epsilon[at]!.push(fragment.start);
        at = fragment.end;
      }
      const end = nfa.state();
      nfa.epsilon[at]!.push(end);
      if (node.max === null) {
        const fragment = build(node.node, nfa);
        nfa.epsilon[at]!.push(fragment.start);
        nfa.epsilon[fragment.end]!.push(fragment.start, end);
      } else {
        for (let i = node.min; i < node.max; i++) {
          const fragment = build(node.node, nfa);
          nfa.epsilon[at]!.push(fragment.start);
          nfa.epsilon[fragment.end]!.push(end);
          at = fragment.end;
        }
      }
      return { start, end };
    }
  }
}

/** A list's automaton: a trie of the actions' bytes. */
function listNfa(actions: string[], nfa: NfaBuilder): Fragment {
  const start = nfa.state(),
    end = nfa.state();
  const children = new Map<number, Map<number, number>>();
  for (const action of actions) {
    let at = start;
    for (const byte of utf8Bytes(action)) {
      let next = children.get(at)?.get(byte);
      if (next === undefined) {
        next = nfa.state();
        if (!children.has(at)) children.set(at, new Map());
        children.get(at)!.set(byte, next);
        nfa.edges[at]!.push([[byte], next]);
      }
      at = next;
    }
    if (!nfa.epsilon[at]!.includes(end)) nfa.epsilon[at]!.push(end);
  }
  return { start, end };
}

/**
 * The legal continuations of an action as it is written, byte by byte: a deterministic automaton built lazily
 * from the constraint's NFA (each state a set of NFA states), shared by every row that samples under it.
 */
export class ActionAutomaton {
  private readonly nfa: Nfa;
  private readonly dfaStates: { nfa: number[]; next: Map<number, number>; bytes: number[]; accepting: boolean }[] = [];
  private readonly byKey = new Map<string, number>();

  constructor(constraint: ActionConstraint) {
    const builder = new NfaBuilder();
    let fragment: Fragment;
    if ("actions" in constraint) fragment = listNfa(checkActionList(constraint.actions), builder);
    else {
      if (typeof constraint.pattern !== "string" || constraint.pattern.length === 0)
        throw new Error(`an action pattern must be a non-empty string; got ${JSON.stringify(constraint.pattern)}`);
      if (constraint.pattern.length > MAX_PATTERN_LENGTH) throw new Error(`an action pattern holds at most ${MAX_PATTERN_LENGTH} characters`);
      fragment = build(new PatternParser(constraint.pattern).parse(), builder);
    }
    this.nfa = { edges: builder.edges, epsilon: builder.epsilon, accept: new Set([fragment.end]) };
    this.stateOf(this.closure([fragment.start]));
    if (this.dfaStates[0]!.accepting && this.dfaStates[0]!.bytes.length === 0) throw new Error("an action pattern must match at least one non-empty action");
  }

  /** The start state: nothing written yet. */
  get start(): number {
    return 0;
  }

  /** Bytes that may come next in `state`, ascending. */
  bytes(state: number): readonly number[] {
    return this.dfaStates[state]!.bytes;
  }

  /** Whether what was written so far is a whole legal action (the turn may end here). */
  accepting(state: number): boolean {
    return this.dfaStates[state]!.accepting;
  }

  /** The state after `byte`, or -1 when the byte is not legal there. */
  next(state: number, byte: number): number {
    const dfa = this.dfaStates[state]!;
    const known = dfa.next.get(byte);
    if (known !== undefined) return known;
    const targets: number[] = [];
    for (const s of dfa.nfa) for (const [set, to] of this.nfa.edges[s]!) if (includes(set, byte)) targets.push(to);
    const next = targets.length === 0 ? -1 : this.stateOf(this.closure(targets));
    dfa.next.set(byte, next);
    return next;
  }

  /** Whether `text` is a whole legal action. */
  matches(text: string): boolean {
    let state = this.start;
    for (const byte of utf8Bytes(text)) {
      state = this.next(state, byte);
      if (state < 0) return false;
    }
    return this.accepting(state);
  }

  private closure(states: number[]): number[] {
    const seen = new Set(states);
    const stack = [...states];
    while (stack.length) for (const to of this.nfa.epsilon[stack.pop()!]!) if (!seen.has(to)) seen.add(to), stack.push(to);
    return [...seen].sort((a, b) => a - b);
  }

  private stateOf(nfaStates: number[]): number {
    const key = nfaStates.join(",");
    const known = this.byKey.get(key);
    if (known !== undefined) return known;
    const bytes = new Set<number>();
    for (const s of nfaStates) for (const [set] of this.nfa.edges[s]!) for (const b of set) bytes.add(b);
    this.dfaStates.push({ nfa: nfaStates, next: new Map(), bytes: [...bytes].sort((a, b) => a - b), accepting: nfaStates.some((s) => this.nfa.accept.has(s)) });
    this.byKey.set(key, this.dfaStates.length - 1);
    return this.dfaStates.length - 1;
  }
}

function includes(set: Uint8Array | number[], byte: number): boolean {
  if (set.length === 1) return set[0] === byte;
  for (let i = 0; i < set.length; i++) if (set[i] === byte) return true;
  return false;
}

/** The constraint's automaton, made once per distinct constraint (a list or pattern is often the same every turn). */
const automata = new Map<string, ActionAutomaton>();
export function automatonFor(constraint: ActionConstraint): ActionAutomaton {
  const key = "actions" in constraint ? `a${JSON.stringify(constraint.actions)}` : `p${constraint.pattern}`;
  let automaton = automata.get(key);
  if (!automaton) {
    automaton = new ActionAutomaton(constraint);
    if (automata.size >= 256) automata.delete(automata.keys().next().value!);
    automata.set(key, automaton);
  }
  return automaton;
}

/** A short human description of a constraint, for the trajectory viewer and logs. */
export function describeConstraint(constraint: ActionConstraint): string {
  if ("pattern" in constraint) return `pattern ${constraint.pattern}`;
  const shown = constraint.actions
    .slice(0, 20)
    .map((a) => JSON.stringify(a))
    .join(", ");
  return constraint.actions.length > 20 ? `${shown}, … (${constraint.actions.length} in all)` : shown;
}

/**
 * A random legal action: an element of the list, or a random walk through the pattern's automaton that ends
 * where the action may end (with probability 1/3 at each such point, always where nothing may follow).
 */
export function randomLegalAction(constraint: ActionConstraint, uniform: () => number): string {
  if ("actions" in constraint) return constraint.actions[Math.floor(uniform() * constraint.actions.length)]!;
  const automaton = automatonFor(constraint);
  const bytes: number[] = [];
  let state = automaton.start;
  while (bytes.length < MAX_ACTION_BYTES) {
    const next = automaton.bytes(state);
    if (automaton.accepting(state) && (next.length === 0 || uniform() < 1 / 3)) break;
    const byte = next[Math.floor(uniform() * next.length)]!;
    bytes.push(byte);
    state = automaton.next(state, byte);
  }
  return decodeUtf8(bytes);
}

function decodeUtf8(bytes: number[]): string {
  let out = "";
  for (let i = 0; i < bytes.length; ) {
    const b = bytes[i]!;
    const width = b < 0x80 ? 1 : b < 0xe0 ? 2 : b < 0xf0 ? 3 : 4;
    let c = width === 1 ? b : b & (0xff >> (width + 1));
    for (let k = 1; k < width; k++) c = (c << 6) | (bytes[i + k]! & 63);
    out += String.fromCodePoint(c);
    i += width;
  }
  return out;
}
