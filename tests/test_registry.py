"""The lazy registries: every entry resolves, and a missing dependency names its install."""

from __future__ import annotations

import sys

import pytest

from evalgate._lazy import load_entry
from evalgate.errors import ConfigError
from evalgate.sandbox import BACKENDS as SANDBOXES
from evalgate.serve.registry import BACKENDS as SERVERS
from evalgate.suites.base import SUITES


@pytest.mark.parametrize(
    "target", sorted({*SERVERS.values(), *SUITES.values(), *SANDBOXES.values()})
)
def test_every_registered_target_resolves(target: str) -> None:
    # Backends import their heavy dependency lazily, so the class itself always loads.
    assert isinstance(load_entry(target, what="x", error=ConfigError), type)


def test_a_missing_dependency_names_the_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "evalgate_fake_backend", None)  # import fails
    with pytest.raises(ConfigError) as err:
        load_entry("evalgate_fake_backend.x:Y", what="model 'm': backend 'b'", error=ConfigError)
    assert str(err.value) == (
        "model 'm': backend 'b' needs 'evalgate_fake_backend', which is not installed; "
        "pip install evalgate_fake_backend"
    )


def test_a_known_extra_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "modal", None)
    with pytest.raises(ConfigError, match=r"pip install 'evalgate-action\[modal\]'"):
        load_entry("modal:App", what="sandbox backend 'modal'", error=ConfigError)


def test_our_own_missing_module_is_a_bug_not_a_config_error() -> None:
    with pytest.raises(ModuleNotFoundError):
        load_entry("evalgate.no_such_module:X", what="x", error=ConfigError)


@pytest.mark.parametrize("target", sorted(SERVERS.values()))
def test_every_model_server_takes_the_serve_context(target: str) -> None:
    """open_server builds every backend the same way, from the ServeContext's fields."""
    import dataclasses
    import inspect

    from evalgate.serve.base import ServeContext, ServeOptions

    cls = load_entry(target, what="x", error=ConfigError)
    params = list(inspect.signature(cls).parameters.values())
    fields = {field.name for field in dataclasses.fields(ServeContext)}
    # (model, **ctx: Unpack[ServeOptions]), ServeOptions being the context's fields, or the
    # fields one by one, keyword-only.
    if params[-1].kind is inspect.Parameter.VAR_KEYWORD:
        assert "Unpack[ServeOptions]" in str(params[-1].annotation), target
        assert set(ServeOptions.__annotations__) == fields
    else:
        named = {p.name: p.kind for p in params}
        for name in fields:
            assert named.get(name) is inspect.Parameter.KEYWORD_ONLY, (target, name)
