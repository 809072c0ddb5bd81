"""The Hugging Face Space's entry: World Model Studio on the embedded world model, annotators signed in with
their Hugging Face accounts.

The database lives on the Space's local disk (`data/`, ephemeral) and is exported to a private dataset repo every
few minutes when `WMSTUDIO_DATASET_REPO` and `HF_TOKEN` are set as Space secrets. On ZeroGPU hardware the
denoising runs in a `@spaces.GPU` function (the main process never touches CUDA); elsewhere it runs as locally.
The world-model HTTP API is served beside the studio only when `WMSTUDIO_API_KEY` is set."""

import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # the package copied beside this file, not another installed one
os.environ.setdefault("WMSTUDIO_HOME", str(HERE / "data"))

from wmstudio.locations import user_home  # noqa: E402
from wmstudio.model.generation.generation import generate_stream  # noqa: E402
from wmstudio.ui.studio import launch  # noqa: E402

ZERO_GPU = bool(os.environ.get("SPACES_ZERO_GPU"))
GPU_SECONDS = 60


def on_zero_gpu(ctx) -> None:
    """Route the studio's denoising through a ZeroGPU function over a CUDA copy of the world model."""
    import spaces
    from wmstudio.model.serving.backends import load_backend

    gpu_backend = load_backend(ctx.model, device="cuda")

    @spaces.GPU(duration=GPU_SECONDS)
    def stream_on_gpu(world, call, anchors, history, settings):
        yield from generate_stream(gpu_backend, world, call, anchors, history, settings)

    ctx.generation_stream = lambda _backend, *args: stream_on_gpu(*args)


def on_started(studio, ctx) -> None:
    if ZERO_GPU:
        on_zero_gpu(ctx)
    repo, token = os.environ.get("WMSTUDIO_DATASET_REPO"), os.environ.get("HF_TOKEN")
    if repo and token:
        from wmstudio.serve.space import start_database_export

        start_database_export(ctx.store.path, user_home() / "export", repo, token)
        print(f"exporting the studio's database to the dataset repo {repo}", file=sys.stderr)
    if os.environ.get("WMSTUDIO_API_KEY"):
        from wmstudio.serve.http_api import mount_beside_studio

        mount_beside_studio(studio.app, ctx.backend(), ctx.store, os.environ["WMSTUDIO_API_KEY"])


if __name__ == "__main__":
    launch(host=os.environ.get("GRADIO_SERVER_NAME", "0.0.0.0"), port=int(os.environ.get("GRADIO_SERVER_PORT", 7860)),
           on_started=on_started)
