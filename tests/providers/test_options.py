"""One HTTPOptions value configures both HTTP providers; the package shows only its public names."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

import tether.providers
from tether import UserError
from tether.providers import Anthropic, HTTPOptions, OpenAICompatible


def test_the_package_namespace_holds_only_its_public_names() -> None:
    public = sorted(tether.providers.__all__)
    assert dir(tether.providers) == public
    names = {n for n, v in vars(tether.providers).items() if not n.startswith("_") and not inspect.ismodule(v)}
    assert names <= set(public)  # loaded public names, and submodules once imported
    for leaked in ("Any", "TYPE_CHECKING", "importlib", "annotations"):
        assert not hasattr(tether.providers, leaked), leaked
    assert all((getattr(tether.providers, n).__doc__ or "").strip() for n in public)


@pytest.mark.parametrize("provider", [OpenAICompatible, Anthropic])
def test_an_options_value_and_keywords_configure_either_provider(provider: type) -> None:
    options = HTTPOptions(base_url="http://127.0.0.1:9/v1", api_key="k", max_retries=5, timeout=7.0)
    model = provider("m", options=options, timeout=3.0)  # a keyword overrides the value's field
    assert (model.base_url, model.api_key, model.max_retries, model.timeout) == ("http://127.0.0.1:9/v1", "k", 5, 3.0)
    assert model.options == dataclasses.replace(options, timeout=3.0)
    assert options.timeout == 7.0  # the given value is not changed


def test_options_are_frozen_and_checked_once_for_both_providers() -> None:
    options = HTTPOptions()
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.timeout = 1.0  # type: ignore[misc]
    with pytest.raises(UserError, match=r"unknown provider option\(s\) \['retries'\]"):
        Anthropic("m", api_key="k", retries=3)
    with pytest.raises(UserError, match="either http_client or transport"):
        HTTPOptions(http_client=object(), transport=object())  # type: ignore[arg-type]


def test_the_key_never_shows_in_the_options_repr() -> None:
    assert "sk-secret" not in repr(HTTPOptions(api_key="sk-secret"))
