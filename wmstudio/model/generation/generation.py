"""One call in, K checked responses out: prompt, canvas, denoising and check reports in one function.

`generate_stream` yields the Canvas (so a view knows the layout), each Frame as it is made, and
finally the Generation; `generate` just returns the Generation. The AR baseline takes the same arguments, with
the anchors turned into steering directives since it cannot see fields it has not written yet."""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterator, Sequence

from wmstudio.model.canvas.canvas import (
    FREE,
    MAX_CANVAS_TOKENS,
    SKELETON,
    Canvas,
    SpanBudgets,
    build_canvas,
    check_fits,
)
from wmstudio.model.canvas.layout import ExactItems, resolve_schema
from wmstudio.model.canvas.response_schemas import (  # noqa: F401 - where a canvas's schema comes from, named here too
    FROM_HISTORY,
    FROM_TOOL,
    FROM_TRAINING,
    called_tool,
    response_schema,
    schema_and_source,
    schema_of_answers,
)
from wmstudio.model.canvas.shape_canvas import WrittenSketch, read_sketch, shape_canvas
from wmstudio.model.denoising.sampler import Frame, SamplerSettings, denoise, merged_frames
from wmstudio.model.denoising.trace import DecodeTrace
from wmstudio.model.generation.helper_values import helpers_for
from wmstudio.model.generation.outcome_choice import ERROR, first_values
from wmstudio.model.generation.prompting import MIN_PROMPT_TOKENS, Prompt, prepare_prompt
from wmstudio.model.generation.repair import (
    REPAIR_CANDIDATES,
    REPAIR_ROUNDS,
    REPAIR_SECONDS,
    REPAIR_TEMPERATURE,
    RepairRound,
    fields_to_remask,
    held_anchors,
    problem_count,
    solve_by_rules,
)
from wmstudio.model.heads.call_echoes import identifier_shape
from wmstudio.model.heads.copy_head import copy_plan
from wmstudio.model.heads.listing_copy import listing_copy
from wmstudio.model.heads.outcome_head import Outcome
from wmstudio.model.heads.record_copy import RecordCopy, with_record
from wmstudio.model.serving.ar_pins import path_pins
from wmstudio.model.serving.backends import ArBaseline, Backend
from wmstudio.problems import InvalidInput
from wmstudio.world.checks.report import CheckReport, check_step
from wmstudio.world.heads.schema_sketch import sketch_world
from wmstudio.world.history import HistoryStep
from wmstudio.world.json_types import json_or
from wmstudio.world.spec import Call, WorldSpec
from wmstudio.world.steering.anchors import Anchor

# where the schema a skeleton is laid out from came from
FROM_SKETCH = "sketch"

AR_SLACK = 32  # tokens a left-to-right answer may run past its skeleton: its own key order and spacing, a long pin


@dataclass
class Sample:
    """One generated response: its text, its check report, and the steps that committed something."""

    response: str
    checks: CheckReport
    steps: int
    tokens: list[int] = field(default_factory=list)
    repairs: list[RepairRound] = field(default_factory=list)  # rule-guided repair rounds, when asked for
    outcome: Outcome | None = None  # the outcome head's choice this sample was denoised under

    def to_json(self) -> dict[str, Any]:
        data = {"response": self.response, "checks": self.checks.to_json(), "steps": self.steps}
        if self.outcome is not None:
            data["outcome"] = self.outcome.to_json()
        if self.repairs:
            data["repairs"] = [{"solved": r.solved} if r.solved else
                               {"remasked": r.remasked, "candidates_passing": sum(r.passed)} for r in self.repairs]
        return data


@dataclass
class Generation:
    """The result of one `generate`: samples, the canvas they came from, the frames, and timing."""

    model: str
    mode: str
    samples: list[Sample]
    settings: SamplerSettings
    anchors: list[Anchor]
    prompt_tokens: int
    canvas: Canvas | None = None
    frames: list[Frame] = field(default_factory=list)
    elapsed_ms: float = 0.0
    prompt_cut: list[str] = field(default_factory=list)  # what the prompt left out to fit the model's budget
    outcome: Outcome | None = None  # the first sample's outcome-head choice, in its slots (None: the canvas decided)
    schema_from: str | None = None  # FROM_TOOL, _HISTORY, _TRAINING or _SKETCH for a skeleton; None: a free canvas
    sketch: WrittenSketch | None = None  # what the model wrote on a shape canvas, when it was asked to
    prompt: str = ""  # the sections text the model read (its grounding is settings.grounding)

    @property
    def grounding(self) -> str:
        return self.settings.grounding

    def to_json(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "mode": self.mode,
            "grounding": self.settings.grounding,
            "schema_from": self.schema_from,
            "sketch": self.sketch.text if self.sketch is not None else None,
            "prompt_tokens": self.prompt_tokens,
            "prompt_cut": list(self.prompt_cut),
            "canvas_tokens": len(self.canvas) if self.canvas is not None else None,
            "settings": self.settings.to_json(),
            "anchors": [a.to_json() for a in self.anchors],
            "outcome": self.outcome.to_json() if self.outcome is not None else None,
            "elapsed_ms": round(self.elapsed_ms, 1),
            "samples": [s.to_json() for s in self.samples],
        }

    def outcome_summary(self) -> str | None:
        """What the outcome head chose, in words: its choice, or the outcomes the samples drew and how many drew
        each (at a temperature); None when the canvas decided."""
        drawn = [s.outcome for s in self.samples if s.outcome is not None]
        if not drawn:
            return None
        counts = Counter((outcome.status, outcome.error) for outcome in drawn)
        if len(counts) == 1:
            return f"chose {drawn[0]}"
        first = {(outcome.status, outcome.error): outcome for outcome in reversed(drawn)}
        return "drew per sample " + ", ".join(f"{first[key]} × {n}" for key, n in counts.items())

    def trace(self, sample: int = 0) -> DecodeTrace:
        """The decode trace of one sample: per committed position, the step and the confidence."""
        return DecodeTrace.of_frames(self.frames, sample)

    def decided_first(self, sample: int = 0) -> tuple[str, float] | None:
        """(the outcome's text, its probability when committed) when the sampler settled the outcome before any
        other value (a model trained outcome first), else None: how sure the model was, from the prompt alone."""
        span = self.canvas.outcome_span() if self.canvas is not None else None
        if span is None or not self.frames or sample >= len(self.frames[0].unmasked):
            return None
        first, slots = self.frames[0], range(span.start, span.end)
        if not first.unmasked[sample] or any(position not in slots for position in first.unmasked[sample]):
            return None
        tokens = [t for t in self.frames[-1].tokens[sample][span.start:span.end] if t != self.canvas.pad_id]
        return self.canvas.vocab.decode(tokens), float(first.confidences[sample][0])


def prepare_canvas(backend: Backend, world: WorldSpec, call: Call, anchors: Sequence[Anchor], free: bool = False,
                   free_length: int = 64, budgets: SpanBudgets = SpanBudgets(),
                   history: Sequence[HistoryStep] = (), schema: dict[str, Any] | None = None,
                   shape: Any = None) -> Canvas:
    """The canvas for `call`'s response: skeleton when the tool has a response schema, or (a tool without one) when
    the history shows it answering, from the schema those answers fit, or from the one the model was trained with
    for it; free otherwise or when `free`. `schema` given (one the model sketched) is laid out instead; `shape`
    (record_copy.record_shape) gives its arrays and maps the named record's items, and is dropped when the user's
    anchors or the canvas's size do not allow it."""
    schema = schema if schema is not None else response_schema(world, call, history,
                                                                getattr(backend, "trained_schemas", None))
    mode = FREE if free or schema is None else SKELETON
    options = dict(mode=mode, free_length=free_length, budgets=budgets, vocab_size=backend.vocab_size,
                   mask_id=backend.mask_id, pad_id=backend.span_pad_id)
    if shape is not None and mode == SKELETON:
        try:
            return build_canvas(backend.tokenizer, schema, anchors, shape=shape, **options)
        except InvalidInput:
            pass
    return build_canvas(backend.tokenizer, schema, anchors, **options)


def fitted_listing(backend: Backend, world: WorldSpec, call: Call, anchors: Sequence[Anchor],
                   history: Sequence[HistoryStep], schema: Any, copy: RecordCopy | None,
                   state: Any = None) -> RecordCopy | None:
    """A listing's copy cut to the first records whose canvas leaves the prompt a quarter of its budget: a page too
    long for the context is answered as a real API pages one (its first records, the count, a has-more flag or a
    next-page token), never refused; a record's own records (a customer's bills) are cut to their first ones so."""
    if copy is None or not isinstance(schema, dict) or (copy.listed <= 1 and not _lays_items(copy.shape)):
        return copy
    room = min(MAX_CANVAS_TOKENS, backend.max_length - max(MIN_PROMPT_TOKENS, (backend.prompt_tokens or 0) // 4))
    options = dict(mode=SKELETON, vocab_size=backend.vocab_size, mask_id=backend.mask_id, pad_id=backend.span_pad_id)
    whole, shown = copy, copy.listed or _most_items(copy.shape)
    while True:
        try:
            size: int | None = len(build_canvas(backend.tokenizer, schema, anchors, shape=copy.shape, **options))
        except InvalidInput:
            size = None  # over the longest canvas, or a shape the anchors do not allow: try fewer records
        if (size is not None and size <= room) or shown <= 1:
            return copy
        shown = min(shown - 1, shown * room // size) if size else shown // 2
        if not whole.listed:  # a record's own records: the first of each array (record_copy.owned_records)
            copy = whole.items_cut(max(shown, 1))
            continue
        cut = listing_copy(world, call, history, schema, max_items=max(shown, 1), state=state)
        if cut is None:
            return copy
        copy = RecordCopy(cut.shape, cut.values, copy.sources, cut.listed)


def _of_records(node: Any, root: dict[str, Any]) -> bool:
    """Whether a property is an array of objects (a page of records, a record's own records)."""
    items = resolve_schema(node.get("items"), root) if isinstance(node, dict) else None
    return isinstance(items, dict) and (items.get("type") == "object" or isinstance(items.get("properties"), dict))


def _lays_items(shape: Any) -> bool:
    return _most_items(shape) > 1


def _most_items(shape: Any) -> int:
    """The most items any array of `shape` lays out one by one."""
    if isinstance(shape, ExactItems):
        return max([len(shape), *(_most_items(item) for item in shape)])
    if isinstance(shape, dict):
        return max([0, *(_most_items(child) for child in shape.values())])
    return 0


def write_sketch(backend: Backend, world: WorldSpec, call: Call) -> WrittenSketch:
    """The model's sketch of the called tool's response schema, denoised greedily on a shape canvas from the tool's
    sketch prompt (world/schema_sketch.sketch_world: no response schema for it, no state): for a model trained to
    write one (`writes_shape`)."""
    canvas = shape_canvas(backend)
    prompt = prepare_prompt(backend, sketch_world(world, call.name), call, (), len(canvas))
    check_fits(len(prompt.ids), len(canvas), backend.max_length)
    frames = list(denoise(backend, prompt.ids, canvas, SamplerSettings()))
    return read_sketch(canvas, frames[-1].tokens[0] if frames else list(canvas.tokens))


def generate_stream(
    backend: Backend | ArBaseline,
    world: WorldSpec,
    call: Call,
    anchors: Sequence[Anchor] = (),
    history: Sequence[HistoryStep] = (),
    settings: SamplerSettings = SamplerSettings(),
) -> Iterator[Canvas | Frame | Generation]:
    """Yield the Canvas, a Frame per denoising step, then the Generation (responses checked against the world).
    The AR baseline yields only the Generation.

    InvalidInput for an unknown tool, bad anchors, or a prompt + canvas longer than the model's context."""
    the_call, pinned = call, list(anchors)
    started = time.perf_counter()
    if isinstance(backend, ArBaseline):
        yield _generate_ar(backend, world, the_call, pinned, history, settings, started)
        return
    schema, schema_from = schema_and_source(world, the_call, history, getattr(backend, "trained_schemas", None))
    sketch, canvas = None, None
    if schema is None and not settings.free and getattr(backend, "writes_shape", False):
        sketch = write_sketch(backend, world, the_call)
        try:  # a sketch the user's anchors do not fit, or too large to lay out, leaves the free canvas
            canvas = prepare_canvas(backend, world, the_call, pinned, history=history, schema=sketch.schema) \
                if sketch.schema is not None else None
            schema, schema_from = (sketch.schema, FROM_SKETCH) if canvas is not None else (None, None)
        except InvalidInput:
            canvas = None
    helpers = helpers_for(backend, world, the_call, pinned, history, settings, schema,
                          fit=lambda copy, now: fitted_listing(backend, world, the_call, pinned, history, schema,
                                                               copy, now))
    outcomes, copy, echoed, done = helpers.outcomes, helpers.copy, helpers.echoed, helpers.done
    groups, chosen, fixed = helpers.groups, helpers.chosen, helpers.fixed
    refused = canvas  # the canvas of a sample the outcome head refuses: no record's shape (a sketch's canvas as is)
    if canvas is None:
        shape = copy.shape if copy is not None else None
        held = first_values(fixed, chosen, error=False)
        canvas = prepare_canvas(backend, world, the_call, pinned, settings.free, settings.free_length,
                                history=history, schema=schema, shape=identifier_shape(shape, schema,
                                                                                       {**held, **done, **echoed}))
        refused_held = first_values(fixed, chosen, error=True)
        emptied = [key for key, value in (helpers.refused or {}).items()  # a refusal lists no records
                   if value == [] and _of_records((schema.get("properties") or {}).get(key), schema)]
        if (shape is not None or refused_held or emptied) and \
                any(o is not None and o.status == ERROR for o in chosen.values()):
            refused_shape = identifier_shape(None, schema, {**refused_held, **(helpers.kept or {}), **echoed})
            if emptied and isinstance(schema.get("properties"), dict):
                refused_shape = {**(refused_shape or dict.fromkeys(schema["properties"])),
                                 **{key: ExactItems([]) for key in emptied}}
            refused = prepare_canvas(backend, world, the_call, pinned, history=history, schema=schema,
                                     shape=refused_shape)
    canvases = {}
    for key, outcome in chosen.items():
        laid_out = refused if outcome is not None and outcome.status == ERROR and refused is not None else canvas
        canvases[key] = laid_out.with_values(*helpers.values_for(key, skeleton=canvas.mode == SKELETON))
    canvas = canvases[next(iter(groups))]  # the first sample's: the one the view draws
    longest = max(len(c) for c in canvases.values())
    prompt = prepare_prompt(backend, world, the_call, history, longest, grounding=settings.grounding,
                            retrieval=settings.retrieval)
    if copy is not None:
        prompt.sources = with_record(prompt.sources, copy.sources)
    prompt_ids = prompt.ids
    check_fits(len(prompt_ids), longest, backend.max_length)
    yield canvas
    frames: list[Frame] = []
    if len(groups) == 1:
        plan = copy_plan_for(backend, canvas, prompt) if settings.copy_head else None
        for frame in denoise(backend, prompt_ids, canvas, settings, copy=plan):
            frames.append(frame)
            yield frame
    else:  # samples drew different outcomes: each group is denoised under its own, in step with the others
        runs = []
        for number, (key, members) in enumerate(groups.items()):
            own = canvases[key]
            plan = copy_plan_for(backend, own, prompt) if settings.copy_head else None
            group_settings = replace(settings, samples=len(members), seed=settings.seed + number)
            runs.append((members, denoise(backend, prompt_ids, own, group_settings, copy=plan)))
        for frame in merged_frames(runs, settings.samples, [list(canvases[key].tokens) for key in groups]):
            frames.append(frame)
            yield frame
    sample_canvas = {k: canvases[key] for key, members in groups.items() for k in members}
    final = frames[-1].tokens if frames else [list(sample_canvas[k].tokens) for k in range(settings.samples)]
    results = []
    for k, tokens in enumerate(final):
        text = sample_canvas[k].decode(tokens)
        report = check_step(world, the_call, text, anchors=pinned, history=history)
        results.append(Sample(text, report, sum(1 for f in frames if f.unmasked[k]), tokens,
                              outcome=outcomes[k] if outcomes else None))
    if settings.repair and canvas.mode == SKELETON:
        for k, sample in enumerate(results):
            if not sample.checks.ok:
                held = sample.outcome.anchors(schema) if sample.outcome is not None else []
                results[k] = replace(_repair(backend, world, the_call, pinned, history, settings, prompt_ids, prompt,
                                             sample, outcome_held=held, schema=schema), outcome=sample.outcome)
    yield Generation(backend.name, canvas.mode, results, settings, pinned, len(prompt_ids), canvas, frames,
                     (time.perf_counter() - started) * 1000, prompt.rendered.cut, outcomes[0] if outcomes else None,
                     schema_from if canvas.mode == SKELETON else None, sketch, prompt.rendered.text)


def generate(backend: Backend | ArBaseline, world: WorldSpec, call: Call, anchors: Sequence[Anchor] = (),
             history: Sequence[HistoryStep] = (), settings: SamplerSettings = SamplerSettings(),
             on_frame: Callable[[Frame], None] | None = None) -> Generation:
    """`generate_stream` run to the end; `on_frame` sees each Frame as it is made (e.g. a progress view)."""
    for item in generate_stream(backend, world, call, anchors, history, settings):
        if isinstance(item, Generation):
            return item
        if on_frame is not None and isinstance(item, Frame):
            on_frame(item)
    raise RuntimeError("generation ended without a result")  # pragma: no cover - generate_stream always returns one


def anchors_as_directives(world: WorldSpec, anchors: Sequence[Anchor]) -> WorldSpec:
    """A copy of `world` whose directives also state each anchor (how an AR model is told about them)."""
    extra = [f"The response must have {a.path} = {json.dumps(a.value, ensure_ascii=False)}." for a in anchors]
    return replace(world, directives=[*world.directives, *extra])


def _generate_ar(backend: ArBaseline, world: WorldSpec, call: Call, anchors: list[Anchor],
                 history: Sequence[HistoryStep], settings: SamplerSettings, started: float) -> Generation:
    """Anchors become directives, and every anchor is written where the model opens its key (ar_pins.py). The
    helpers the MDLM has that are not diffusion's own (helper_values.py: the outcome head, record and listing copy,
    the call's ids, rule-fixed fields, under the same switches) are pins of the same kind, each sample those of the
    outcome it drew, the user's own over them. The token budget is the skeleton's length (with the copied record's
    shape, + AR_SLACK) or `free_length`."""
    steered = anchors_as_directives(world, anchors)
    tool = called_tool(world, call)
    schema = response_schema(world, call, history, getattr(backend, "trained_schemas", None))
    helpers = helpers_for(backend, world, call, anchors, history, settings, schema if not settings.free else None)
    budget = settings.free_length
    if schema is not None and not settings.free:
        has_mask = backend.tokenizer.mask_token_id is not None
        shape = helpers.copy.shape if helpers.copy is not None else None
        budget = len(_ar_skeleton(backend, schema, anchors, shape)) + AR_SLACK if has_mask else 256
    elif tool.response is not None and not settings.free:
        budget = 256
    prompt = prepare_prompt(backend, steered, call, history, budget, grounding=settings.grounding,
                            retrieval=settings.retrieval)
    if helpers.copy is not None:
        prompt.sources = with_record(prompt.sources, helpers.copy.sources)
    prompt_ids = prompt.ids
    check_fits(len(prompt_ids), budget, backend.max_length)
    own = path_pins(anchors)
    pins: list[dict[str, str]] = [own] * settings.samples
    for key, members in helpers.groups.items():  # each sample gets the helpers' values of the outcome it drew
        for k in members:
            pins[k] = {**path_pins(helpers.as_anchors(key)), **own}
    outputs = backend.generate(prompt_ids, max_new_tokens=budget, temperature=settings.temperature,
                               repetition_penalty=settings.repetition_penalty, samples=settings.samples,
                               seed=settings.seed, pins=pins)
    results = []
    for k, ids in enumerate(outputs):
        text = backend.tokenizer.decode(ids, skip_special_tokens=True)
        report = check_step(world, call, text, anchors=anchors, history=history)
        results.append(Sample(text, report, len(ids), ids,
                              outcome=helpers.outcomes[k] if helpers.outcomes else None))
    return Generation(backend.name, "autoregressive", results, settings, anchors, len(prompt_ids), None, [],
                      (time.perf_counter() - started) * 1000, prompt.rendered.cut,
                      helpers.outcomes[0] if helpers.outcomes else None, prompt=prompt.rendered.text)


def _ar_skeleton(backend: ArBaseline, schema: dict[str, Any], anchors: list[Anchor], shape: Any) -> Canvas:
    """The skeleton an MDLM would fill for the same answer (its length sizes the AR's token budget)."""
    if shape is not None:
        try:
            return build_canvas(backend.tokenizer, schema, anchors, shape=shape)
        except InvalidInput:
            pass
    return build_canvas(backend.tokenizer, schema, anchors)


def _repair(backend: Backend, world: WorldSpec, call: Call, pinned: list[Anchor], history: Sequence[HistoryStep],
            settings: SamplerSettings, prompt_ids: list[int], prompt: Prompt, sample: Sample,
            outcome_held: Sequence[Anchor] = (), schema: dict[str, Any] | None = None) -> Sample:
    """Rule-guided repair of one failed sample (model/generation/repair.py): before each of up to REPAIR_ROUNDS rounds, fields a
    failed rule's equality implies are set (a round without a model call); then K candidates with the fields the
    failed checks read remasked and the rest held. `outcome_held` (the outcome head's choice) is held like the
    user's anchors but not checked as one, and let go when the rules cannot pass with it (they have the last word).
    `schema` is the one the canvas was laid out from (the model's sketch, for a tool without one). No round starts
    after REPAIR_SECONDS of CPU. The best sample found, with its rounds."""
    best, rounds, started = sample, [], time.thread_time()
    holding = [*pinned, *outcome_held]

    def solved(sample: Sample) -> Sample:
        found = solve_by_rules(world, call, sample.response, sample.checks, holding, list(history))
        if found is None:
            return sample
        text, report, fields = found
        rounds.append(RepairRound(list(fields), [text], [report.ok], solved=fields))
        return replace(sample, response=text, checks=report)

    for round_number in range(REPAIR_ROUNDS):
        best = solved(best)
        if best.checks.ok or time.thread_time() - started > REPAIR_SECONDS:
            break
        value = json_or(best.response, None)
        remask = fields_to_remask(world, best.checks, value) if isinstance(value, dict) else []
        if not remask:
            break
        try:
            canvas = prepare_canvas(backend, world, call, held_anchors(value, remask, holding), history=history,
                                    schema=schema)
        except InvalidInput:
            break
        candidates = replace(settings, samples=REPAIR_CANDIDATES, repair=False, seed=settings.seed + round_number + 1,
                             temperature=max(settings.temperature, REPAIR_TEMPERATURE))
        plan = copy_plan_for(backend, canvas, prompt) if settings.copy_head else None
        frames = list(denoise(backend, prompt_ids, canvas, candidates, copy=plan))
        round_ = RepairRound(remask)
        rounds.append(round_)
        tried = []
        for tokens in frames[-1].tokens if frames else []:
            text = canvas.decode(tokens)
            report = check_step(world, call, text, anchors=pinned, history=history)
            tried.append(Sample(text, report, len(frames), tokens))
            round_.candidates.append(text)
            round_.passed.append(report.ok)
        if not tried:
            break
        round_.kept = min(range(len(tried)), key=lambda i: problem_count(tried[i].checks))
        round_.canvas, kept = canvas, round_.kept
        round_.frames = [Frame(f.step, [f.tokens[kept]], [f.unmasked[kept]], [f.confidences[kept]], f.done,
                               [f.copied[kept]] if f.copied else []) for f in frames]
        chosen = tried[round_.kept]
        if problem_count(chosen.checks) <= problem_count(best.checks):
            best = replace(chosen, steps=best.steps + len(frames))
        if best.checks.ok:
            break
    if not best.checks.ok:
        best = solved(best)
    if not best.checks.ok and outcome_held:
        again = _repair(backend, world, call, pinned, history, settings, prompt_ids, prompt, best, schema=schema)
        return replace(again, repairs=rounds + again.repairs)
    return replace(best, repairs=rounds)


def copy_plan_for(backend: Backend, canvas: Canvas, prompt: Prompt):
    """The copy head's plan for `canvas` (None without a head), a key the model never trained on ungated."""
    if backend.copy_head is None:
        return None
    trained = getattr(backend, "trained_schemas", None)
    return copy_plan(canvas, prompt.sources, known_keys=trained.key_names() if trained is not None else None)

