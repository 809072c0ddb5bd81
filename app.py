"""Entry point: `python app.py` opens World Model Studio at http://127.0.0.1:7860 on the embedded default model.

Takes the options of `wmstudio serve` (`python app.py --port 8000`, `--db`, `--model`, `--auth USER:PASS`)."""

import sys

from wmstudio.cli import app

if __name__ == "__main__":
    app(["serve", *sys.argv[1:]], prog_name="app.py")
