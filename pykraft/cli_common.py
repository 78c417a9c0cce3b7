"""What the admin commands (``topics``, ``leader-election``, ``configs``, ``reassign-partitions``) share: one-line
usage errors with exit code 2, input files, Kafka's exception names for error codes, and Kafka's topic filter
(``--topic`` as a regular expression)."""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable
from typing import Any, NoReturn

from controller.results import ApiError
from quorum.errors import Errors

USAGE_EXIT = 2

# Kafka's exception class for an error code, where it is not the code's name in CamelCase + "Exception".
_EXCEPTION_NAMES = {
    Errors.UNKNOWN_SERVER_ERROR: "UnknownServerException",
    Errors.REQUEST_TIMED_OUT: "TimeoutException",
    Errors.INVALID_TOPIC_EXCEPTION: "InvalidTopicException",
    Errors.INVALID_CONFIG: "InvalidConfigurationException",
    Errors.NOT_LEADER_OR_FOLLOWER: "NotLeaderOrFollowerException",
}


class UsageError(Exception):
    """A command line that cannot run: printed as one line, exit code 2."""


class DefaultsHelpFormatter(argparse.HelpFormatter):
    """Every option's help ends with its default, where it has one worth showing (not None, False or empty)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if (
            action.option_strings
            and default not in (None, False, argparse.SUPPRESS)
            and default != []
            and "default" not in text.lower()
        ):
            text += " (default: %(default)s)"
        return text


class OneLineErrorParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr (no usage dump, never a traceback), exit code 2; help
    shows each option's default."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", DefaultsHelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        self.exit(USAGE_EXIT, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


DEFAULT_CONNECT_TIMEOUT_MS = 5_000
SERVERS = "HOST:PORT[,HOST:PORT]"


def server_list(raw: str) -> list[str]:
    """The ``--bootstrap-server`` value of every command: a comma list of HOST:PORT (argparse names the flag in
    the error)."""
    from pykraft.client import parse_bootstrap_servers

    try:
        return parse_bootstrap_servers(raw)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def at_least(minimum: float, kind: type = int) -> Callable[[str], Any]:
    """An argparse type: a number (``kind``) no smaller than ``minimum``; argparse names the flag in the error."""

    def parse(raw: str) -> Any:
        try:
            value = kind(raw)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{raw!r} is not {'an integer' if kind is int else 'a number'}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {raw}")
        return value

    return parse


positive_int = at_least(1)
non_negative_int = at_least(0)


def command_config(raw: str) -> Any:
    """The ``--command-config`` value: a Kafka properties file read into TLS settings (None: PLAINTEXT), its
    certificate files checked now; argparse names the flag in the error (one line, exit code 2)."""
    from pykraft.security.command_config import CommandConfigError, tls_settings_from_command_config

    try:
        return tls_settings_from_command_config(raw)
    except CommandConfigError as e:
        message = str(e).removeprefix("--command-config: ").removeprefix("--command-config ")
        raise argparse.ArgumentTypeError(message) from None


def add_command_config_argument(p: argparse.ArgumentParser) -> None:
    """``--command-config FILE`` (Kafka's admin tools' flag): the client's ``security.protocol`` and ``ssl.*``
    settings; ``args.tls`` is then the TLS settings for :class:`~pykraft.client.AdminClient` (None: plaintext)."""
    p.add_argument(
        "--command-config",
        dest="tls",
        type=command_config,
        default=None,
        metavar="FILE",
        help="client properties (security.protocol=SSL, ssl.certificate.location, ssl.key.location, "
        "ssl.ca.location) for a TLS cluster, e.g. the admin.properties `cluster up --tls` writes",
    )


def add_bootstrap_arguments(
    p: argparse.ArgumentParser, *, required: bool = True, help: str = "controller nodes"
) -> None:
    """``--bootstrap-server`` (validated the same way everywhere), ``--connect-timeout-ms`` (how long a command
    waits for any of the servers to answer before it says none is reachable) and ``--command-config``."""
    p.add_argument("--bootstrap-server", type=server_list, required=required, metavar=SERVERS, help=help)
    p.add_argument(
        "--connect-timeout-ms",
        type=positive_int,
        default=DEFAULT_CONNECT_TIMEOUT_MS,
        metavar="MS",
        help="give up when none of the servers answers within this time",
    )
    add_command_config_argument(p)


def usage_failed(prog: str, error: UsageError) -> int:
    print(f"{prog}: {error}", file=sys.stderr)
    return USAGE_EXIT


def read_text_file(path: str, option: str) -> str:
    """The file an option names; one that cannot be read is a usage error naming the option and the file."""
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"--{option} {path}: cannot read it: {getattr(e, 'strerror', None) or e}") from None


def load_versioned_json(text: str, where: str, versions: tuple[int, ...] = (1,)) -> dict[str, Any]:
    """A tool's JSON input file: an object whose "version" (absent: the first, as Kafka's tools) is supported."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise UsageError(f"{where}: not valid JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
    if not isinstance(data, dict):
        raise UsageError(f"{where}: expected a JSON object, got {json.dumps(data)[:60]}")
    version = data.get("version", versions[0])
    if not isinstance(version, int) or isinstance(version, bool):
        raise UsageError(f'{where}: "version" must be an integer, got {json.dumps(version)}')
    if version not in versions:
        raise UsageError(f"{where}: Not supported version field value {version}")
    return data


def exception_name(code: int) -> str:
    """Kafka's exception class for an error code: UNKNOWN_TOPIC_OR_PARTITION -> UnknownTopicOrPartitionException."""
    if code in _EXCEPTION_NAMES:
        return _EXCEPTION_NAMES[Errors(code)]
    if code in Errors._value2member_map_:
        return "".join(w.capitalize() for w in Errors(code).name.split("_")) + "Exception"
    return f"KafkaException(error code {code})"


def describe_error(error: ApiError) -> str:
    """``ExceptionName: message``, as Kafka's tools print an exception."""
    return f"{exception_name(error.code)}: {error.message or error.code.name}"


def topic_pattern(raw: str) -> re.Pattern[str]:
    """Kafka's TopicFilter.IncludeList: trimmed, ',' means '|', spaces and surrounding quotes dropped; the whole
    name must match."""
    regex = raw.strip().replace(",", "|").replace(" ", "")
    regex = re.sub(r"""^["']+""", "", regex)
    regex = re.sub(r"""["']+$""", "", regex)
    try:
        return re.compile(regex)
    except re.error:
        raise UsageError(f"{regex} is an invalid regex.") from None


def is_literal_topic(raw: str) -> bool:
    """A --topic value that can only match itself (no regular-expression character other than none at all)."""
    return re.fullmatch(r"[A-Za-z0-9_-]+", raw) is not None


def matching_topics(names: list[str], raw: str) -> list[str]:
    pattern = topic_pattern(raw)
    return sorted(n for n in names if pattern.fullmatch(n))
