/** The generator behind the shipped word-problems dataset (see bin/make-datasets.ts). Deterministic per seed. */
import { Rng } from "@/lib/model/rng";
import { calculate } from "./tool-use";

type Template = { text: (a: number, b: number) => string; expression: (a: number, b: number) => string; operands: (rng: Rng) => [number, number] };

const between = (rng: Rng, lo: number, hi: number) => lo + Math.floor(rng.uniform() * (hi - lo + 1));

const TEMPLATES: Template[] = [
  {
    text: (a, b) => `A box holds ${a} apples. How many apples are in ${b} boxes?`,
    expression: (a, b) => `${a}*${b}`,
    operands: (r) => [between(r, 12, 99), between(r, 12, 99)],
  },
  {
    text: (a, b) => `Ann has ${a} coins and finds ${b} more. How many coins now?`,
    expression: (a, b) => `${a}+${b}`,
    operands: (r) => [between(r, 100, 999), between(r, 100, 999)],
  },
  {
    text: (a, b) => `A tank holds ${a} liters. ${b} liters leak out. How many are left?`,
    expression: (a, b) => `${a}-${b}`,
    operands: (r) => {
      const a = between(r, 200, 999);
      return [a, between(r, 100, a - 1)];
    },
  },
  {
    text: (a, b) => `${a} cards are shared by ${b} kids equally. How many each?`,
    expression: (a, b) => `${a}/${b}`,
    operands: (r) => {
      const b = between(r, 3, 19);
      return [b * between(r, 11, 49), b];
    },
  },
  {
    text: (a, b) => `A bus has ${a} rows of ${b} seats. How many seats?`,
    expression: (a, b) => `${a}*${b}`,
    operands: (r) => [between(r, 11, 49), between(r, 3, 9)],
  },
];

export type WordProblem = { question: string; expression: string; answer: number; split: "train" | "test" };

export function generateWordProblems(seed: number, count: number, testShare = 0.2): WordProblem[] {
  const rng = new Rng(seed);
  const out: WordProblem[] = [];
  for (let i = 0; i < count; i++) {
    const template = TEMPLATES[i % TEMPLATES.length]!;
    const [a, b] = template.operands(rng);
    const expression = template.expression(a, b);
    // The answer comes from the calculator itself, so a dataset row can never disagree with the tool.
    const answer = calculate(expression);
    out.push({ question: template.text(a, b), expression, answer, split: rng.uniform() < testShare ? "test" : "train" });
  }
  return out;
}
