#!/usr/bin/env python3
"""
Who kept a thread off a core, from a scheduler trace (docs/SANDBOX.md). Linux only, as root:

  mount -t tracefs nodev /sys/kernel/tracing   # if not mounted
  perf record -o /tmp/sched.data -e sched:sched_switch,sched:sched_wakeup -a -- npm run bench:sandbox-anatomy -- --seconds 15
  perf script -i /tmp/sched.data > /tmp/sched.txt
  python3 bench/lib/sched-trace.py /tmp/sched.txt HOST_TID SANDBOX_TID

HOST_TID is the bench process's pid (its main thread); SANDBOX_TID the sandbox's thread (the one that runs most
after the host, /proc/PID/task/*/schedstat). For the sandbox's thread: its wake-ups (on the waker's core or
another), how long each waited to run, and what held the core meanwhile; for the host thread: each time it was
preempted (switched out still runnable), for how long and by what.
"""
import collections
import re
import sys

LINE = re.compile(r"^\s*(.+?)\s+(\d+)\s+\[(\d+)\]\s+([\d.]+):\s+sched:(\w+):\s+(.*)$")
SWITCH = re.compile(r"prev_comm=(.*?) prev_pid=(\d+) prev_prio=\d+ prev_state=(\S+) ==> next_comm=(.*?) next_pid=(\d+)")


def events(path):
    with open(path) as lines:
        for line in lines:
            match = LINE.match(line)
            if match:
                _, _, cpu, ts, event, rest = match.groups()
                yield int(cpu), float(ts), event, rest


def quantile(values, q):
    return values[min(len(values) - 1, int(len(values) * q))] if values else 0.0


def main(path, host, sandbox):
    running = {}  # core -> "comm:pid" running there
    pending = None  # the sandbox's last wake-up: (time, target core)
    waits, placed, held = [], collections.Counter(), collections.Counter()
    preempted, by, times = None, collections.Counter(), collections.Counter()
    for cpu, ts, event, rest in events(path):
        if event == "sched_wakeup":
            fields = dict(re.findall(r"(\w+)=(\S+)", rest))
            if fields.get("pid") == sandbox:
                target = int(fields["target_cpu"])
                pending = (ts, target)
                placed["on the waker's core" if target == cpu else "on another core"] += 1
        elif event == "sched_switch":
            switch = SWITCH.search(rest)
            if not switch:
                continue
            _, prev_pid, prev_state, next_comm, next_pid = switch.groups()
            if next_pid == sandbox and pending:
                waited = ts - pending[0]
                waits.append(waited)
                if waited > 200e-6:
                    held[running.get(pending[1], "?")] += waited
                pending = None
            if prev_pid == host and prev_state.startswith("R"):
                preempted = (ts, f"{next_comm}:{next_pid}")
            elif next_pid == host and preempted:
                by[preempted[1]] += ts - preempted[0]
                times[preempted[1]] += 1
                preempted = None
            elif next_pid == host:
                preempted = None
            running[cpu] = f"{next_comm}:{next_pid}"
    waits.sort()
    print(f"sandbox thread {sandbox}: {len(waits)} wake-ups, {dict(placed)}")
    print(f"  waited to run: p50 {quantile(waits, 0.5) * 1e6:.0f} µs, p90 {quantile(waits, 0.9) * 1e6:.0f} µs, "
          f"p99 {quantile(waits, 0.99) * 1e6:.0f} µs, {sum(waits) * 1e3:.1f} ms in all")
    print("  waits over 200 µs, by what ran on its core when it woke (swapper: the core was idle):")
    for task, seconds in held.most_common(8):
        print(f"    {task:<28} {seconds * 1e3:7.1f} ms")
    print(f"host thread {host}: preempted {sum(times.values())} times, {sum(by.values()) * 1e3:.1f} ms in all, by:")
    for task, seconds in by.most_common(10):
        print(f"    {task:<28} {seconds * 1e3:7.1f} ms  {times[task]:5d} times")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit("usage: sched-trace.py PERF_SCRIPT_TEXT HOST_TID SANDBOX_TID")
    main(*sys.argv[1:])
