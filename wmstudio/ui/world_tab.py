"""The World tab: pick a saved world (any version), edit, validate, import tools, save a new version.

World files can be opened and downloaded too. Each handler is a plain function of form values (testable
without a browser); problems come back as a list with JSON paths, never a traceback, and edits are kept."""

from __future__ import annotations

import functools
import hashlib
import json
import re
import tempfile
from functools import partial
from pathlib import Path
from typing import Any

import gradio as gr

from wmstudio.problems import InvalidInput, Problem
from wmstudio.studio.context import StudioContext
from wmstudio.studio.rollouts import saved_responses
from wmstudio.studio.worlds import get_world, list_worlds, save_world_version, world_versions
from wmstudio.ui.messages import as_uploaded, failure_markdown
from wmstudio.world.rules.references import reference_findings
from wmstudio.world.simulators import SIMULATORS
from wmstudio.world.spec import (
    WorldSpec,
    load_world,
    parse_json_text,
    parse_world,
    save_world,
)
from wmstudio.world.tools import FORMATS, import_tools_file
from wmstudio.world.tools.schema_inference import infer_schema

FIELDS = ("name", "description", "simulator", "task", "initial_state", "tools", "rules", "directives")
NO_SIMULATOR = "(none)"

KEPT = "nothing was saved, your edits are kept"
MAX_FILE_STEM = 80  # characters of a download's file name taken from the world's name (a name may be longer)


def world_to_fields(world: WorldSpec) -> tuple[str, ...]:
    """Spread a world over the editor's fields (JSON parts pretty-printed)."""
    data = world.to_json()
    state = world.initial_state
    state_text = state if isinstance(state, str) else json.dumps(state, indent=2, ensure_ascii=False)
    return (
        world.name,
        world.description,
        world.simulator or NO_SIMULATOR,
        world.task,
        state_text,
        json.dumps(data["tools"], indent=2, ensure_ascii=False),
        json.dumps(data["rules"], indent=2, ensure_ascii=False),
        "\n".join(world.directives),
    )


def fields_to_world(name, description, simulator, task, state_text, tools_text, rules_text,
                    directives_text) -> WorldSpec:
    """Build a WorldSpec from the editor's fields; InvalidInput lists every problem with its path."""
    problems: list[Problem] = []
    data: dict[str, Any] = {"name": name or "", "description": description or "", "task": task or ""}
    if simulator and simulator != NO_SIMULATOR:
        data["simulator"] = simulator
    data["initial_state"] = _state_value(state_text or "", problems)
    for key, text, default in (("tools", tools_text, []), ("rules", rules_text, [])):
        if not (text or "").strip():
            data[key] = default
            continue
        try:
            data[key] = parse_json_text(text, key)
        except InvalidInput as err:  # "tools:3:14: invalid JSON (...)": keep where, in words
            problems.extend(Problem(key, re.sub(rf"^{key}:(\d+):(\d+): ", r"line \1, column \2: ", p.message))
                            for p in err.problems)
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


def editor_status(key: str, *fields) -> str:
    """The problems of one JSON editor (`tools` or `rules`), shown right under it while typing."""
    try:
        fields_to_world(*fields)
    except InvalidInput as err:
        mine = [p for p in err.problems if p.path == key or p.path.startswith((f"{key}[", f"{key}."))]
        if mine:
            return failure_markdown(InvalidInput(mine), f"use these {key} yet", "your edits are kept")
    return f"✓ {key} read fine"


def validate_fields(*fields) -> str:
    """Status text: OK with a summary, or every problem."""
    try:
        world = fields_to_world(*fields)
    except InvalidInput as err:
        return failure_markdown(err, "use this world yet", KEPT)
    _, warnings = reference_findings(world.tools, world.rules, world.initial_state)
    notes = "".join(f"\n- Warning: {warning}" for warning in warnings)
    return (f"✓ Valid world **{world.name}**: {len(world.tools)} tools, {len(world.rules)} rules, "
            f"{len(world.directives)} directives.{notes}")


def world_names(ctx: StudioContext) -> list[str]:
    """Names of the worlds saved in the store, alphabetically."""
    return [summary.name for summary in list_worlds(ctx.store)]


def version_choices(ctx: StudioContext, name: str | None) -> list[tuple[str, int]]:
    """(label, world id) pairs for every saved version of `name`, newest first."""
    if not name:
        return []
    return [(f"v{row.version} · {row.created_at:%Y-%m-%d %H:%M}", row.id) for row in world_versions(ctx.store, name)]


def pick_world(ctx: StudioContext, name: str | None) -> Any:
    """Refresh the version dropdown for the chosen world, selecting the newest version."""
    choices = version_choices(ctx, name)
    return gr.update(choices=choices, value=choices[0][1] if choices else None)


def load_version(ctx: StudioContext, world_id: int | None) -> tuple:
    """Load a saved world version into the fields (fields untouched, with a message, when it cannot be read)."""
    if world_id is None:
        return (gr.update(),) * len(FIELDS) + ("Choose a world and a version first.",)
    try:
        row = get_world(ctx.store, int(world_id))
        world = row.spec()
    except InvalidInput as err:
        return (gr.update(),) * len(FIELDS) + (failure_markdown(err, "open that version", KEPT),)
    return world_to_fields(world) + (f"Loaded **{row.name}** v{row.version}.",)


def open_world_file(path: str | None) -> tuple:
    """Load an uploaded world file into the fields (not saved until Save)."""
    if not path:
        return (gr.update(),) * len(FIELDS) + ("Choose a world file first.",)
    try:
        world = load_world(path)
    except InvalidInput as err:
        return (gr.update(),) * len(FIELDS) + (as_uploaded(failure_markdown(err, "open the file", KEPT), path),)
    return world_to_fields(world) + (f"Opened **{world.name}** from `{Path(path).name}`; Save to keep it.",)


def save_version(ctx: StudioContext, *fields) -> tuple[str, Any, Any]:
    """Validate then save the fields as the next version of the world; returns (status, names, versions)."""
    try:
        world = fields_to_world(*fields)
    except InvalidInput as err:
        return failure_markdown(err, "save the world", KEPT), gr.update(), gr.update()
    row = save_world_version(ctx.store, world)
    choices = version_choices(ctx, world.name)
    return (f"Saved **{row.name}** as v{row.version}.",
            gr.update(choices=world_names(ctx), value=world.name), gr.update(choices=choices, value=row.id))


def world_file_for_download(*fields) -> str | None:
    """The fields as a canonical world file, or None while they do not make a valid world. Kept current as the
    fields change, so the download button always holds what is shown. The file lies in this studio's own private
    temporary folder (a folder named by its content, the name a capped slug of the world's): another user of the
    machine can neither predict its path nor plant a file there."""
    try:
        world = fields_to_world(*fields)
    except InvalidInput:
        return None
    text = world.dumps()
    folder = downloads_folder() / hashlib.sha256(text.encode()).hexdigest()[:16]
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "-", world.name).strip("-.")[:MAX_FILE_STEM].strip("-.") or "world"
    path = folder / f"{stem}.json"
    if path.is_file():  # named by its content: written before (one field change fires this once per field)
        return str(path)
    return str(save_world(world, path))


@functools.cache
def downloads_folder() -> Path:
    """This process's private folder for files the studio offers for download (mode 0700, made once)."""
    return Path(tempfile.mkdtemp(prefix="wmstudio-downloads-"))


IMPORT_MODES = {"add": "add them to the tools shown", "replace": "replace the tools shown",
                "new": "start a new world with them"}


def new_world_fields(name: str = "") -> tuple[str, ...]:
    """The fields of an empty world (named `name`): no state, tools, rules or directives yet."""
    return (name, "", NO_SIMULATOR, "", "{}", "[]", "[]", "")


def import_tools_into(upload: str | None, fmt: str, tools_text: str, mode: str = "add") -> tuple:
    """Import the tools of an uploaded file (any supported format) into the editor: added to the tools shown,
    replacing them, or as a new world named after the file (every other field emptied). Returns every field and a
    status; on a failure the fields are left as they are."""
    unchanged = (gr.update(),) * len(FIELDS)
    if not upload:
        return (*unchanged, "Choose a tool file to import first.")
    try:
        if mode not in IMPORT_MODES:
            raise InvalidInput(Problem("mode", f"{mode!r} is not known: use one of {', '.join(IMPORT_MODES)}"))
        result = import_tools_file(upload, fmt)
        current = parse_json_text(tools_text, "tools") if (tools_text or "").strip() and mode == "add" else []
        if not isinstance(current, list):
            raise InvalidInput(Problem("tools", "the tools editor must hold a JSON list before importing into it"))
    except InvalidInput as err:
        return (*unchanged, as_uploaded(failure_markdown(err, "import the tools", KEPT), upload))
    tools = json.dumps(current + [tool.to_json() for tool in result.tools], indent=2, ensure_ascii=False)
    notes = "".join(f"\n- Warning: {as_uploaded(w, upload)}" for w in result.warnings[:20])
    more = f"\n- … and {len(result.warnings) - 20} more warnings" if len(result.warnings) > 20 else ""
    done = {"add": "added to the tools shown", "replace": "in place of the tools shown",
            "new": "as a new world: name it, then **Save new version**"}[mode]
    status = f"Imported {len(result.tools)} tool(s) from `{Path(upload).name}`, {done}.{notes}{more}"
    if mode == "new":
        fields = new_world_fields(re.sub(r"[^\w.-]+", "-", Path(upload).stem).strip("-.") or "imported")
        return (*fields[:5], tools, *fields[6:], status)
    return (*unchanged[:5], tools, *unchanged[6:], status)


def infer_response_schema(tools_text: str, tool_name: str, examples: list) -> tuple[str, str]:
    """Put a response schema inferred from `examples` on tool `tool_name` in the tools editor (to edit, then save)."""
    return put_response_schema(tools_text, tool_name, infer_schema(examples),
                               f"Inferred a response schema for `{tool_name}` from {len(examples)} example(s): "
                               "check it in the tools editor, edit what the examples could not show (enums, optional "
                               "fields), then save.")


def put_response_schema(tools_text: str, tool_name: str, schema: dict, note: str) -> tuple[str, str]:
    """The tools editor's text with `schema` as tool `tool_name`'s response schema, and `note` to show."""
    tools = parse_json_text(tools_text, "tools") if (tools_text or "").strip() else []
    if not isinstance(tools, list):
        raise InvalidInput(Problem("tools", "the tools editor must hold a JSON list of tools"))
    names = []
    for entry in tools:
        function = entry.get("function", entry) if isinstance(entry, dict) else {}
        names.append(function.get("name"))
        if function.get("name") == (tool_name or "").strip():
            function["response"] = schema
            return json.dumps(tools, indent=2, ensure_ascii=False), note
    known = ", ".join(str(n) for n in names if n) or "none"
    raise InvalidInput(Problem("tool", f"no tool {tool_name!r} in the tools editor: pick one of {known}"))


def sketch_with_model(ctx: StudioContext, tool_name: str, *fields) -> tuple[Any, str]:
    """Ask the studio's world model for tool `tool_name`'s response schema and put it in the tools editor, to edit
    and save: the one it was trained with, for a tool of a world it trained on, else the schema its sketch from the
    world being edited (its prompt without that schema) describes, for a model trained to sketch."""
    from wmstudio.model.generation.generation import write_sketch
    from wmstudio.world.spec import Call

    try:
        world = fields_to_world(*fields)
        name = (tool_name or "").strip()
        if name not in {tool.name for tool in world.tools}:
            known = ", ".join(tool.name for tool in world.tools) or "none"
            raise InvalidInput(Problem("tool", f"no tool {name!r} in the tools editor: pick one of {known}"))
        backend = ctx.backend()
        trained = getattr(backend, "trained_schemas", None)
        kept = trained.schema_for(world, Call(name, {})) if trained is not None else None
        if kept is not None:
            return put_response_schema(fields[FIELDS.index("tools")], name, kept,
                                       f"The world model was trained on `{name}` of world `{world.name}`: the "
                                       "response schema it was trained with is in the tools editor. Edit it if "
                                       "your tool answers otherwise, then save.")
        if not getattr(backend, "writes_shape", False):
            raise InvalidInput(Problem("model", f"{ctx.model} was not trained on a tool {name!r} of world "
                                                f"{world.name!r}, nor to sketch response schemas (train-wm "
                                                "--shape-share): paste an example response instead"))
        written = write_sketch(backend, world, Call(name, {}))
        if written.schema is None:
            raise InvalidInput(Problem("tool", f"the model's sketch of {name!r}, {written.text or '(nothing)'}, is "
                                               "not a schema: paste an example response instead"))
        return put_response_schema(fields[FIELDS.index("tools")], name, written.schema,
                                   f"The world model sketched `{name}`'s response as `{written.text}`: its schema "
                                   "is in the tools editor. A sketch knows keys and choices only: add formats, "
                                   "patterns and descriptions, then save.")
    except InvalidInput as err:
        return gr.update(), failure_markdown(err, "sketch the schema", KEPT)


def infer_from_example(tools_text: str, tool_name: str, example_text: str) -> tuple[Any, str]:
    try:
        example = parse_json_text(example_text or "", "example response")
        return infer_response_schema(tools_text, tool_name, example if isinstance(example, list) else [example])
    except InvalidInput as err:
        return gr.update(), failure_markdown(err, "infer the schema", KEPT)


def infer_from_saved(ctx: StudioContext, tools_text: str, tool_name: str, world_name: str) -> tuple[Any, str]:
    try:
        examples = saved_responses(ctx.store, (world_name or "").strip(), (tool_name or "").strip())
        if not examples:
            raise InvalidInput(Problem("tool", f"no saved JSON responses of {tool_name!r} in world "
                                               f"{world_name!r}: paste an example response instead"))
        return infer_response_schema(tools_text, tool_name, examples)
    except InvalidInput as err:
        return gr.update(), failure_markdown(err, "infer the schema", KEPT)


def build_world_tab(ctx: StudioContext, studio: gr.Blocks) -> None:
    """Lay out the World tab inside the current Blocks context and wire its events."""
    with gr.Row():
        picker = gr.Dropdown(world_names(ctx), label="World", scale=3, elem_id="world-picker")
        version = gr.Dropdown([], label="Version", scale=2, allow_custom_value=True)
        load_button = gr.Button("Load", scale=1)
        new_button = gr.Button("New world", scale=1, elem_id="world-new")
        opener = gr.UploadButton("Open world file…", file_types=[".json"], scale=1)
    with gr.Row():
        name = gr.Textbox(label="Name", scale=2, elem_id="world-name")
        description = gr.Textbox(label="Description", scale=3)
        simulator = gr.Dropdown([NO_SIMULATOR, *SIMULATORS], value=NO_SIMULATOR, scale=1,
                                label="Simulator (ground truth)",
                                allow_custom_value=True)  # a synthetic world's is synthetic:<seed>:<index>
    task = gr.Textbox(label="Task context", lines=3, elem_id="world-task")
    with gr.Row():
        state = gr.Code(label="Initial environment state (JSON or text)", language="json", lines=12, max_lines=24)
        with gr.Column():
            tools = gr.Code(label="Tool schemas (JSON list, any importable format)", language="json", lines=12,
                            max_lines=24)
            tools_status = gr.Markdown(elem_id="world-tools-status")
    with gr.Row():
        with gr.Column():
            rules = gr.Code(label='Domain rules ([{"text": ..., "check": "<CEL>"}])', language="json", lines=8,
                            max_lines=16)
            rules_status = gr.Markdown(elem_id="world-rules-status")
        directives = gr.Textbox(label="Steering directives (one per line)", lines=8)
    with gr.Accordion("Import tools from a file", open=False), gr.Row():
        upload = gr.File(label="Tool file (JSON, JSON Lines, YAML)", type="filepath", elem_id="world-tool-file")
        with gr.Column():
            fmt = gr.Dropdown(list(FORMATS), value="auto", label="Format")
            import_mode = gr.Radio([(label, key) for key, label in IMPORT_MODES.items()], value="add",
                                   label="The imported tools", elem_id="world-import-mode")
        import_button = gr.Button("Import tools", elem_id="world-import")
    with gr.Accordion("Infer a tool's response schema (gives it a skeleton canvas)", open=False):
        with gr.Row():
            infer_tool = gr.Textbox(label="Tool name", scale=1, elem_id="world-infer-tool")
            example = gr.Code(label="An example response (JSON; a list of examples works too)", language="json",
                              lines=4, elem_id="world-infer-example")
        with gr.Row():
            infer_example = gr.Button("Infer from the example", elem_id="world-infer-button")
            infer_saved = gr.Button("Infer from this world's saved responses")
            sketch_button = gr.Button("Ask the world model for it", elem_id="world-sketch-button")
    with gr.Row():
        validate_button = gr.Button("Validate")
        save_button = gr.Button("Save new version", variant="primary", elem_id="world-save")
        download = gr.DownloadButton("Download world file")
    status = gr.Markdown(elem_id="world-status")

    fields = [name, description, simulator, task, state, tools, rules, directives]
    # choosing a world opens its newest version at once (Load reopens the chosen version, discarding edits)
    picker.input(lambda n: pick_world(ctx, n), picker, version, api_name="world_versions").then(
        lambda i: load_version(ctx, i), version, fields + [status], api_visibility="private")
    load_button.click(lambda i: load_version(ctx, i), version, fields + [status], api_name="load_world")
    version.input(lambda i: load_version(ctx, i), version, fields + [status], api_visibility="private")
    opener.upload(open_world_file, opener, fields + [status], api_name="open_world_file")
    validate_button.click(validate_fields, fields, status, api_name="validate_world")
    for key, editor, shown in (("tools", tools, tools_status), ("rules", rules, rules_status)):
        # validated as you type, the problems shown right under the editor
        editor.input(partial(editor_status, key), fields, shown, show_progress="hidden", trigger_mode="always_last",
                     api_visibility="private")
    save_button.click(lambda *f: save_version(ctx, *f), fields, [status, picker, version], api_name="save_world")
    # the button downloads the value it holds when clicked, so that value follows every edit
    gr.on([field.change for field in fields], world_file_for_download, fields, download, show_progress="hidden",
          trigger_mode="always_last", api_name="download_world")
    import_button.click(import_tools_into, [upload, fmt, tools, import_mode], fields + [status], api_name="import_tools")
    new_button.click(lambda: (gr.update(value=None), gr.update(choices=[], value=None), *new_world_fields(),
                              "A new world: give it a name, write or import its tools, then **Save new version**."),
                     None, [picker, version] + fields + [status], api_name="new_world")
    infer_example.click(infer_from_example, [tools, infer_tool, example], [tools, status], api_name="infer_schema")
    infer_saved.click(lambda t, n, w: infer_from_saved(ctx, t, n, w), [tools, infer_tool, name], [tools, status],
                      api_name="infer_schema_saved")
    sketch_button.click(lambda t, *f: sketch_with_model(ctx, t, *f), [infer_tool, *fields], [tools, status],
                        api_name="sketch_schema")

    def open_first() -> tuple:
        names = world_names(ctx)
        first = names[0] if names else None
        versions = version_choices(ctx, first)
        world_id = versions[0][1] if versions else None
        loaded = load_version(ctx, world_id) if world_id else (gr.update(),) * len(FIELDS) + ("",)
        return (gr.update(choices=names, value=first), gr.update(choices=versions, value=world_id), *loaded)

    studio.load(open_first, None, [picker, version] + fields + [status], api_visibility="private")
