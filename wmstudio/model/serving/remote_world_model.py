"""A world model reached over HTTP (`wmstudio serve-wm`'s `/v1/world/step`), for trainers that share one server.

A GRPO run on several GPUs, or an evaluation beside the studio, need not load a world model in every process: they
send each call to one server, whose request batcher lets concurrent calls share its denoising forwards. The
answer is the server's `generate` on the same world, history, call and anchors, so it equals a local one."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from wmstudio.problems import InvalidInput, Problem
from wmstudio.world.history import HistoryStep
from wmstudio.world.spec import Call, WorldSpec
from wmstudio.world.steering.anchors import Anchor

STEP_PATH = "/v1/world/step"
TIMEOUT_S = 300.0


@dataclass
class RemoteAnswer:
    """The server's answer to one call: the response text and its check report (as the server sent it)."""

    response: str
    checks: dict[str, Any]


class WorldModelUnavailable(RuntimeError):
    """The server could not answer at all (unreachable, refused the key, failed): a run cannot go on without it,
    unlike a call it refuses (InvalidInput), which an episode's world answers as an API would."""


class RemoteWorldModel:
    """`answer(world, call, anchors, history)` posts a world step to the server at `url` (its key, when it has one,
    as a bearer token). InvalidInput names the fields of a call the server refused (422); WorldModelUnavailable says
    why there was no answer."""

    def __init__(self, url: str, api_key: str | None = None, timeout_s: float = TIMEOUT_S):
        url = (url or "").strip().rstrip("/")
        if not url.startswith(("http://", "https://")):
            raise InvalidInput(Problem("world_model_url", f"{url!r} is not an http(s) address: give the server's "
                                                          "base address, e.g. http://127.0.0.1:8000"))
        self.url, self.api_key, self.timeout_s = url, api_key, timeout_s
        self.name = f"{url}{STEP_PATH}"

    def answer(self, world: WorldSpec, call: Call, anchors: Sequence[Anchor] = (),
               history: Sequence[HistoryStep] = ()) -> RemoteAnswer:
        body = {"world": world.to_json(), "call": call.to_json(), "history": [step.to_json() for step in history],
                "anchors": {anchor.path: anchor.value for anchor in anchors}}
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        request = urllib.request.Request(self.name, data=json.dumps(body).encode("utf-8"), headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as reply:
                data = json.loads(reply.read().decode("utf-8"))
        except urllib.error.HTTPError as err:
            if err.code == 422:
                raise InvalidInput(_problems(err)) from None
            hint = " (set WMSTUDIO_API_KEY to the server's key)" if err.code in (401, 403) else ""
            raise WorldModelUnavailable(f"{self.name} answered {err.code}{hint}: {err.reason}") from None
        except (urllib.error.URLError, OSError, ValueError) as err:
            raise WorldModelUnavailable(f"{self.name} could not be reached ({err}): start `wmstudio serve-wm` "
                                        "there, or check --world-model-url") from None
        return RemoteAnswer(str(data.get("response", "")), data.get("checks") or {})


def _problems(err: urllib.error.HTTPError) -> list[Problem]:
    """The fields a 422 names (`loc` after `body`), as the server worded them."""
    try:
        detail = json.loads(err.read().decode("utf-8")).get("detail")
    except (ValueError, AttributeError, OSError):
        detail = None
    if not isinstance(detail, list) or not detail:
        return [Problem("call", f"the world model server refused it: {detail or err.reason}")]
    return [Problem(".".join(str(p) for p in d.get("loc", [])[1:]) or "call", str(d.get("msg")))
            for d in detail if isinstance(d, dict)]
