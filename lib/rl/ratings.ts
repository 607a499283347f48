/**
 * Elo ratings from recorded games: a Bradley–Terry model fitted by maximum likelihood, with bootstrap intervals.
 *
 * The model: member i has a strength θ_i, and i scores against j with probability σ(θ_i − θ_j), σ the logistic
 * function. On the Elo scale a rating is 400·log10(e^θ) = θ·400/ln 10, so a gap of 400 points is 10:1 odds
 * (i expected to score 91%), 200 points 76%, 100 points 64%. A draw counts as half a win to each side.
 *
 * The prior: every member is also credited with `priorDraws` drawn games against a fixed reference of strength 0.
 * Without it a member that won every game has no finite maximum (its rating grows without bound); with it the
 * rating is finite and the pull towards the reference fades as real games accumulate (2 virtual games are a few
 * percent of 50 real ones).
 *
 * The anchor: only differences between ratings are identified, so the scale is pinned after the fit. By default
 * the mean rating of the members is `anchor.rating` (1000); alternatively one member is pinned there (the first
 * snapshot of a run, say), and every other rating reads as "points above that one".
 */
import { Rng } from "@/lib/model/rng";

/** One game: `score` is a's result against b, 1 a win, 0.5 a draw, 0 a loss (fractions in between are allowed). */
export type GameRecord = { a: string; b: string; score: number };

export type RatingOptions = {
  /** Virtual drawn games of each member against a reference at the anchor: keeps an undefeated member finite. Default 2. */
  priorDraws?: number;
  /**
   * Where the scale sits: `{ to: "mean" }` (default) puts the members' mean at `rating`; `{ to: "member", id }`
   * pins that member at `rating`, whose interval is then zero-width and every other interval includes its
   * uncertainty. `rating` defaults to 1000.
   */
  anchor?: { to: "mean"; rating?: number } | { to: "member"; id: string; rating?: number };
  /** Bootstrap resamples of the games for the intervals (0: no intervals, low = high = rating). Default 500. */
  resamples?: number;
  /** Seed of the bootstrap's resampling, so a table is reproducible. Default 0. */
  seed?: number;
  /** Coverage of the interval. Default 0.95 (the 2.5th to the 97.5th percentile of the resampled ratings). */
  level?: number;
};

export type Rating = {
  id: string;
  /** The maximum-likelihood Elo rating, on the anchored scale. */
  rating: number;
  /** The bootstrap interval: `level` of the resampled ratings lie between low and high. */
  low: number;
  high: number;
  games: number;
  wins: number;
  draws: number;
  losses: number;
};

/** The Elo points per unit of θ: 400 / ln 10. */
const eloPerNat = 400 / Math.LN10;

/** The expected score of a player rated `a` against one rated `b` (0.76 for a 200-point lead). */
export function expectedScore(a: number, b: number): number {
  return 1 / (1 + 10 ** ((b - a) / 400));
}

/**
 * Fits the ratings of `members` (every id a game names must be among them) and, unless `resamples` is 0, their
 * bootstrap intervals. Returns one row per member, in the order given.
 */
export function fitRatings(members: readonly string[], games: readonly GameRecord[], options: RatingOptions = {}): Rating[] {
  const priorDraws = options.priorDraws ?? 2;
  const anchor = options.anchor ?? { to: "mean" };
  const anchorRating = anchor.rating ?? 1000;
  const resamples = options.resamples ?? 500;
  const level = options.level ?? 0.95;
  if (!(priorDraws >= 0) || !Number.isFinite(priorDraws)) throw new Error(`priorDraws must be a finite number ≥ 0; got ${priorDraws}`);
  if (!(level > 0 && level < 1)) throw new Error(`level must lie strictly between 0 and 1; got ${level}`);
  if (!Number.isInteger(resamples) || resamples < 0) throw new Error(`resamples must be a whole number ≥ 0; got ${resamples}`);
  const index = new Map(members.map((id, i) => [id, i]));
  if (index.size !== members.length) throw new Error(`member ids must be distinct; got ${members.join(", ")}`);
  const pinned = anchor.to === "member" ? index.get(anchor.id) : undefined;
  if (anchor.to === "member" && pinned === undefined) throw new Error(`anchor member '${anchor.id}' is not among the members (${members.join(", ")})`);
  const encoded = games.map((game, g) => {
    const a = index.get(game.a);
    const b = index.get(game.b);
    if (a === undefined || b === undefined) throw new Error(`game ${g} names '${a === undefined ? game.a : game.b}', who is not a member`);
    if (a === b) throw new Error(`game ${g} pits '${game.a}' against itself`);
    if (!(game.score >= 0 && game.score <= 1)) throw new Error(`game ${g}: score must lie in [0, 1] (1 a win for a, 0.5 a draw); got ${game.score}`);
    return { a, b, score: game.score };
  });

  const k = members.length;
  const toElo = (theta: Float64Array) => {
    const shift = pinned !== undefined ? theta[pinned]! : theta.reduce((s, t) => s + t, 0) / Math.max(k, 1);
    return Array.from(theta, (t) => anchorRating + (t - shift) * eloPerNat);
  };
  const ratings = toElo(fitStrengths(k, encoded, priorDraws));

  const low = ratings.slice();
  const high = ratings.slice();
  if (resamples > 0 && encoded.length > 0) {
    const rng = new Rng(options.seed ?? 0);
    const draws: number[][] = Array.from({ length: k }, () => []);
    const resampled = new Array<(typeof encoded)[number]>(encoded.length);
    for (let r = 0; r < resamples; r++) {
      for (let g = 0; g < encoded.length; g++) resampled[g] = encoded[Math.floor(rng.uniform() * encoded.length)]!;
      toElo(fitStrengths(k, resampled, priorDraws)).forEach((rating, i) => draws[i]!.push(rating));
    }
    const tail = (1 - level) / 2;
    draws.forEach((values, i) => {
      values.sort((x, y) => x - y);
      low[i] = quantile(values, tail);
      high[i] = quantile(values, 1 - tail);
    });
  }

  return members.map((id, i) => {
    let wins = 0;
    let draws = 0;
    let losses = 0;
    for (const game of encoded) {
      if (game.a !== i && game.b !== i) continue;
      const own = game.a === i ? game.score : 1 - game.score;
      if (own === 0.5) draws++;
      else if (own > 0.5) wins++;
      else losses++;
    }
    return { id, rating: ratings[i]!, low: low[i]!, high: high[i]!, games: wins + draws + losses, wins, draws, losses };
  });
}

/** The value below which a fraction `q` of the sorted `values` lies, interpolating between neighbours. */
function quantile(sorted: number[], q: number): number {
  const at = q * (sorted.length - 1);
  const lo = Math.floor(at);
  const hi = Math.min(lo + 1, sorted.length - 1);
  return sorted[lo]! + (sorted[hi]! - sorted[lo]!) * (at - lo);
}

/**
 * The maximum-likelihood strengths θ (natural-log scale, the reference at 0) by Newton's method on the concave
 * log-likelihood, halving a step that would lower it. Games are first summed per pair: `scored[i·k + j]` is what
 * i scored against j over `played[i·k + j]` games.
 */
function fitStrengths(k: number, games: readonly { a: number; b: number; score: number }[], priorDraws: number): Float64Array {
  const played = new Float64Array(k * k);
  const scored = new Float64Array(k * k);
  for (const { a, b, score } of games) {
    played[a * k + b]! += 1;
    played[b * k + a]! += 1;
    scored[a * k + b]! += score;
    scored[b * k + a]! += 1 - score;
  }
  const theta = new Float64Array(k);
  // With no prior and a member who won (or lost) everything the maximum is at infinity: stop the climb there.
  const maxIterations = 100;
  let current = logLikelihood(theta, k, played, scored, priorDraws);
  const gradient = new Float64Array(k);
  const hessian = new Float64Array(k * k); // the negated Hessian: positive definite under a prior
  for (let iteration = 0; iteration < maxIterations; iteration++) {
    gradient.fill(0);
    hessian.fill(0);
    for (let i = 0; i < k; i++) {
      const p0 = sigmoid(theta[i]!);
      gradient[i]! += priorDraws * (0.5 - p0);
      hessian[i * k + i]! += priorDraws * p0 * (1 - p0);
      for (let j = 0; j < k; j++) {
        const n = played[i * k + j]!;
        if (n === 0) continue;
        const p = sigmoid(theta[i]! - theta[j]!);
        gradient[i]! += scored[i * k + j]! - n * p;
        const curvature = n * p * (1 - p);
        hessian[i * k + i]! += curvature;
        hessian[i * k + j]! -= curvature;
      }
    }
    // Without a prior the likelihood is flat along θ + c: pin the mean by a tiny ridge, which moves no difference.
    if (priorDraws === 0) for (let i = 0; i < k; i++) hessian[i * k + i]! += 1e-9;
    const step = solveSymmetric(hessian, gradient, k);
    let scale = 1;
    const trial = new Float64Array(k);
    let next = current;
    for (let halvings = 0; halvings < 30; halvings++, scale /= 2) {
      for (let i = 0; i < k; i++) trial[i] = theta[i]! + scale * step[i]!;
      next = logLikelihood(trial, k, played, scored, priorDraws);
      if (next >= current - 1e-12) break;
    }
    theta.set(trial);
    const largest = step.reduce((m, s) => Math.max(m, Math.abs(s * scale)), 0);
    current = next;
    if (largest < 1e-10) break;
  }
  return theta;
}

function logLikelihood(theta: Float64Array, k: number, played: Float64Array, scored: Float64Array, priorDraws: number): number {
  let total = 0;
  for (let i = 0; i < k; i++) {
    total += (priorDraws / 2) * (logSigmoid(theta[i]!) + logSigmoid(-theta[i]!));
    for (let j = 0; j < k; j++) if (played[i * k + j]! > 0) total += scored[i * k + j]! * logSigmoid(theta[i]! - theta[j]!);
  }
  return total;
}

const sigmoid = (x: number) => 1 / (1 + Math.exp(-x));
/** log σ(x), without underflow for large |x|. */
const logSigmoid = (x: number) => (x >= 0 ? -Math.log1p(Math.exp(-x)) : x - Math.log1p(Math.exp(x)));

/** Solves A·x = b for a symmetric positive (semi)definite A by Cholesky; a zero pivot (a member with no games and no prior) yields 0 there. */
function solveSymmetric(matrix: Float64Array, b: Float64Array, k: number): Float64Array {
  const l = new Float64Array(k * k);
  for (let i = 0; i < k; i++) {
    for (let j = 0; j <= i; j++) {
      let sum = matrix[i * k + j]!;
      for (let m = 0; m < j; m++) sum -= l[i * k + m]! * l[j * k + m]!;
      if (i === j) l[i * k + i] = sum > 1e-300 ? Math.sqrt(sum) : 0;
      else l[i * k + j] = l[j * k + j]! > 0 ? sum / l[j * k + j]! : 0;
    }
  }
  const y = new Float64Array(k);
  for (let i = 0; i < k; i++) {
    let sum = b[i]!;
    for (let m = 0; m < i; m++) sum -= l[i * k + m]! * y[m]!;
    y[i] = l[i * k + i]! > 0 ? sum / l[i * k + i]! : 0;
  }
  const x = new Float64Array(k);
  for (let i = k - 1; i >= 0; i--) {
    let sum = y[i]!;
    for (let m = i + 1; m < k; m++) sum -= l[m * k + i]! * x[m]!;
    x[i] = l[i * k + i]! > 0 ? sum / l[i * k + i]! : 0;
  }
  return x;
}
