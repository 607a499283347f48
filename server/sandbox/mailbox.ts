/**
 * The memory the host thread shares with the sandbox's thread (host and thread only: the guest never sees it). As
 * Int32, [ANSWERED] is 1 once the batch's answer is given, [CURRENT_OP] the index of the op running (-1 for
 * none); as Float64, [OP_STARTED_AT] when that op started (epoch milliseconds) and [OP_CPU_AT] the process's CPU
 * clock then (`processCpuMs`).
 *
 * The rest is the mailbox a batch and its answer cross in (`Mailbox`), so that neither thread posts a message:
 * the thread sleeps in `Atomics.wait` and the host wakes it with `Atomics.notify`. After a few milliseconds
 * asleep, a batch's round trip took 113-162 µs this way against 245-323 µs through a port's message and the
 * thread's event loop (docs/SANDBOX.md); the host thread pays about the same either way to wake the other
 * (~100 µs inside a rollout on this project's 2-core VMs, where it is the hypervisor's to wake an idle core).
 *
 * As Int32: [REQUESTED] counts the batches posted (the sandbox's thread waits on it); [REQUEST_BYTES] the length
 * of the batch's text in the text area, or `ON_PORT` when it was posted as a message instead (too long for the
 * mailbox); [REQUEST_COUNT] its ops; [UNIFORM_BUDGET] 1 when every op has the budget at Float64 [BUDGET_MS], else
 * 0 and the budgets are in the number area; [ANSWER_BYTES] and [ANSWER_COUNT] the same for the answer, whose
 * ops' times are in the number area and the heap's size at Float64 [ANSWER_MEMORY_MB]. A failed batch's answer
 * always comes as a message.
 */
export const ANSWERED = 0;
export const CURRENT_OP = 1;
export const OP_STARTED_AT = 1;
export const OP_CPU_AT = 2;
export const REQUESTED = 6;
export const REQUEST_BYTES = 7;
export const REQUEST_COUNT = 8;
export const UNIFORM_BUDGET = 9;
export const ANSWER_BYTES = 10;
export const ANSWER_COUNT = 11;
export const BUDGET_MS = 8;
export const ANSWER_MEMORY_MB = 9;
/**
 * As Float64: when the thread took the last batch ([BATCH_STARTED_AT]) and when it had run it, before writing the
 * answer ([BATCH_RAN_AT]), epoch milliseconds: the host reads them as it takes the answer (a probe's `crossing`).
 */
export const BATCH_STARTED_AT = 12;
export const BATCH_RAN_AT = 13;
/** A request or answer length that says it went as a message on the port. */
export const ON_PORT = -1;
/** The mailbox's number area: this many ops' budgets or times. */
export const mailboxOps = 8_192;
/** The mailbox's text area, in bytes of UTF-8: a crossing's ops or answers longer than this go as messages. */
export const mailboxTextBytes = 1 << 20;
const numbersAt = 128;
const textAt = numbersAt + mailboxOps * 8;
export const sharedBytes = textAt + mailboxTextBytes;

/** The views of the shared memory both threads use. */
export function sharedViews(shared: SharedArrayBuffer) {
  return {
    control: new Int32Array(shared, 0, 32),
    clock: new Float64Array(shared, 0, 16),
    numbers: new Float64Array(shared, numbersAt, mailboxOps),
    text: new Uint8Array(shared, textAt, mailboxTextBytes),
  };
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** Writes `value` to the text area as UTF-8: its length in bytes, or `ON_PORT` when it does not fit. */
export function writeText(text: Uint8Array, value: string): number {
  // Every UTF-16 unit takes at least a byte: longer text cannot fit, and is not encoded at all.
  if (value.length > text.length) return ON_PORT;
  const { read, written } = encoder.encodeInto(value, text);
  return read === value.length ? written : ON_PORT;
}

/** The text area's first `bytes` bytes, decoded. */
export function readText(text: Uint8Array, bytes: number): string {
  return decoder.decode(text.subarray(0, bytes));
}

/** A batch: the ops as one JSON text (wire.ts `encodeRequest`), and each op's CPU budget. */
export type MailboxRequest = { ops: string; budgetsMs: Float64Array };
/** A batch's answer: the records as one JSON text (wire.ts GuestResponse), each op's time, the heap's size. */
export type MailboxAnswer = { results: string; ms: number[]; memoryMb: number };

/**
 * One side's view of the mailbox. The host `post`s a batch and `take`s its answer once ANSWERED is set; the
 * sandbox's thread `receive`s the batch once REQUESTED has moved and `answer`s it. Each returns false (or null)
 * when the message did not fit, and the caller sends or reads it on the port instead.
 */
export class Mailbox {
  readonly control: Int32Array;
  readonly clock: Float64Array;
  private readonly numbers: Float64Array;
  private readonly text: Uint8Array;

  constructor(shared: SharedArrayBuffer) {
    ({ control: this.control, clock: this.clock, numbers: this.numbers, text: this.text } = sharedViews(shared));
  }

  /** Host: writes a batch (its budgets: one number when all are the same); false when it must go on the port. */
  post(ops: string, budgetsMs: ArrayLike<number>): boolean {
    const { control } = this;
    const ms = budgetsMs[0] ?? 0;
    let uniform = true;
    for (let i = 1; i < budgetsMs.length && uniform; i++) uniform = budgetsMs[i] === ms;
    const bytes = uniform || budgetsMs.length <= mailboxOps ? writeText(this.text, ops) : ON_PORT;
    if (bytes !== ON_PORT) {
      control[REQUEST_COUNT] = budgetsMs.length;
      control[UNIFORM_BUDGET] = uniform ? 1 : 0;
      if (uniform) this.clock[BUDGET_MS] = ms;
      else for (let i = 0; i < budgetsMs.length; i++) this.numbers[i] = budgetsMs[i]!;
    }
    control[REQUEST_BYTES] = bytes;
    return bytes !== ON_PORT;
  }

  /** Thread: the batch posted, or null when it came on the port. */
  receive(): MailboxRequest | null {
    const { control } = this;
    const bytes = control[REQUEST_BYTES]!;
    if (bytes === ON_PORT) return null;
    const count = control[REQUEST_COUNT]!;
    const budgetsMs = control[UNIFORM_BUDGET] === 1 ? new Float64Array(count).fill(this.clock[BUDGET_MS]!) : this.numbers.slice(0, count);
    return { ops: readText(this.text, bytes), budgetsMs };
  }

  /** Thread: writes a successful batch's answer; false when it must go on the port (so must a failure). */
  answer(answer: MailboxAnswer | null): boolean {
    const bytes = answer && answer.ms.length <= mailboxOps ? writeText(this.text, answer.results) : ON_PORT;
    if (answer && bytes !== ON_PORT) {
      this.numbers.set(answer.ms);
      this.control[ANSWER_COUNT] = answer.ms.length;
      this.clock[ANSWER_MEMORY_MB] = answer.memoryMb;
    }
    this.control[ANSWER_BYTES] = bytes;
    return bytes !== ON_PORT;
  }

  /** Host: the batch's answer, or null when it came on the port. */
  take(): MailboxAnswer | null {
    const bytes = this.control[ANSWER_BYTES]!;
    if (bytes === ON_PORT) return null;
    const count = this.control[ANSWER_COUNT]!;
    return { results: readText(this.text, bytes), ms: Array.from(this.numbers.subarray(0, count)), memoryMb: this.clock[ANSWER_MEMORY_MB]! };
  }
}
