"""Settings: `.critic.yaml` discovery, validation, precedence (flag > env > config > default)."""

import os
from collections.abc import Mapping
from typing import Any, NamedTuple

from critic_cli import yamlsafe
from critic_cli.errors import ConfigError, UsageError
from critic_cli.inputs import DEFAULT_GLOBS, DEFAULT_MAX_BYTES
from critic_cli.record import FAIL_ON
from critic_cli.signals import DEFAULT_THRESHOLD
from critic_cli.validate import Validator

CONFIG_NAME = ".critic.yaml"
RESPONSE_FORMATS = ("auto", "json_schema", "json_object", "none")
DEFAULT_KEY_VARS = ("CRITIC_API_KEY", "OPENAI_API_KEY")
DEFAULT_REFUSAL = "I can't share that response. It did not pass review."
ENV_VARS = {"model": "CRITIC_MODEL", "base_url": "CRITIC_BASE_URL",
            "cache_dir": "CRITIC_CACHE_DIR"}


def default_cache_dir() -> str:
    """Return the user cache directory for critic (``$XDG_CACHE_HOME/critic``)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "critic")


class Settings(NamedTuple):
    """Every review option, resolved; the API key is held but never shown."""

    model: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    threshold: float = DEFAULT_THRESHOLD
    sensitive_tags: tuple[str, ...] = ()
    rules: tuple[str, ...] = ()
    fail_on: str = "revise"
    top_k: int = 5
    jobs: int = 8
    timeout: float = 60.0
    max_retries: int = 2
    response_format: str = "auto"
    prompt_template: str | None = None
    temperature: float = 0.0
    seed: int | None = None
    reflect: bool = True
    refusal_message: str = DEFAULT_REFUSAL
    max_bytes: int = DEFAULT_MAX_BYTES
    glob: tuple[str, ...] = DEFAULT_GLOBS
    cache: bool = True
    cache_dir: str = ""  # "" is the user cache directory
    offline: bool = False
    config_path: str | None = None
    api_key: str | None = None

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={'***' if name == 'api_key' and value else value!r}"
                          for name, value in zip(self._fields, self, strict=True))
        return f"Settings({shown})"


_PATH_KEYS = ("prompt_template", "cache_dir")
_KEYS = tuple(name for name in Settings._fields if name not in ("config_path", "api_key"))


def find_config(start: str | None = None) -> str | None:
    """Return the nearest ``.critic.yaml`` from ``start`` (the working directory) upwards."""
    folder = os.path.realpath(start or os.getcwd())
    while True:
        candidate = os.path.join(folder, CONFIG_NAME)
        if os.path.isfile(candidate):
            return candidate
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent


def load_config(path: str) -> dict[str, Any]:
    """Read and validate a config file; relative paths in it are made relative to it."""
    try:
        document, lines = yamlsafe.load_file(path)
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such config file") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config: {exc.strerror or exc}") from None
    except yamlsafe.YAMLInputError as exc:
        raise ConfigError(yamlsafe.describe(path, exc)) from None
    if document is None:
        return {}
    v = Validator(path, lines, ConfigError)
    return check_settings(v, document, os.path.dirname(os.path.abspath(path)))


def check_settings(v: Validator, document: Any, base: str, *, where: str = "config files"
                   ) -> dict[str, Any]:
    """Validate a mapping of review settings; make its relative paths relative to ``base``."""
    if isinstance(document, dict) and "api_key" in document:
        raise v.fail(("api_key",), f"keep keys out of {where}; name a variable with "
                                   "api_key_env instead")
    data = dict(v.mapping(document, (), _KEYS))
    checked: dict[str, Any] = {}
    for key, value in data.items():
        if value is None:
            continue
        checked[key] = _check_value(v, key, value)
        if key in _PATH_KEYS:
            checked[key] = os.path.join(base, os.path.expanduser(checked[key]))
        elif key == "rules":
            checked[key] = tuple(_pack_path(base, p) for p in value)
    return checked


def _pack_path(base: str, name: str) -> str:
    """Return a rule pack's path relative to ``base``, or a shipped pack's name as it is."""
    from critic_cli.rules import builtin_pack

    path = os.path.join(base, os.path.expanduser(name))
    return name if not os.path.exists(path) and builtin_pack(name) else path


def _check_value(v: Validator, key: str, value: Any) -> Any:
    path = (key,)
    if key in ("model", "base_url", "api_key_env", "prompt_template", "refusal_message",
               "cache_dir"):
        return v.text(value, path)
    if key in ("sensitive_tags", "rules", "glob"):
        return tuple(sorted(v.tags(value, path))) if key == "sensitive_tags" else tuple(
            v.text(item, (*path, i)) for i, item in enumerate(v.items(value, path)))
    if key == "threshold":
        return v.number(value, path, low=0.0, high=1.0)
    if key == "timeout":
        seconds = v.number(value, path, low=0.0, high=600.0)
        if seconds <= 0:
            raise v.fail(path, "must be positive")
        return seconds
    if key == "temperature":
        return v.number(value, path, low=0.0, high=2.0)
    if key in ("top_k", "max_retries", "seed"):
        return v.integer(value, path)
    if key in ("jobs", "max_bytes"):
        return v.integer(value, path, low=1)
    if key == "fail_on":
        return v.choice(value, path, FAIL_ON)
    if key == "response_format":
        return v.choice(value, path, RESPONSE_FORMATS)
    return v.flag(value, path)  # reflect, cache, offline


def check_flags(flags: Mapping[str, Any]) -> None:
    """Raise UsageError for a flag value outside its range."""
    for name, low, high in (("threshold", 0.0, 1.0), ("temperature", 0.0, 2.0),
                            ("timeout", 0.0, 600.0)):
        value = flags.get(name)  # NaN fails every comparison, so it is refused here too
        if value is not None and not low <= value <= high:
            raise UsageError(f"--{name} must be between {low:g} and {high:g}, got {value}")
    for name in ("jobs", "max_bytes"):
        if flags.get(name) is not None and flags[name] < 1:
            raise UsageError(f"--{name.replace('_', '-')} must be at least 1")
    for name in ("top_k", "max_retries"):
        if flags.get(name) is not None and flags[name] < 0:
            raise UsageError(f"--{name.replace('_', '-')} must not be negative")
    if flags.get("timeout") is not None and flags["timeout"] <= 0:
        raise UsageError("--timeout must be positive")
    if flags.get("fail_on") is not None and flags["fail_on"] not in FAIL_ON:
        raise UsageError(f"--fail-on must be one of {', '.join(FAIL_ON)}")
    if flags.get("response_format") is not None and (
        flags["response_format"] not in RESPONSE_FORMATS
    ):
        raise UsageError(f"--response-format must be one of {', '.join(RESPONSE_FORMATS)}")
    if flags.get("cache") is False and flags.get("offline"):
        raise UsageError("--offline answers from the cache; it cannot go with --no-cache")


def resolve(
    flags: Mapping[str, Any],
    *,
    config: str | None = None,
    use_config: bool = True,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
) -> Settings:
    """Merge flags (None = not given), environment, config file and defaults into Settings."""
    env = os.environ if env is None else env
    check_flags(flags)
    path = config if config is not None else (find_config(cwd) if use_config else None)
    values: dict[str, Any] = load_config(path) if path else {}
    for key, var in ENV_VARS.items():
        if env.get(var):
            values[key] = env[var]
    if "base_url" not in values and env.get("OPENAI_BASE_URL"):
        # The openai client would read it on its own; read it here so that the call, the dry
        # run and the cache key all name the same server.
        values["base_url"] = env["OPENAI_BASE_URL"]
    values.update({key: value for key, value in flags.items() if value is not None})
    unknown = set(values) - set(_KEYS)
    if unknown:
        raise UsageError(f"unknown setting {sorted(unknown)[0]!r}")
    for key in ("sensitive_tags", "rules", "glob"):
        if key in values:
            values[key] = tuple(values[key])
    needs_key = (bool(values.get("model")) and values.get("reflect", True)
                 and not values.get("offline"))
    values["api_key"] = _api_key(values.get("api_key_env"), env, required=needs_key)
    values["config_path"] = path
    values["cache_dir"] = values.get("cache_dir") or default_cache_dir()
    return Settings(**values)


def _api_key(name: str | None, env: Mapping[str, str], *, required: bool) -> str | None:
    """Return the API key from the named variable (an error if unset and a call may be made)."""
    if name:
        if not env.get(name) and required:
            raise UsageError(f"api_key_env: the variable {name} is not set")
        return _clean_key(name, env.get(name))
    for var in DEFAULT_KEY_VARS:
        if env.get(var):
            return _clean_key(var, env[var])
    return None


def _clean_key(var: str, key: str | None) -> str | None:
    """Return the key without surrounding white space (a secret file's newline); check it."""
    key = (key or "").strip()
    if not key:
        return None
    if not key.isascii() or not key.isprintable() or any(c.isspace() for c in key):
        raise UsageError(f"the API key in {var} holds characters an HTTP header cannot carry "
                         "(non-ASCII, white space or control characters)")
    return key
