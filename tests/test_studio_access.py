"""Who can reach the studio and whose Hugging Face token a push uses.

Loopback needs no sign-in; any other address needs --auth, a Space's login or --insecure-no-auth (with a warning).
Only the local single-user studio may push with the server's HF_TOKEN; a shared one needs the visitor's token."""

from __future__ import annotations

import pytest

from wmstudio.network import is_loopback
from wmstudio.problems import InvalidInput
from wmstudio.studio.curricula import push_token
from wmstudio.ui.access import exposure, single_user


@pytest.fixture(autouse=True)
def not_a_space(monkeypatch):
    monkeypatch.delenv("SPACE_ID", raising=False)
    monkeypatch.setenv("HF_TOKEN", "hf_server")


@pytest.mark.parametrize("host", ["127.0.0.1", "127.8.0.1", "localhost", "LOCALHOST", "::1", "[::1]"])
def test_loopback_addresses(host):
    assert is_loopback(host) and exposure(host, {}, False) == exposure(host, {}, True)
    assert exposure(host, {}, False).refusal is None and exposure(host, {}, False).warning is None


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.4", "studio.example.org", ""])
def test_other_addresses_need_sign_in_or_an_explicit_insecure_flag(host):
    assert not is_loopback(host)
    refused = exposure(host, {}, False, port=8000)
    assert refused.refusal.startswith(f"--host {host} can be reached from other machines and the studio has no "
                                      "sign-in: add --auth USER:PASSWORD")
    opened = exposure(host, {}, True, port=8000)
    assert opened.refusal is None and opened.warning.startswith(f"serving on {host}:8000 without sign-in")
    signed_in = exposure(host, {"ann": "pw"}, False)
    assert signed_in == exposure(host, {"ann": "pw"}, True) == exposure("localhost", {}, False)


def test_a_space_signs_people_in_with_hugging_face(monkeypatch):
    monkeypatch.setenv("SPACE_ID", "me/studio")
    assert exposure("0.0.0.0", {}, False).refusal is None
    assert not single_user("127.0.0.1", {})


def test_only_the_local_single_user_studio_pushes_with_the_servers_token():
    assert single_user("127.0.0.1", {}) and single_user("localhost", {})
    assert not single_user("0.0.0.0", {}) and not single_user("127.0.0.1", {"ann": "pw"})
    assert push_token("", None, single_user=True) == "hf_server"
    assert push_token("  hf_typed ", None, single_user=False) == "hf_typed"
    assert push_token(None, "hf_visitor", single_user=False) == "hf_visitor"
    with pytest.raises(InvalidInput, match="a shared studio does not push with its server's HF_TOKEN"):
        push_token("", None, single_user=False)
    with pytest.raises(InvalidInput, match="no Hugging Face token"):
        push_token("", None)  # not saying is not single-user: the server's token stays unused


def test_no_token_at_all_says_how_to_give_one(monkeypatch):
    monkeypatch.delenv("HF_TOKEN")
    with pytest.raises(InvalidInput, match="token: no Hugging Face token: paste a write token or set HF_TOKEN"):
        push_token(" ", None, single_user=True)


@pytest.mark.parametrize("single", [True, False])
def test_the_push_button_of_a_shared_studio_never_falls_back_to_the_servers_token(single, tmp_path, monkeypatch):
    import gradio as gr
    from gradio_client import Client
    from serving import free_port

    from wmstudio.store import open_store
    from wmstudio.studio.context import StudioContext
    from wmstudio.ui.rollouts_tab import build_rollouts_tab

    monkeypatch.setenv("WMSTUDIO_HOME", str(tmp_path))
    ctx = StudioContext(store=open_store(tmp_path / "studio.db"), model="unused", ar_model=None)
    with gr.Blocks() as app:
        build_rollouts_tab(ctx, app, single_user=single)
    app.queue()
    _, url, _ = app.launch(server_name="127.0.0.1", server_port=free_port(), prevent_thread_lock=True, quiet=True)
    try:
        message = Client(url, verbose=False).predict(1, "me/data", "", True, api_name="/curriculum_push")
    finally:
        app.close()
    if single:  # the server's token was taken: the push went on, to find no curriculum 1
        assert "`curriculum`" in message and "token" not in message
    else:
        assert "`token`" in message and "a shared studio does not push with its server's HF_TOKEN" in message
