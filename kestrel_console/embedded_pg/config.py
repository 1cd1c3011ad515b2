"""The settings file Kestrel writes into a cluster's data directory at every start."""

from __future__ import annotations

import re
from collections.abc import Mapping

CONF_NAME = "kestrel_embedded.conf"
INCLUDE_LINE = f"include_if_exists = '{CONF_NAME}'"

_SETTING_NAME = re.compile(r"^[a-z_][a-z0-9_.]*$")

Setting = str | int | float | bool


def quote(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "''") + "'"


def setting_value(name: str, value: Setting) -> str:
    """Render one server setting for the config file (names checked, strings quoted)."""
    if not _SETTING_NAME.match(name):
        raise ValueError(f"invalid PostgreSQL setting name {name!r}: use lower-case letters, digits, _ and .")
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, int | float):
        return str(value)
    return quote(str(value))


def settings_file(host: str, port: int, socket_dir: str, *, durable: bool, settings: Mapping[str, str]) -> str:
    """The text of CONF_NAME: where to listen, durability, and the caller's (rendered) settings."""
    lines = [
        "# Written by Kestrel (kestrel_console.embedded_pg) at every start: edits are lost.",
        f"listen_addresses = '{host}'",
        f"port = {port}",
        f"unix_socket_directories = {quote(socket_dir)}",
    ]
    if not durable:
        lines += ["fsync = off", "full_page_writes = off"]
    lines += [f"{name} = {value}" for name, value in settings.items()]
    return "\n".join(lines) + "\n"
