"""Hostile worlds for the attack tests and benchmark (issue 52): the demo retail world with patterns and rules drawn
at random (catastrophic backtracking, exploding automata, look-arounds, huge counts, deep nesting, slow macros,
long chains) and the world-step body that sends it, anchors and repair drawn too; and what watches a server under
them (its CPU and memory from /proc, a second client probing it).

On the path through `pythonpath = ["tests"]` in pyproject.toml; benchmarks add tests/ to theirs."""

from __future__ import annotations

import copy
import json
import os
import random
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from wmstudio.store.seeding import demo_worlds

ORDER = "ORD-23411"
NORMAL_STEP = {"world": "retail", "call": {"name": "get_order", "arguments": {"order_id": ORDER}}}
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process `pid` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def resident_mb(pid: int) -> float:
    """Resident memory of process `pid`, in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


class Prober:
    """A second client: `/health` every 0.25 s and a normal step every 2 s, each answer's seconds kept while on."""

    def __init__(self, url: str):
        self.url, self.health, self.steps, self.slow = url, [], [], []
        self.stop, self.ready = threading.Event(), threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        with httpx.Client(base_url=self.url, timeout=120) as client:
            last_step = 0.0
            while not self.stop.is_set():
                started = time.monotonic()
                client.get("/health")
                self.health.append(time.monotonic() - started)
                if self.health[-1] > 0.5:
                    self.slow.append((started, time.monotonic()))
                self.ready.set()
                if started - last_step > 2.0:
                    last_step = time.monotonic()
                    client.post("/v1/world/step", json=NORMAL_STEP)
                    self.steps.append(time.monotonic() - last_step)
                self.stop.wait(0.25)

    def __enter__(self) -> Prober:
        self.thread.start()
        self.ready.wait(60)  # one answer before the request under test is sent
        return self

    def __exit__(self, *_: object) -> None:
        self.stop.set()
        self.thread.join()


def retail() -> dict[str, Any]:
    return next(world for world in demo_worlds() if world.name == "retail").to_json()


def get_order_tool(world: dict[str, Any]) -> dict[str, Any]:
    """The get_order tool's function object in a world's JSON (edited in place by the callers)."""
    return next(t.get("function", t) for t in world["tools"] if t.get("function", t)["name"] == "get_order")


def step_body(world: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"world": world, "call": {"name": "get_order", "arguments": {"order_id": ORDER}}, **extra}


def with_pattern(pattern: Any, base: dict[str, Any] | None = None) -> dict[str, Any]:
    """Retail with `pattern` on get_order's response field `message`."""
    world = copy.deepcopy(base or retail())
    get_order_tool(world)["response"]["properties"]["message"] = {"type": "string", "pattern": pattern}
    return world


def with_rules(rules: list[dict[str, Any]], base: dict[str, Any] | None = None) -> dict[str, Any]:
    world = copy.deepcopy(base or retail())
    world["rules"] = rules
    return world


# -- the named cases of the issue -------------------------------------------------------------------------------

def listed(n: int, kind: str = "int") -> str:
    return "[" + ",".join(f"'s{i}'" if kind == "str" else str(i) for i in range(n)) + "]"


def string_map(n: int) -> str:
    return "{" + ",".join(f"'k{i}':'v{i}'" for i in range(n)) + "}"


def slow_rules(count: int) -> list[dict[str, Any]]:
    """`count` distinct rules, each of which would run for seconds (nested .all() over 60-element lists)."""
    nested = listed(60)
    return [{"text": f"rule {k}", "check": f"{nested}.all(a, {nested}.all(b, {nested}.all(c, a + b + c >= {k})))"}
            for k in range(count)]


def named_attacks() -> dict[str, tuple[dict[str, Any], list[Any] | None]]:
    """Name -> (the body, the `loc` its 4xx must name, or None where an answer is as good)."""
    aaa = "a" * 40 + "!"
    maps = f"{listed(60)}.all(a, {listed(60)}.all(b, {string_map(60)}.size() == 60))"
    parens = "(" * 1500 + "true" + ")" * 1500
    pattern_loc = ["body", "world", "tools", 0, "function", "response", "properties", "message", "pattern"]
    return {
        "schema pattern ^(a+)+$, 40 a's and !": (step_body(with_pattern("^(a+)+$"), anchors={"message": aaa}),
                                                ["body", "anchors", "message"]),
        "rule matches ^(a+)+$ under repair": (step_body(with_rules([{"text": "m", "check":
                                                                     'response.message.matches("^(a+)+$")'}]),
                                                        anchors={"message": aaa}, repair=True), None),
        "schema pattern ^.*a.{14}$": (step_body(with_pattern("^.*a.{14}$")), pattern_loc),
        "schema pattern ^.*a.{12}$": (step_body(with_pattern("^.*a.{12}$")), pattern_loc),
        "schema pattern with a look-ahead": (step_body(with_pattern("^(?=a)a+$")), pattern_loc),
        "rule of 60x60 string maps": (step_body(with_rules([{"text": "maps", "check": maps}])),
                                      ["body", "world", "rules"]),
        "20 slow rules": (step_body(with_rules(slow_rules(20))), ["body", "world", "rules"]),
        "1,500 nested parentheses": (step_body(with_rules([{"text": "p", "check": parens}])),
                                     ["body", "world", "rules", 0, "check"]),
    }


# -- drawn at random ----------------------------------------------------------------------------------------------

ATOMS = ["a", "b", ".", "\\d", "\\w", "[a-z]", "[^x]", "x", "\\s", "ab", "\\.", "[0-9A-F]"]


PATTERN_CHARS = 2_000  # a drawn pattern is cut there (a pattern may have 1,000: longer ones are refused)
CHECK_CHARS = 6_000  # a drawn check is cut there (a check may have 4,096)


def hostile_pattern(rng: random.Random, depth: int = 0) -> str:
    """A regular expression built to hurt: nested quantifiers, counted repeats after `.*`, alternations of
    overlapping branches, huge counts, look-arounds, back-references, or plain broken text."""
    return _drawn_pattern(rng, depth)[:PATTERN_CHARS]


def _drawn_pattern(rng: random.Random, depth: int) -> str:
    kind = rng.randrange(11)
    if kind == 0 or depth > 3:
        return rng.choice(ATOMS)
    inner = _drawn_pattern(rng, depth + 1)[:PATTERN_CHARS]
    if kind == 1:
        return f"({inner}+)+"
    if kind == 2:
        return f".*{inner}.{{{rng.randrange(1, 40)}}}"
    if kind == 3:
        return f"({inner}|{inner}{inner})*"
    if kind == 4:
        return f"({inner}){{{rng.choice([2, 50, 999, 1000, 5000])}}}"
    if kind == 5:
        return f"(?{rng.choice(['=', '!', '<=', '<!'])}{inner}){inner}"
    if kind == 6:
        return f"({inner})\\1"
    if kind == 7:
        return rng.choice(["(", "[a-", "a{2,1}", "*a", "(?P<", "\\", "a**", "(?i)" + inner, "\\bword\\b"])
    if kind == 8:
        return "(" * rng.randrange(1, 400) + inner + ")" * rng.randrange(1, 400)
    if kind == 9:
        return inner * rng.randrange(1, 300)
    return "^" + inner + "$"


def hostile_check(rng: random.Random, depth: int = 0) -> str:
    """A CEL check built to hurt: deep nesting, macros over long lists, string maps, hostile `matches`, long chains,
    or text that is not CEL."""
    return _drawn_check(rng, depth)[:CHECK_CHARS]


def _drawn_check(rng: random.Random, depth: int) -> str:
    kind = rng.randrange(10)
    if kind == 0 or depth > 2:
        return rng.choice(["true", "response.status == 'ok'", "size(state.orders) > 0",
                           "call.arguments.order_id != ''"])
    inner = _drawn_check(rng, depth + 1)[:CHECK_CHARS]
    n = rng.choice([3, 30, 60, 200])
    if kind == 1:
        return "(" * (d := rng.randrange(1, 2000)) + inner + ")" * d
    if kind == 2:
        return f"{listed(n)}.all(a, {listed(n)}.exists(b, a + b >= 0 && {inner}))"
    if kind == 3:
        return f"{string_map(min(n, 60))}.all(k, {listed(min(n, 60), 'str')}.all(v, k != v || {inner}))"
    if kind == 4:
        pattern = json.dumps(hostile_pattern(rng))
        return f"response.message.matches({pattern}) || {inner}"
    if kind == 5:
        return " || ".join([inner] * rng.randrange(2, 600))
    if kind == 6:
        return f"{listed(n)}.map(a, {listed(n)}.map(b, string(a) + string(b))).size() > 0 && {inner}"
    if kind == 7:
        return "[" * (d := rng.randrange(1, 500)) + "1" + "]" * d + f".size() > 0 && {inner}"
    if kind == 8:
        return rng.choice(["response.", "&&", "size(", "'unterminated", inner + " +", "1 / 0 == 1"])
    return f"has(response.message) ? {inner} : !({inner})"


def hostile_world_body(rng: random.Random, base: dict[str, Any]) -> dict[str, Any]:
    """One world-step body: retail with a drawn pattern (on the response, a parameter or as patternProperties),
    drawn rules, maybe a long anchor on a patterned field, maybe repair."""
    world = copy.deepcopy(base)
    tool = get_order_tool(world)
    where = rng.randrange(4)
    if where == 0:
        tool["response"]["properties"]["message"] = {"type": "string", "pattern": hostile_pattern(rng)}
    elif where == 1:
        tool["parameters"]["properties"]["order_id"]["pattern"] = hostile_pattern(rng)
    elif where == 2:
        tool["response"]["patternProperties"] = {hostile_pattern(rng): {"type": "string"}}
    world["rules"] = [{"text": f"drawn rule {k}", "check": hostile_check(rng)} for k in range(rng.randrange(0, 6))]
    body = step_body(world, sampler={"steps": rng.choice([1, 2, 4])})
    if rng.random() < 0.5:
        body["anchors"] = {"message": rng.choice(["a", "ab", "x1"]) * rng.randrange(1, 60) + rng.choice(["!", ""])}
    if rng.random() < 0.3:
        body["repair"] = True
    if where == 1 and rng.random() < 0.5:
        body["call"]["arguments"]["order_id"] = "a" * rng.randrange(1, 60) + "!"
    return body
