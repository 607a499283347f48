import { defineEnvironment } from "tinkerlab";

// One turn: the agent rewrites a lowercase word with its first letter in upper case ("river" -> "River").
const WORDS = [
  "cat",
  "dog",
  "sun",
  "red",
  "box",
  "cup",
  "hat",
  "map",
  "pen",
  "sky",
  "tree",
  "fish",
  "bird",
  "milk",
  "door",
  "rain",
  "lamp",
  "book",
  "frog",
  "ship",
  "river",
  "apple",
  "chair",
  "house",
  "green",
  "stone",
  "cloud",
  "bread",
  "water",
  "light",
  "garden",
  "yellow",
  "orange",
  "castle",
  "pencil",
  "window",
  "winter",
  "forest",
  "silver",
  "rabbit",
];
type State = { word: string; answer: string | null };
const target = (s: State) => s.word[0].toUpperCase() + s.word.slice(1);

export default defineEnvironment<State, string>({
  name: "capitalize-word",
  description: "Write a lowercase word with its first letter in upper case.",
  data: { kind: "free" },
  systemPrompt: "Write the word with its first letter in upper case.",
  maxTurns: 1,
  reset({ rng }) {
    const word = WORDS[Math.floor(rng.uniform() * WORDS.length)];
    return { state: { word, answer: null }, observation: word };
  },
  actions: { pattern: "[A-Za-z]{1,12}" }, // letters only
  parseAction(text) {
    const t = text.trim();
    return /^[A-Za-z]+$/.test(t) ? { ok: true, action: t } : { ok: false, error: "expected a word of letters" };
  },
  step(state, answer) {
    return { state: { ...state, answer }, reward: answer === target(state) ? 1 : 0, done: true };
  },
  demonstrate: target,
  score: ({ state }) => (state.answer === target(state) ? 1 : 0),
  scoreName: "accuracy",
});
