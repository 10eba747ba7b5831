#!/usr/bin/env python3
"""Generates testdata/good/{history.edn,ledger.edn} and testdata/good-json/{history.jsonl,ledger.jsonl}.

A small discrete-event simulation of a *correct* idem store under faults: every operation takes
effect atomically at one instant between its invocation and completion (or, when it timed out or
crashed, possibly never), so the history is linearizable by construction. It exercises the
checkers' tolerance of :info completions, crashed processes (invocations that never complete,
followed by a fresh process number), lease takeovers, stale fences refused, fingerprint
mismatches and ledger duplicates. Deterministic (fixed seed). Run from the jepsen/ directory.
"""
import heapq, json, os, random

rng = random.Random(7)
MS = 1_000_000
S = 1000 * MS
DURATION = 30 * S
LEASE = 300 * MS
TIMEOUT = 1 * S
WORKERS = 6
PARTITION = (5 * S, 9 * S)   # workers 0 and 1 are cut off: their ops time out
KILL = (14 * S, 16 * S)      # workers 2 and 3 crash mid-operation, then come back
PAUSE = (20 * S, 22 * S)     # everything slows down
MEMBERSHIP = 25 * S

store = {}       # key -> record
ledger = []      # ledger entries
executed = set()
entries = []     # (time, seq, op dict)
seq = 0
op_ids = 0

def emit(t, op):
    global seq
    seq += 1
    entries.append((t, seq, op))

def kw(s):
    return ("kw", s)

def apply(t, f, v):
    """Applies one operation atomically at time t; returns (type, value, error)."""
    global op_ids
    k = v["key"]
    r = store.get(k)
    if f == "claim":
        out = dict(v)
        if r is None:
            op_ids += 1
            r = store[k] = {"body": v["body"], "state": "pending", "fence": 1,
                            "lease": t + LEASE, "id": f"op-{op_ids:04d}", "result": None}
            out.update(outcome=kw("acquired"), fence=1)
        elif r["body"] != v["body"]:
            out.update(outcome=kw("fingerprint-mismatch"))
            return "ok", out, None
        elif r["state"] == "completed":
            out.update(outcome=kw("completed"), result=r["result"])
        elif r["lease"] > t:
            out.update(outcome=kw("in-progress"))
        else:
            r["fence"] += 1
            r["lease"] = t + LEASE
            out.update(outcome=kw("taken-over"), fence=r["fence"])
        out["operation-id"] = r["id"]
        return "ok", out, None
    if f in ("call", "complete"):
        if r is None or r["fence"] != v["fence"] or r["state"] == "completed":
            if f == "complete" and r and r["state"] == "completed" and r["result"] == v["result"] and r["fence"] == v["fence"]:
                return "ok", v, None
            return "fail", v, kw("stale-fence")
        if f == "complete":
            r["state"] = "completed"
            r["result"] = v["result"]
        else:
            r["lease"] = t + LEASE
        return "ok", v, None
    if f == "read":
        if r is None:
            return "ok", {"key": k, "state": None, "result": None}, None
        return "ok", {"key": k, "state": kw(r["state"]), "result": r["result"]}, None
    raise ValueError(f)

class Worker:
    def __init__(self, w):
        self.w = w
        self.process = w
        self.plan = []   # remaining steps of the current flow
        self.clock = 0

def next_action(wk):
    if wk.plan:
        return wk.plan.pop(0)
    # A sliding window of hot keys: new keys keep being claimed, old ones get replays.
    k = f"k{wk.clock // (2 * S) + rng.randint(0, 3)}"
    roll = rng.random()
    if roll < 0.2:
        return ("read", {"key": k})
    body = f"body-{k}" if roll > 0.27 else f"other-{k}"
    return ("claim", {"key": k, "body": body})

def latency(t):
    base = rng.uniform(1, 8) * MS
    if PAUSE[0] <= t < PAUSE[1]:
        base += rng.uniform(200, 900) * MS
    return int(base)

def ledger_call(t, wk, key, op_id, fence):
    dup = op_id in executed
    executed.add(op_id)
    ledger.append({"key": key, "operation-id": op_id, "fence": fence,
                   "process": wk.process, "time": t, "duplicate": dup})

def run():
    workers = [Worker(w) for w in range(WORKERS)]
    events = []  # (time, n, kind, worker)
    n = 0
    for wk in workers:
        heapq.heappush(events, (rng.randint(0, 5 * MS), n, wk.w)); n += 1
    crashed_in_kill = set()
    while events:
        t, _, w = heapq.heappop(events)
        if t >= DURATION:
            continue
        wk = workers[w]
        wk.clock = t
        f, v = next_action(wk)
        emit(t, {"type": kw("invoke"), "process": wk.process, "f": kw(f), "value": v})
        lat = latency(t)
        cut_off = w in (0, 1) and PARTITION[0] <= t < PARTITION[1]
        crash = w in (2, 3) and KILL[0] <= t < KILL[1] and w not in crashed_in_kill
        if crash:
            crashed_in_kill.add(w)
            if rng.random() < 0.5:
                apply(t + lat // 2, f, v)  # took effect, but nobody heard back
            wk.process += WORKERS
            wk.plan = []
            heapq.heappush(events, (KILL[1] + rng.randint(0, 100) * MS, n, w)); n += 1
            continue
        if cut_off:
            if rng.random() < 0.4:
                apply(t + lat // 2, f, v)
            emit(t + TIMEOUT, {"type": kw("info"), "process": wk.process, "f": kw(f), "value": v,
                               "error": kw("timeout")})
            wk.process += WORKERS
            wk.plan = []
            heapq.heappush(events, (t + TIMEOUT + 10 * MS, n, w)); n += 1
            continue
        typ, out, err = apply(t + lat // 2, f, v)
        done = t + lat
        op = {"type": kw(typ), "process": wk.process, "f": kw(f), "value": out}
        if err:
            op["error"] = err
        emit(done, op)
        plan_after(wk, f, typ, out, done)
        think = rng.randint(20, 200) * MS
        if wk.plan and wk.plan[0][0] == "complete" and rng.random() < 0.15:
            think += LEASE + 100 * MS  # a slow worker: its lease may be taken over meanwhile
        heapq.heappush(events, (done + think, n, w)); n += 1

def plan_after(wk, f, typ, out, t):
    if typ != "ok":
        wk.plan = []
        return
    if f == "claim" and out.get("outcome") in (kw("acquired"), kw("taken-over")):
        k, fence = out["key"], out["fence"]
        wk.current = (k, out["operation-id"], fence)
        wk.plan = [("call", {"key": k, "fence": fence})]
        if rng.random() < 0.85:  # sometimes the worker abandons the key: a later takeover
            wk.plan.append(("complete", {"key": k, "fence": fence, "result": f"res-{k}-{fence}"}))
    elif f == "call":
        k, op_id, fence = wk.current
        ledger_call(t + MS, wk, k, op_id, fence)

def nemesis():
    def nem(t, f, value):
        emit(t, {"type": kw("info"), "process": kw("nemesis"), "f": kw(f), "value": value})
        emit(t + 2 * MS, {"type": kw("info"), "process": kw("nemesis"), "f": kw(f), "value": value})
    nem(PARTITION[0], "start-partition", "isolate n1 n2 from n3 n4 n5")
    nem(PARTITION[1], "stop-partition", None)
    nem(KILL[0], "kill", ["n2", "n3"])
    nem(KILL[1], "start", ["n2", "n3"])
    nem(PAUSE[0], "pause", ["n1"])
    nem(PAUSE[1], "resume", ["n1"])
    nem(MEMBERSHIP, "membership", "remove n5, add n6")

def edn(v):
    if v is None: return "nil"
    if isinstance(v, bool): return "true" if v else "false"
    if isinstance(v, int): return str(v)
    if isinstance(v, tuple): return ":" + v[1]
    if isinstance(v, str): return json.dumps(v)
    if isinstance(v, list): return "[" + " ".join(edn(x) for x in v) + "]"
    if isinstance(v, dict): return "{" + ", ".join(f":{k} {edn(x)}" for k, x in v.items()) + "}"
    raise TypeError(v)

def js(v):
    if isinstance(v, tuple): return v[1]
    if isinstance(v, list): return [js(x) for x in v]
    if isinstance(v, dict): return {k: js(x) for k, x in v.items()}
    return v

def write():
    entries.sort(key=lambda e: (e[0], e[1]))
    ops = []
    for i, (t, _, op) in enumerate(entries):
        ops.append({"index": i, "type": op["type"], "process": op["process"], "f": op["f"],
                    "value": op.get("value"), "time": t, **({"error": op["error"]} if "error" in op else {})})
    os.makedirs("testdata/good", exist_ok=True)
    os.makedirs("testdata/good-json", exist_ok=True)
    with open("testdata/good/history.edn", "w") as fh:
        fh.writelines(edn(op) + "\n" for op in ops)
    with open("testdata/good/ledger.edn", "w") as fh:
        fh.writelines(edn(e) + "\n" for e in ledger)
    with open("testdata/good-json/history.jsonl", "w") as fh:
        fh.writelines(json.dumps(js(op)) + "\n" for op in ops)
    with open("testdata/good-json/ledger.jsonl", "w") as fh:
        fh.writelines(json.dumps(js(e)) + "\n" for e in ledger)

run()
nemesis()
write()
