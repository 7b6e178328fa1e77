"""Configuration for the command line: which model, workspace, store and key.

Each setting comes from the first place that has it: a command-line flag, an
environment variable, the workspace's ``.tether/config.toml`` (out of the
agent's reach: the file and shell tools cannot touch ``.tether``), the user's
``~/.config/tether/config.toml``, then a default. Everything that can be wrong
with it (an unknown model prefix, a missing API key, an extra that is not
installed) raises :class:`ConfigError` with one line that says what to set or
install; the command line prints it and exits with status 2.

>>> settings = load_settings(workspace=".", model="scripted:demo.json")  # doctest: +SKIP
>>> agent = build_agent(settings, store, key)  # doctest: +SKIP
"""

from __future__ import annotations

import os
import secrets
import stat
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..exceptions import UserError
from ..providers.presets import PRESETS
from ._errors import ConfigError

if TYPE_CHECKING:
    from ..agent import Agent
    from ..policy import Policy
    from ..stores import RunStore

CONFIG_KEYS = frozenset(("model", "base_url", "api_key_env", "store", "instructions", "max_steps"))
PROVIDERS = ("openai", "anthropic", "local", "scripted")
DEFAULT_KEY_ENV = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
OPENAI_URL = "https://api.openai.com/v1"
OFFICIAL_URLS = frozenset((OPENAI_URL, "https://api.anthropic.com"))
INSTRUCTIONS = (
    "You are a careful assistant working in the directory {workspace}; paths are relative to it. "
    "To answer a question, look with read_file, list_dir or find_files and then answer: do not "
    "change anything. Write files or run commands only when the user asks for a change. If a "
    "human denies a call, do not try it another way: tell the user what you did not do."
)


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """Which brain: ``provider`` (openai, anthropic, local, scripted) and its ``name``."""

    provider: str
    name: str
    text: str  # as the user wrote it, for messages


@dataclass(frozen=True, slots=True)
class Settings:
    """Everything a command needs to build an agent and reach its runs."""

    workspace: Path
    store_url: str
    model: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    instructions: str | None = None
    max_steps: int = 20
    unsafe_no_sandbox: bool = False
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ), repr=False)
    brain_flags: str = ""  # the --model/--base-url/--api-key-env flags given, for "resume" hints


def load_settings(
    *,
    workspace: str | None = None,
    store: str | None = None,
    model: str | None = None,
    base_url: str | None = None,
    api_key_env: str | None = None,
    max_steps: int | None = None,
    unsafe_no_sandbox: bool = False,
    env: Mapping[str, str] | None = None,
) -> Settings:
    """Merge flags, environment and config files (first one that sets a key wins)."""
    env = dict(os.environ) if env is None else dict(env)
    ws = Path(workspace or os.getcwd()).expanduser().resolve()
    if not ws.is_dir():
        raise ConfigError(f"workspace {str(ws)!r} is not a directory (check --workspace)")
    files = [read_config(ws / ".tether" / "config.toml"), read_config(user_config_path(env))]
    flags = {"model": model, "base_url": base_url, "api_key_env": api_key_env, "store": store}
    from_env = {
        "model": env.get("TETHER_MODEL"),
        "base_url": env.get("TETHER_BASE_URL"),
        "store": env.get("TETHER_STORE"),
    }

    def pick(key: str) -> Any:
        for source in (flags, from_env, *files):
            if source.get(key) not in (None, ""):
                return source[key]
        return None

    steps = max_steps if max_steps is not None else pick("max_steps")
    return Settings(
        workspace=ws,
        store_url=pick("store") or default_store_url(ws),
        model=pick("model"),
        base_url=pick("base_url"),
        api_key_env=pick("api_key_env"),
        instructions=pick("instructions"),
        max_steps=int(steps) if steps is not None else 20,
        unsafe_no_sandbox=unsafe_no_sandbox,
        env=env,
        brain_flags="".join(
            f" --{name.replace('_', '-')} {value}"
            for name, value in (("model", model), ("base_url", base_url), ("api_key_env", api_key_env))
            if value
        ),
    )


def user_config_path(env: Mapping[str, str]) -> Path:
    base = env.get("XDG_CONFIG_HOME") or os.path.join(env.get("HOME") or "~", ".config")
    return Path(base).expanduser() / "tether" / "config.toml"


def read_config(path: Path) -> dict[str, Any]:
    """The settings in one TOML file ({} when it does not exist)."""
    try:
        with path.open("rb") as f:
            data = tomllib.load(f)
    except FileNotFoundError:
        return {}
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read config file {str(path)!r}: {exc}") from None
    unknown = sorted(set(data) - CONFIG_KEYS)
    if unknown:
        raise ConfigError(f"unknown setting {unknown[0]!r} in {str(path)!r}; known: {', '.join(sorted(CONFIG_KEYS))}")
    for key, value in data.items():
        kind = int if key == "max_steps" else str
        if not isinstance(value, kind) or isinstance(value, bool):
            names = {"int": "an integer", "str": "a string", "bool": "true or false"}
            raise ConfigError(
                f"setting {key!r} in {str(path)!r} must be {names.get(kind.__name__, kind.__name__)}, got {value!r}"
            )
    return data


def default_store_url(workspace: Path) -> str:
    """``sqlite:////abs/workspace/.tether/runs.db`` (four slashes: an absolute path)."""
    return f"sqlite:///{workspace / '.tether' / 'runs.db'}"


# -- the model -----------------------------------------------------------------


def parse_model(text: str | None, base_url: str | None = None) -> ModelSpec:
    """``openai:NAME``, ``anthropic:NAME``, a preset (``groq:NAME``...), ``local[:NAME]``, ``scripted:FILE`` or NAME.

    A bare name is an OpenAI-compatible model. A name with a colon that is not
    one of those prefixes is accepted as a model name only with a base URL
    (Ollama names look like ``llama3.1:8b``).
    """
    if not text:
        return ModelSpec("local", "", "local")
    prefix, colon, rest = text.partition(":")
    if text == "local" or (colon and (prefix in PROVIDERS or prefix in PRESETS)):
        if prefix != "local" and not rest:
            raise ConfigError(f"model {text!r} names no model after {prefix + ':'!r}")
        return ModelSpec(prefix, rest, text)
    if colon and not base_url:
        raise ConfigError(
            f"unknown model prefix {prefix!r} in {text!r}; use openai:NAME, anthropic:NAME, "
            "local or scripted:FILE (or give --base-url for an OpenAI-compatible server)"
        )
    return ModelSpec("openai", text, text)


def make_policy(settings: Settings) -> Policy:
    """The brain the settings name, or ConfigError saying what is missing."""
    spec = parse_model(settings.model, settings.base_url)
    if spec.provider == "scripted":
        from ._scripted import load_script

        return load_script(spec.name)
    if spec.provider == "local":
        return _local_model(spec)
    preset = PRESETS.get(spec.provider) if spec.provider != "openai" else None  # groq:, ollama:...
    default = "https://api.anthropic.com" if spec.provider == "anthropic" else OPENAI_URL
    base_url = settings.base_url or (preset.base_url if preset else default)
    key = _api_key(spec, settings, base_url)
    kwargs: dict[str, Any] = {"base_url": base_url, "api_key": key}
    if spec.provider == "anthropic":
        provider = _import_provider("tether.providers.anthropic", "Anthropic")
    else:
        provider = _import_provider("tether.providers.openai_compat", "OpenAICompatible")
        kwargs.update({"preset": preset} if preset else {})
    return _construct(provider, spec, kwargs)


def _api_key(spec: ModelSpec, settings: Settings, base_url: str | None) -> str | None:
    """The key from the environment; required by the vendors' own endpoints or when named.

    A server of your own (Ollama, vLLM, llama.cpp) usually wants none.
    """
    name = settings.api_key_env or DEFAULT_KEY_ENV.get(spec.provider) or PRESETS[spec.provider].key_env
    key = settings.env.get(name)
    if key:
        return key
    if base_url and settings.api_key_env is None and base_url.rstrip("/") not in OFFICIAL_URLS:
        return None
    raise ConfigError(f"model {spec.text!r} needs an API key: set {name} (or name another variable with --api-key-env)")


def _import_provider(module: str, name: str) -> Any:
    import importlib

    try:
        return getattr(importlib.import_module(module), name)
    except ImportError as exc:
        raise ConfigError(f"{module}.{name} cannot be imported ({exc}); reinstall tether") from None


def _construct(provider: Any, spec: ModelSpec, kwargs: dict[str, Any]) -> Policy:
    try:
        return provider(spec.name, **kwargs)  # type: ignore[no-any-return]
    except UserError as exc:
        raise ConfigError(str(exc)) from None


def _local_model(spec: ModelSpec) -> Policy:
    """The offline model, checked now (runtime and weights) rather than at the first turn."""
    import importlib

    try:
        importlib.import_module("xllamacpp")
        from ..providers.local import LocalModel
    except ImportError as exc:
        raise ConfigError(_missing_extra("local", exc)) from None
    kwargs: dict[str, Any] = {"threads": 1}
    if spec.name:
        kwargs["model"] = spec.name
    try:
        model = LocalModel(**kwargs)
        model.path()  # assembles and verifies the weights once; fails if they are missing
    except UserError as exc:
        raise ConfigError(str(exc)) from None
    return model


def _missing_extra(extra: str, exc: ImportError) -> str:
    missing = f" ({exc.name!r} is missing)" if exc.name else ""
    return f"the offline local model needs tether[{extra}]{missing}: pip install 'tether[{extra}]'"


# -- store, key and agent ----------------------------------------------------------


async def open_store(settings: Settings) -> RunStore:
    """The run store at ``settings.store_url`` (see :func:`tether.stores._open.open_store`)."""
    from ..stores._open import open_store as open_url

    try:
        return open_url(settings.store_url)
    except UserError as exc:
        raise ConfigError(str(exc)) from None


def signing_key(settings: Settings) -> bytes:
    """``TETHER_SIGNING_KEY``, or the workspace's ``.tether/signing.key`` (made on first use).

    The file holds 32 random bytes in hex and is created with mode 0600.
    """
    text = settings.env.get("TETHER_SIGNING_KEY")
    if text:
        try:
            return bytes.fromhex(text)
        except ValueError:
            return text.encode()
    path = settings.workspace / ".tether" / "signing.key"
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return _read_key(path)
    with os.fdopen(fd, "w") as f:
        f.write(secrets.token_hex(32) + "\n")
    return _read_key(path)


def _read_key(path: Path) -> bytes:
    if stat.S_IMODE(path.stat().st_mode) & 0o077:
        raise ConfigError(f"signing key {str(path)!r} is readable by others; run: chmod 600 {path}")
    try:
        return bytes.fromhex(path.read_text().strip())
    except ValueError:
        raise ConfigError(f"signing key {str(path)!r} is not hex; delete it to make a new one") from None


def build_tools(settings: Settings) -> list[Any]:
    """The workspace toolkit (files, shell, python), sandboxed unless told otherwise."""
    import warnings

    from ..exceptions import SandboxUnavailable
    from ..toolkits import UnsandboxedWarning, workspace_tools

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnsandboxedWarning)  # the CLI prints its own warning
        try:
            return workspace_tools(str(settings.workspace), unsafe_no_sandbox=settings.unsafe_no_sandbox)
        except SandboxUnavailable as exc:
            text = str(exc).replace("unsafe_no_sandbox=True", "--unsafe-no-sandbox")
            hint = "" if "--unsafe-no-sandbox" in text else " (or pass --unsafe-no-sandbox)"
            raise ConfigError(text + hint) from None


def build_agent(settings: Settings, store: RunStore, key: bytes) -> Agent:
    """The agent every command that runs the loop uses: same tools, same fingerprint."""
    from ..agent import Agent

    policy = make_policy(settings)
    instructions = settings.instructions or INSTRUCTIONS.format(workspace=settings.workspace)
    return Agent(
        policy,
        build_tools(settings),
        instructions=instructions,
        max_steps=settings.max_steps,
        store=store,
        signing_key=key,
    )
