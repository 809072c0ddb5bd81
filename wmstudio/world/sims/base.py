"""The Simulator contract and what every simulated world shares: argument checks, steering, response shapes.

A simulator is ground truth for one world: `step(state, call, directives)` is a pure function whose responses
always fit the tool's response schema and satisfy the world's rules, so corpus rows and checks never disagree."""

from __future__ import annotations

import json
import random
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from wmstudio.problems import InvalidInput, Problem
from wmstudio.world.jsonpath import resolve_local
from wmstudio.world.rules.cel import Rule
from wmstudio.world.spec import Call, WorldSpec
from wmstudio.world.steering.directives import Directive, Steering, steering
from wmstudio.world.tools import Tool
from wmstudio.world.tools.arguments import argument_error

JSON = dict[str, Any]
OK, PARTIAL, ERROR = "ok", "partial", "error"


# --- JSON Schema building blocks (tools stay readable, and every response field is required) ---------------


def _described(schema: JSON, description: str) -> JSON:
    return {**schema, "description": description} if description else schema


def string(description: str = "", enum: Iterable[str] | None = None, pattern: str | None = None,
           max_length: int | None = None) -> JSON:
    """A string property; `enum` lists the closed set of values, `pattern` the shape of a token or id, `max_length`
    its longest text. Response fields mostly go undescribed (their names say enough), which keeps the prompt short
    for a small model."""
    schema = _described({"type": "string"}, description)
    if enum is not None:
        schema["enum"] = list(enum)
    if pattern is not None:
        schema["pattern"] = pattern
    if max_length is not None:
        schema["maxLength"] = max_length
    return schema


def integer(description: str = "", minimum: int | None = None, maximum: int | None = None) -> JSON:
    """An integer property (counts, cents) with optional bounds."""
    schema = _described({"type": "integer"}, description)
    if minimum is not None:
        schema["minimum"] = minimum
    if maximum is not None:
        schema["maximum"] = maximum
    return schema


def boolean(description: str = "") -> JSON:
    """A true/false property."""
    return _described({"type": "boolean"}, description)


def array(items: JSON, description: str = "", max_items: int | None = None) -> JSON:
    """A list property whose items follow `items`."""
    schema = _described({"type": "array"}, description)
    schema["items"] = items
    if max_items is not None:
        schema["maxItems"] = max_items
    return schema


def record(properties: JSON, required: Iterable[str] | None = None) -> JSON:
    """A closed object schema; every property is required unless `required` names fewer."""
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties) if required is None else list(required),
        "additionalProperties": False,
    }


def response_schema(fields: JSON, statuses: Iterable[str] = (OK, ERROR)) -> JSON:
    """The response object: the tool's fields, then `error`, `message` and a trailing `status` (all required)."""
    return record(
        {
            **fields,
            "error": string(),  # a code such as NOT_FOUND, "" on success
            "message": string(),  # why it failed; on success "" unless the `verbose` directive asks
            "status": string(enum=list(statuses)),
        }
    )


def neutral_value(schema: JSON, root: JSON | None = None) -> Any:
    """The value a field takes when the call failed: 0, false, "", [] or an object of neutral values (a local
    `$ref`, `#/$defs/Name`, read from `root`, the whole response schema)."""
    root = schema if root is None else root
    schema = resolve_local(schema, root)
    kind = schema.get("type")
    if "enum" in schema:
        return "" if "" in schema["enum"] else schema["enum"][0]
    if kind == "object":
        return {key: neutral_value(sub, root) for key, sub in schema.get("properties", {}).items()}
    return {"integer": 0, "number": 0, "boolean": False, "array": [], "string": ""}.get(kind)


# --- the simulator contract -----------------------------------------------------------------------------------


@dataclass
class Reply:
    """What a tool handler answers: its fields (the rest take neutral values) and the outcome."""

    fields: JSON = field(default_factory=dict)
    error: str = ""
    message: str = ""
    status: str = OK


def fail(code: str, message: str, **fields: Any) -> Reply:
    """An error reply: nothing changed; `fields` echo what the caller asked about (ids, paths)."""
    return Reply(fields, error=code, message=message, status=ERROR)


def money(cents: int) -> str:
    """Cents as a dollar amount for messages: 1299 -> $12.99."""
    return f"${cents // 100:,}.{cents % 100:02d}"


class Simulator:
    """Ground truth for one world: tools, rules, task, a random initial state and a pure `step`.

    Subclasses define `name`, `description`, `task`, `tools()`, `rules()`, `initial_state(rng)`, one
    handler `do_<tool>(state, args, steer) -> Reply` per tool (it may change `state`, its own copy), and
    the scripted agent `valid_call` / `invalid_call` that the corpus uses."""

    name = "world"
    description = ""
    task = ""
    echo_fields: tuple[str, ...] = ()  # string arguments echoed into error responses besides `id` / `*_id`

    def __init__(self) -> None:
        self._tools = {tool.name: tool for tool in self.tools()}
        self._neutral = {name: neutral_value(tool.response or {}) for name, tool in self._tools.items()}

    # what a subclass provides
    def tools(self) -> list[Tool]:
        raise NotImplementedError

    def rules(self) -> list[Rule]:
        raise NotImplementedError

    def initial_state(self, rng: random.Random) -> JSON:
        raise NotImplementedError

    def valid_call(self, state: JSON, rng: random.Random) -> Call:
        """A call a reasonable agent would make now (it may still meet a policy error)."""
        raise NotImplementedError

    def invalid_call(self, state: JSON, rng: random.Random) -> Call:
        """A world-specific mistake: an unknown id or a call the policy forbids."""
        raise NotImplementedError

    def query_state(self, state: JSON, call: Call) -> JSON | None:
        """What a retrieval query over `state` says about `call` (the records a listing or search pages through,
        and how many match), never its outcome; None for calls that are not listings or whose arguments do not
        read. Shown to the world model as its COMPUTED QUERY STATE."""
        try:
            return self.lookup(state, call.name, call.arguments) if isinstance(call.arguments, dict) else None
        except (KeyError, TypeError, ValueError, AttributeError, IndexError):
            return None

    def lookup(self, state: JSON, tool: str, args: JSON) -> JSON | None:
        """A subclass's retrieval for its listing tools (see query_state)."""
        return None

    def check_auth(self, state: JSON, call: Call) -> Reply | None:
        """An auth error reply when the world requires credentials and the call lacks valid ones."""
        return None

    def auth_failure(self, call: Call) -> Reply:
        """The reply the `auth_failure` directive forces: this world's authentication error."""
        return fail("UNAUTHENTICATED", "Authentication failed: the request carried no valid credentials.")

    # shared behaviour
    def world(self, state: JSON | None = None, directives: Iterable[str] = ()) -> WorldSpec:
        """The world file content for `state` (default: the initial state for seed 0)."""
        return WorldSpec(
            name=self.name,
            description=self.description,
            simulator=self.name,
            task=self.task,
            initial_state=self.initial_state(random.Random(0)) if state is None else _copy(state),
            tools=self.tools(),
            rules=self.rules(),
            directives=list(directives),
        )

    def step(
        self, state: JSON, call: Call | JSON, directives: Iterable[str | Directive] = ()
    ) -> tuple[JSON, JSON]:
        """Apply `call` to `state` under `directives`: (new state, response). Never mutates `state`.

        When the call fails the input state itself comes back unchanged; unknown tools and bad arguments
        get the error responses a real API would send, never exceptions."""
        if not isinstance(call, Call):
            call = Call.from_json(call)
        tool = self._tools.get(call.name)
        if tool is None:
            known = ", ".join(self._tools)
            return state, {"error": "UNKNOWN_TOOL", "message": f"No tool named '{call.name}'. Tools: {known}.",
                           "status": ERROR}
        steer = steering(directives)
        args = call.arguments
        if not isinstance(state, dict):
            raise InvalidInput(Problem("initial_state", f"the {self.name} simulator needs an object as its state"))
        try:
            reply = self._refusal(state, call, steer)
            if reply is None and (problem := argument_error(tool.parameters, args)) is not None:
                reply = fail(problem.code, problem.message)
            new_state = state
            if reply is None:
                new_state = _copy(state)
                reply = getattr(self, f"do_{call.name}")(new_state, args, steer)
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as err:
            raise InvalidInput(Problem(
                "initial_state", f"does not have the shape the {self.name} simulator keeps ({type(err).__name__}: "
                f"{err}): start from the demo world assets/worlds/{self.name}.json and edit its values, not its shape"
            )) from None
        if reply.status == ERROR:
            new_state = state
            reply.fields = {**self._echo(tool, args), **reply.fields}
        elif not steer.verbose:
            reply.message = ""
        return new_state, self._response(call.name, reply)

    def agent_call(self, state: JSON, rng: random.Random, invalid: bool = False) -> Call:
        """The scripted agent: a valid call, or (invalid=True) a missing or wrong-typed argument or a world mistake."""
        if not invalid:
            return self.valid_call(state, rng)
        roll = rng.random()
        if roll < 0.5:
            return self.invalid_call(state, rng)
        call = self.valid_call(state, rng)
        tool = self._tools[call.name]
        args = dict(call.arguments)
        required = [name for name in tool.parameters.get("required", []) if name in args]
        present = [name for name in tool.parameters.get("properties", {}) if name in args]
        if roll < 0.75 and required:
            del args[rng.choice(required)]
        elif present:
            name = rng.choice(present)
            args[name] = _wrong_type(tool.parameters["properties"][name], args[name], rng)
        else:
            return self.invalid_call(state, rng)
        return Call(call.name, args)

    def _refusal(self, state: JSON, call: Call, steer: Steering) -> Reply | None:
        if steer.rate_limit:
            return fail("RATE_LIMITED", "Too many requests: retry after 30 seconds.")
        if steer.auth_failure:
            return self.auth_failure(call)
        if (refused := self.check_auth(state, call)) is not None:
            return refused
        if steer.inject_error:
            return fail(steer.inject_error, f"The request failed with {steer.inject_error}.")
        return None

    def _echo(self, tool: Tool, args: Any) -> JSON:
        properties = (tool.response or {}).get("properties", {})
        if not isinstance(args, dict):
            return {}
        return {
            key: value
            for key, value in args.items()
            if key in properties and isinstance(value, str) and properties[key].get("type") == "string"
            and "enum" not in properties[key] and (key == "id" or key.endswith("_id") or key in self.echo_fields)
        }

    def _response(self, tool_name: str, reply: Reply) -> JSON:
        neutral = self._neutral[tool_name]
        unknown = set(reply.fields) - set(neutral)
        if unknown:
            raise AssertionError(f"{self.name}.{tool_name} answered fields outside its schema: {sorted(unknown)}")
        response = {key: reply.fields.get(key, _copy(value)) for key, value in neutral.items()}
        response.update(error=reply.error, message=reply.message, status=reply.status)
        return response


def make_tool(name: str, description: str, parameters: JSON, response: JSON) -> Tool:
    """A Tool whose parameters and response are closed object schemas."""
    return Tool(name=name, description=description, parameters=parameters, response=response)


def params(properties: JSON, required: Iterable[str] = ()) -> JSON:
    """A tool's parameters schema: `required` lists the arguments a call must give."""
    return record(properties, required)


def _wrong_type(schema: JSON, value: Any, rng: random.Random) -> Any:
    kind = schema.get("type")
    if kind == "integer":
        return rng.choice([str(value), float(value) + 0.5, None])
    if kind == "string":
        return rng.choice([12345, None, [value]])
    if kind == "boolean":
        return rng.choice(["yes", 1])
    if kind == "array":
        return ",".join(map(str, value)) if value else "all"
    return "?"


def _copy(value: Any) -> Any:
    return json.loads(json.dumps(value))

