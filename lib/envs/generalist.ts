/**
 * The generalist base's corpus: short chat conversations of many generic skills, generated from a seed (every
 * training batch is fresh, so the corpus has no fixed size), and the held-out skills it never sees, to report how
 * far the base generalizes. A newcomer's environment asks for things like these: read a number from the prompt,
 * pick one of the listed options, copy or transform a word, answer in one word, keep going over several turns.
 *
 * Each skill makes one conversation: a system prompt, then user and assistant turns; the reply to score is the
 * last assistant turn. Half of the conversations put the instruction in the system prompt and the data in the
 * user turn (as an environment's systemPrompt and observation do); the other half give a generic system prompt
 * and the whole task in the user turn.
 */
import type { ChatMessage } from "@/lib/model/chat";
import type { GPTConfig } from "@/lib/model/config";
import { Rng } from "@/lib/model/rng";
import type { PolicyModel } from "@/lib/rl/primitives";

export type Conversation = ChatMessage[];
export type Skill = { name: string; make(rng: Rng): Conversation };

// ---- vocabulary ----

const categories = {
  color: ["red", "blue", "green", "black", "white", "pink", "brown", "gray", "gold", "orange"],
  animal: ["cat", "dog", "cow", "fox", "owl", "pig", "bee", "ant", "bat", "hen", "duck", "frog", "goat", "lion", "wolf", "bear"],
  fruit: ["apple", "pear", "plum", "fig", "lime", "kiwi", "grape", "mango", "lemon", "peach", "melon", "cherry"],
  tool: ["hammer", "saw", "drill", "rake", "spade", "axe", "wrench", "knife", "brush", "ruler"],
} as const;
type Category = keyof typeof categories;
const categoryNames = Object.keys(categories) as Category[];
const commonWords = [
  "sun",
  "moon",
  "star",
  "tree",
  "rock",
  "sand",
  "rain",
  "snow",
  "wind",
  "fire",
  "lake",
  "hill",
  "road",
  "door",
  "lamp",
  "book",
  "cup",
  "hat",
  "box",
  "key",
  "ship",
  "car",
  "bus",
  "map",
  "pen",
  "bell",
  "ring",
  "coin",
  "rope",
  "nest",
  "leaf",
  "seed",
  "milk",
  "bread",
  "salt",
  "tea",
  "river",
  "stone",
  "cloud",
  "chair",
  "table",
  "house",
  "glass",
  "paper",
  "clock",
  "plant",
  "bird",
  "fish",
  "horse",
  "sheep",
  "mouse",
];
const allWords = [...commonWords, ...categoryNames.flatMap((c) => categories[c])];
const letters = [..."abcdefghijklmnopqrstuvwxyz"];

const int = (rng: Rng, lo: number, hi: number) => lo + (rng.nextU32() % (hi - lo + 1));
const pick = <T>(rng: Rng, items: readonly T[]): T => items[rng.nextU32() % items.length]!;
const chance = (rng: Rng, p: number) => rng.uniform() < p;
function distinct<T>(rng: Rng, items: readonly T[], n: number): T[] {
  const pool = [...items];
  const out: T[] = [];
  while (out.length < n && pool.length) out.push(pool.splice(rng.nextU32() % pool.length, 1)[0]!);
  return out;
}
const randomWord = (rng: Rng, min = 2, max = 6) => Array.from({ length: int(rng, min, max) }, () => pick(rng, letters)).join("");
const word = (rng: Rng) => (chance(rng, 0.6) ? pick(rng, allWords) : randomWord(rng));
const list = (items: readonly (string | number)[], rng: Rng) => items.join(pick(rng, [", ", " ", ", "]));

const genericSystems = ["Answer briefly.", "Reply with the answer only.", "You are a helpful assistant.", "Be brief.", "Follow the instruction.", "Answer."];

/** A task as a conversation: instruction in the system prompt and the data in the user turn, or all in the user turn. */
function task(rng: Rng, instruction: string, data: string, reply: string | number): Conversation {
  if (data !== "" && chance(rng, 0.5)) {
    return [
      { role: "system", content: instruction },
      { role: "user", content: data },
      { role: "assistant", content: String(reply) },
    ];
  }
  return [
    { role: "system", content: pick(rng, genericSystems) },
    { role: "user", content: data === "" ? instruction : pick(rng, [`${instruction} ${data}`, `${instruction}\n${data}`, `${data}\n${instruction}`]) },
    { role: "assistant", content: String(reply) },
  ];
}

// ---- the skills of the corpus ----

const skills: Skill[] = [
  {
    name: "pick-option",
    make(rng) {
      const rule = int(rng, 0, 6);
      if (rule <= 1) {
        const category = pick(rng, categoryNames);
        const answer = pick(rng, categories[category]);
        const others = distinct(
          rng,
          allWords.filter((w) => !(categories[category] as readonly string[]).includes(w)),
          int(rng, 2, 4),
        );
        const options = [...others];
        options.splice(int(rng, 0, options.length), 0, answer);
        return task(
          rng,
          pick(rng, [`Pick the ${category}.`, `Which option is a ${category}?`, `Choose the ${category} from the options.`]),
          `Options: ${list(options, rng)}`,
          answer,
        );
      }
      if (rule === 2) {
        const numbers = distinct(
          rng,
          Array.from({ length: 99 }, (_, i) => i + 1),
          int(rng, 3, 5),
        );
        const largest = chance(rng, 0.5);
        const answer = largest ? Math.max(...numbers) : Math.min(...numbers);
        return task(
          rng,
          largest ? pick(rng, ["Pick the largest number.", "Which is the biggest?"]) : pick(rng, ["Pick the smallest number.", "Which is the smallest?"]),
          `Options: ${list(numbers, rng)}`,
          answer,
        );
      }
      const options = distinct(rng, allWords, int(rng, 3, 5));
      if (rule === 3) {
        const answer = pick(rng, options);
        return task(rng, pick(rng, [`Pick ${answer}.`, `Choose the option ${answer}.`, `Answer with ${answer}.`]), `Options: ${list(options, rng)}`, answer);
      }
      if (rule === 4) {
        const first = chance(rng, 0.5);
        return task(rng, first ? "Pick the first option." : "Pick the last option.", `Options: ${list(options, rng)}`, first ? options[0]! : options.at(-1)!);
      }
      if (rule === 5) {
        const byLength = [...options].sort((a, b) => b.length - a.length);
        if (byLength[0]!.length === byLength[1]!.length) return skills[0]!.make(rng);
        return task(rng, "Pick the longest word.", `Options: ${list(options, rng)}`, byLength[0]!);
      }
      const answer = pick(rng, options);
      if (options.filter((o) => o[0] === answer[0]).length > 1) return skills[0]!.make(rng);
      return task(rng, `Pick the word that starts with ${answer[0]}.`, `Options: ${list(options, rng)}`, answer);
    },
  },
  {
    name: "copy",
    make(rng) {
      const text = Array.from({ length: int(rng, 1, 4) }, () => word(rng)).join(" ");
      return task(rng, pick(rng, ["Copy the text exactly.", "Repeat after me.", "Say exactly what I say."]), text, text);
    },
  },
  {
    name: "reverse",
    make(rng) {
      if (chance(rng, 0.7)) {
        const w = word(rng);
        return task(rng, pick(rng, ["Reverse the word.", "Spell the word backwards."]), w, [...w].reverse().join(""));
      }
      const words = distinct(rng, allWords, int(rng, 2, 5));
      return task(rng, "Reverse the order of the words.", words.join(" "), [...words].reverse().join(" "));
    },
  },
  {
    name: "sort",
    make(rng) {
      const kind = int(rng, 0, 2);
      if (kind === 0) {
        const numbers = Array.from({ length: int(rng, 3, 6) }, () => int(rng, 0, 99));
        const descending = chance(rng, 0.3);
        const sorted = [...numbers].sort((a, b) => (descending ? b - a : a - b));
        return task(
          rng,
          descending ? "Sort the numbers from largest to smallest." : "Sort the numbers from smallest to largest.",
          numbers.join(" "),
          sorted.join(" "),
        );
      }
      if (kind === 1) {
        const words = distinct(rng, allWords, int(rng, 3, 5));
        return task(rng, "Sort the words alphabetically.", words.join(" "), [...words].sort().join(" "));
      }
      const w = randomWord(rng, 3, 7);
      return task(rng, "Sort the letters of the word.", w, [...w].sort().join(""));
    },
  },
  {
    name: "count",
    make(rng) {
      const kind = int(rng, 0, 2);
      if (kind === 0) {
        const w = word(rng);
        return task(rng, "How many letters are in the word?", w, w.length);
      }
      if (kind === 1) {
        const items = Array.from({ length: int(rng, 1, 9) }, () => word(rng));
        return task(rng, pick(rng, ["How many words are there?", "Count the words."]), items.join(" "), items.length);
      }
      const letter = pick(rng, [..."aeiorst"]);
      const text = Array.from({ length: int(rng, 1, 3) }, () => word(rng)).join(" ");
      return task(rng, `How many times does the letter ${letter} appear?`, text, [...text].filter((c) => c === letter).length);
    },
  },
  {
    name: "compare",
    make(rng) {
      const kind = int(rng, 0, 2);
      const [a, b] = distinct(
        rng,
        Array.from({ length: 200 }, (_, i) => i),
        2,
      ) as [number, number];
      if (kind === 0) {
        const larger = chance(rng, 0.5);
        return task(rng, larger ? `Which is larger, ${a} or ${b}?` : `Which is smaller, ${a} or ${b}?`, "", larger ? Math.max(a, b) : Math.min(a, b));
      }
      if (kind === 1) {
        const more = chance(rng, 0.5);
        return task(rng, `Is ${a} ${more ? "more" : "less"} than ${b}? Answer yes or no.`, "", (more ? a > b : a < b) ? "yes" : "no");
      }
      const [x, y] = distinct(rng, allWords, 2) as [string, string];
      return task(rng, `Which comes first in the alphabet, ${x} or ${y}?`, "", x < y ? x : y);
    },
  },
  {
    name: "extract-number",
    make(rng) {
      const n = int(rng, 0, 999);
      const thing = pick(rng, [...categories.animal, ...categories.fruit]);
      const sentence = pick(rng, [
        `There are ${n} ${thing}s in the yard.`,
        `The box holds ${n} ${thing}s.`,
        `I counted ${n} ${thing}s today.`,
        `${n} ${thing}s left the farm.`,
        `score: ${n}`,
        `You have ${n} points.`,
      ]);
      return task(rng, pick(rng, ["What is the number?", "Extract the number.", "Answer with the number only."]), sentence, n);
    },
  },
  {
    name: "arithmetic",
    make(rng) {
      const op = int(rng, 0, 2);
      const a = op === 2 ? int(rng, 2, 12) : int(rng, 0, 99);
      const b = op === 2 ? int(rng, 2, 12) : op === 1 ? int(rng, 0, a) : int(rng, 0, 99);
      const [symbol, word, value] = op === 0 ? ["+", "plus", a + b] : op === 1 ? ["-", "minus", a - b] : ["*", "times", a * b];
      return task(rng, pick(rng, [`${a}${symbol}${b}=`, `What is ${a} ${word} ${b}?`, `Compute ${a} ${symbol} ${b}.`]), "", value);
    },
  },
  {
    name: "instruction",
    make(rng) {
      const kind = int(rng, 0, 4);
      const w = word(rng);
      if (kind === 0) {
        const n = int(rng, 1, 4);
        return task(rng, `Write the word ${w} ${["once", "twice", "three times", "four times"][n - 1]}.`, "", Array.from({ length: n }, () => w).join(" "));
      }
      if (kind === 1) return task(rng, "Write the word in capitals.", w, w.toUpperCase());
      if (kind === 2) return task(rng, pick(rng, ["What is the first letter of the word?", "Write the first letter."]), w, w[0]!);
      if (kind === 3) return task(rng, pick(rng, ["What is the last letter of the word?", "Write the last letter."]), w, w.at(-1)!);
      const words = distinct(rng, allWords, int(rng, 2, 5));
      const first = chance(rng, 0.5);
      return task(rng, first ? "Write the first word." : "Write the last word.", words.join(" "), first ? words[0]! : words.at(-1)!);
    },
  },
  {
    name: "one-word",
    make(rng) {
      const category = pick(rng, categoryNames);
      const kind = int(rng, 0, 1);
      if (kind === 0) {
        const w = chance(rng, 0.5) ? pick(rng, categories[category]) : pick(rng, allWords);
        const yes = (categories[category] as readonly string[]).includes(w);
        return task(rng, `Is ${w} a ${category}? Answer yes or no.`, "", yes ? "yes" : "no");
      }
      const w = pick(rng, categories[category]);
      return task(rng, "Answer in one word: what kind of thing is it?", w, category);
    },
  },
  {
    name: "several-turns",
    make(rng) {
      const kind = int(rng, 0, 2);
      const system = pick(rng, genericSystems);
      const turns: ChatMessage[] = [{ role: "system", content: system }];
      if (kind === 0) {
        let n = int(rng, 0, 60);
        turns[0] = { role: "system", content: "Count up by one." };
        turns.push({ role: "user", content: `Start at ${n}.` }, { role: "assistant", content: String(n) });
        for (let i = int(rng, 1, 5); i > 0; i--)
          turns.push({ role: "user", content: pick(rng, ["next", "Next.", "go on"]) }, { role: "assistant", content: String(++n) });
      } else if (kind === 1) {
        let total = 0;
        turns[0] = { role: "system", content: "Keep a running total. Reply with the total." };
        for (let i = int(rng, 2, 6); i > 0; i--) {
          const add = int(rng, 1, 9);
          total += add;
          turns.push({ role: "user", content: `Add ${add}.` }, { role: "assistant", content: String(total) });
        }
      } else {
        const w = word(rng);
        turns.push({ role: "user", content: `Remember the word ${w}.` }, { role: "assistant", content: "ok" });
        for (let i = int(rng, 0, 3); i > 0; i--) {
          const [system, user, reply] = skills[int(rng, 1, 8)]!.make(rng) as [ChatMessage, ChatMessage, ChatMessage];
          turns.push(genericSystems.includes(system.content) ? user : { role: "user", content: `${system.content} ${user.content}` }, reply);
        }
        turns.push({ role: "user", content: "What was the word?" }, { role: "assistant", content: w });
      }
      return turns;
    },
  },
];

export const generalistSkills: readonly Skill[] = skills;

/** Skills the corpus never holds: what the base does on them says how far it generalizes. */
export const heldOutSkills: readonly Skill[] = [
  {
    name: "next-letter",
    make: (rng) => {
      const i = int(rng, 0, 24);
      return task(rng, "Which letter comes next in the alphabet?", letters[i]!, letters[i + 1]!);
    },
  },
  {
    name: "count-vowels",
    make: (rng) => {
      const w = word(rng);
      return task(rng, "How many vowels are in the word?", w, [...w].filter((c) => "aeiou".includes(c)).length);
    },
  },
  {
    name: "double",
    make: (rng) => {
      const n = int(rng, 1, 49);
      return task(rng, "Double the number.", String(n), 2 * n);
    },
  },
  {
    name: "swap-words",
    make: (rng) => {
      const [a, b] = distinct(rng, allWords, 2) as [string, string];
      return task(rng, "Swap the two words.", `${a} ${b}`, `${b} ${a}`);
    },
  },
];

/** Tokens of a conversation in the chat template (bos, then role, content and end per message; ASCII text). */
const chatLength = (conversation: Conversation) => 1 + conversation.reduce((n, m) => n + 2 + m.content.length, 0);

/** A conversation of a random skill (uniform over the corpus's skills) that fits `contextLength` tokens. */
export function generalistConversation(rng: Rng, contextLength = generalistRecipe.model.contextLength): Conversation {
  for (;;) {
    const conversation = pick(rng, skills).make(rng);
    if (chatLength(conversation) <= contextLength) return conversation;
  }
}

/** The generalist base's recipe: bin/make-base-models.ts trains it (`--only generalist-base`). */
export const generalistRecipe = {
  model: { vocabSize: 262, contextLength: 256, dModel: 128, nLayers: 4, nHeads: 4 } satisfies GPTConfig,
  /**
   * promptWeight: the system and user turns are trained on too, at this weight: reading the prompt is most of
   * what the skills need, and reply tokens alone (about 7 per conversation) gave too little signal (after 2,000
   * steps the reply-only model copied no word exactly).
   */
  sft: { steps: 4000, batch: 32, learningRate: 2e-3, promptWeight: 0.3, seed: 7 },
};

/** Generation seeds of held-out evaluation conversations start here, apart from any training seed. */
export const GENERALIST_EVAL_SEED = 9_000_000;

/** `count` conversations of `skill` for evaluation, the same ones on every call. */
export function evaluationConversations(skill: Skill, count: number): Conversation[] {
  let hash = 0;
  for (const char of skill.name) hash = (hash * 31 + char.charCodeAt(0)) >>> 0;
  const rng = new Rng(GENERALIST_EVAL_SEED + (hash % 1_000_000));
  return Array.from({ length: count }, () => skill.make(rng));
}

/**
 * Each skill's held-out score: the share of its evaluation conversations whose last reply the policy writes
 * exactly (greedy, the earlier turns given as they are).
 */
export async function scoreSkills(policy: PolicyModel, of: readonly Skill[], count = 50): Promise<Record<string, number>> {
  const scores: Record<string, number> = {};
  for (const skill of of) {
    const conversations = evaluationConversations(skill, count);
    const prompts = conversations.map((c) => policy.tokenizer.encodeChat(c.slice(0, -1), { addGenerationPrompt: true }));
    const { samples } = await policy.primitives.sample(prompts, 1, { maxTokens: 24, temperature: 0 });
    scores[skill.name] = samples.filter((row, i) => row[0]!.text.trim() === conversations[i]!.at(-1)!.content).length / count;
  }
  return scores;
}
