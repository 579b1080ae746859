"""The environment a child process starts with: this process's, without its secrets.

Every process the planner starts (the service's planner and validator workers, the translator and pyperplan
workers, each Fast Downward search) gets `child_env()`. None of them needs the service's bearer token or an API
key, and a child's environment is readable by anything that can read `/proc/<pid>/environ` as the same user, is
inherited by whatever it starts in turn, and lands in core dumps: so a secret stays in the process that uses it.
A variable is a secret when it is one this project reads (`SECRET_VARIABLES`) or its name says so
(`SECRET_WORDS`, a part of the name between underscores, any case: `GITHUB_TOKEN`, `AWS_SECRET_ACCESS_KEY`,
`db_password`). A child that does need one is given it by name (`keep`), and only that one.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping

# The service's bearer token (`portfolio serve --token`) and the LLM delegate's API key
# (`portfolio.delegates.llm_client.API_KEY_ENV`).
SECRET_VARIABLES = frozenset({"PORTFOLIO_TOKEN", "PORTFOLIO_LLM_API_KEY"})
SECRET_WORDS = ("KEY", "KEYS", "TOKEN", "TOKENS", "SECRET", "SECRETS", "PASSWORD", "PASSWD", "CREDENTIALS")
_WORDS = re.compile(r"[^A-Za-z0-9]+|(?<=[a-z0-9])(?=[A-Z])")


def is_secret(name: str) -> bool:
    """Whether the variable `name` holds a secret no child is given unless it asks (see the module docstring)."""
    if name in SECRET_VARIABLES:
        return True
    return any(word.upper() in SECRET_WORDS for word in _WORDS.split(name) if word)


def child_env(
    extra: Mapping[str, str] | None = None, keep: Iterable[str] = (), environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """`environ` (default this process's environment) without its secrets, except the variables named in `keep`,
    then `extra` on top."""
    source = os.environ if environ is None else environ
    kept = set(keep)
    env = {name: value for name, value in source.items() if name in kept or not is_secret(name)}
    env.update(extra or {})
    return env
