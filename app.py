"""Entry point: `python app.py` opens World Model Studio at http://127.0.0.1:7860."""

from wmstudio.ui.studio import launch

if __name__ == "__main__":
    launch()
