"""The World tab: load, edit, validate, import tools into and save a world file.

Each handler is a plain function of form values (testable without a browser); problems come back
as a list with JSON paths, never as a traceback, and the user's edits are never discarded."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import gradio as gr

from wmstudio.locations import DEMO_WORLDS_DIR, user_worlds_dir
from wmstudio.world.problems import InvalidInput, Problem
from wmstudio.world.spec import WorldSpec, load_world, parse_json_text, parse_world, save_world
from wmstudio.world.tools import FORMATS, import_tools_file

FIELDS = ("name", "description", "task", "initial_state", "tools", "rules", "directives")


def world_files() -> list[str]:
    """Demo worlds first, then the user's saved worlds, as paths the dropdown can offer."""
    demo = sorted(DEMO_WORLDS_DIR.glob("*.json")) if DEMO_WORLDS_DIR.exists() else []
    saved = sorted(user_worlds_dir().glob("*.json"))
    return [str(p) for p in demo + saved]


def world_to_fields(world: WorldSpec) -> tuple[str, ...]:
    """Spread a world over the editor's seven fields (JSON parts pretty-printed)."""
    data = world.to_json()
    state = world.initial_state
    state_text = state if isinstance(state, str) else json.dumps(state, indent=2, ensure_ascii=False)
    return (
        world.name,
        world.description,
        world.task,
        state_text,
        json.dumps(data["tools"], indent=2, ensure_ascii=False),
        json.dumps(data["rules"], indent=2, ensure_ascii=False),
        "\n".join(world.directives),
    )


def fields_to_world(name, description, task, state_text, tools_text, rules_text, directives_text) -> WorldSpec:
    """Build a WorldSpec from the editor's fields; InvalidInput lists every problem with its path."""
    problems: list[Problem] = []
    data: dict[str, Any] = {"name": name or "", "description": description or "", "task": task or ""}
    data["initial_state"] = _state_value(state_text or "", problems)
    for key, text, default in (("tools", tools_text, []), ("rules", rules_text, [])):
        if not (text or "").strip():
            data[key] = default
            continue
        try:
            data[key] = parse_json_text(text, key)
        except InvalidInput as err:
            problems.extend(Problem(key, p.message.split(": ", 1)[-1]) for p in err.problems)
            data[key] = default
    data["directives"] = [line.strip() for line in (directives_text or "").splitlines() if line.strip()]
    try:
        world = parse_world(data)
    except InvalidInput as err:
        problems.extend(err.problems)
    if problems:
        raise InvalidInput(problems)
    return world


def _state_value(text: str, problems: list[Problem]) -> Any:
    stripped = text.strip()
    if not stripped:
        return {}
    if stripped[0] in "{[":
        try:
            return json.loads(stripped)
        except json.JSONDecodeError as err:
            problems.append(Problem("initial_state", f"invalid JSON at line {err.lineno}, column {err.colno} "
                                    f"({err.msg}); fix it, or write plain text that does not start with {{ or ["))
            return None
    try:
        return json.loads(stripped)
    except json.JSONDecodeError:
        return text  # plain-text environment state is allowed


def problems_markdown(err: InvalidInput) -> str:
    """The problems as a Markdown list for the status box."""
    items = "\n".join(f"- `{p.path or 'world'}`: {p.message}" for p in err.problems)
    return f"**{len(err.problems)} problem(s)** — nothing was saved, your edits are kept:\n\n{items}"


def validate_fields(*fields) -> str:
    """Status text: OK with a summary, or every problem."""
    try:
        world = fields_to_world(*fields)
    except InvalidInput as err:
        return problems_markdown(err)
    return f"✅ Valid world **{world.name}**: {len(world.tools)} tools, {len(world.rules)} rules, {len(world.directives)} directives."


def save_fields(filename: str, *fields) -> tuple[str, Any]:
    """Validate then save into the user's worlds folder; returns (status, refreshed dropdown)."""
    try:
        world = fields_to_world(*fields)
    except InvalidInput as err:
        return problems_markdown(err), gr.update()
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "-", (filename or world.name).strip()).strip("-.") or "world"
    path = save_world(world, user_worlds_dir() / f"{Path(stem).stem}.json")
    return f"💾 Saved **{world.name}** to `{path}`.", gr.update(choices=world_files(), value=str(path))


def load_fields(path: str | None) -> tuple:
    """Load a world file into the fields; on a bad file the fields are left as they were."""
    if not path:
        return (gr.update(),) * len(FIELDS) + ("Choose a world file first.",)
    try:
        world = load_world(path)
    except InvalidInput as err:
        return (gr.update(),) * len(FIELDS) + (problems_markdown(err),)
    return world_to_fields(world) + (f"Loaded **{world.name}** from `{path}`.",)


def import_tools_into(upload: str | None, fmt: str, tools_text: str) -> tuple[str, str]:
    """Append the tools of an uploaded file (any supported format) to the tools editor."""
    if not upload:
        return tools_text, "Choose a tool file to import first."
    try:
        result = import_tools_file(upload, fmt)
        current = parse_json_text(tools_text, "tools") if (tools_text or "").strip() else []
        if not isinstance(current, list):
            raise InvalidInput(Problem("tools", "the tools editor must hold a JSON list before importing into it"))
    except InvalidInput as err:
        return tools_text, problems_markdown(err)
    merged = current + [tool.to_json() for tool in result.tools]
    notes = "".join(f"\n- ⚠️ {w}" for w in result.warnings[:20])
    more = f"\n- … and {len(result.warnings) - 20} more warnings" if len(result.warnings) > 20 else ""
    status = f"Imported {len(result.tools)} tool(s) from `{Path(upload).name}`.{notes}{more}"
    return json.dumps(merged, indent=2, ensure_ascii=False), status


def build_world_tab() -> None:
    """Lay out the World tab inside the current Blocks context and wire its events."""
    files = world_files()
    with gr.Row():
        picker = gr.Dropdown(files, value=files[0] if files else None, label="World file", scale=4,
                             allow_custom_value=True)
        load_button = gr.Button("Load", scale=1)
    with gr.Row():
        name = gr.Textbox(label="Name", scale=2)
        description = gr.Textbox(label="Description", scale=3)
    task = gr.Textbox(label="Task context", lines=3)
    with gr.Row():
        state = gr.Code(label="Initial environment state (JSON or text)", language="json", lines=12)
        tools = gr.Code(label="Tool schemas (JSON list, any importable format)", language="json", lines=12)
    with gr.Row():
        rules = gr.Code(label='Domain rules ([{"text": ..., "check": "<CEL>"}])', language="json", lines=8)
        directives = gr.Textbox(label="Steering directives (one per line)", lines=8)
    with gr.Accordion("Import tools from a file", open=False):
        with gr.Row():
            upload = gr.File(label="Tool file (JSON, JSON Lines, YAML)", type="filepath")
            fmt = gr.Dropdown(list(FORMATS), value="auto", label="Format")
            import_button = gr.Button("Import tools")
    with gr.Row():
        filename = gr.Textbox(label="Save as (file name in your worlds folder)", scale=3)
        validate_button = gr.Button("Validate", scale=1)
        save_button = gr.Button("Save", variant="primary", scale=1)
    status = gr.Markdown(elem_id="world-status")

    fields = [name, description, task, state, tools, rules, directives]
    load_button.click(load_fields, picker, fields + [status], api_name="load_world")
    validate_button.click(validate_fields, fields, status, api_name="validate_world")
    for editor in (tools, rules):  # validated as you type
        editor.change(validate_fields, fields, status, show_progress="hidden", api_visibility="private")
    save_button.click(save_fields, [filename] + fields, [status, picker], api_name="save_world")
    import_button.click(import_tools_into, [upload, fmt, tools], [tools, status], api_name="import_tools")
    return picker, fields, status
