"""What the admin commands (``topics``, ``leader-election``, ``configs``) share: one-line usage errors with exit
code 2, Kafka's exception names for error codes, and Kafka's topic filter (``--topic`` as a regular expression)."""

from __future__ import annotations

import argparse
import re
import sys
from typing import NoReturn

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


class OneLineErrorParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr (no usage dump, never a traceback), exit code 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(USAGE_EXIT, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def usage_failed(prog: str, error: UsageError) -> int:
    print(f"{prog}: {error}", file=sys.stderr)
    return USAGE_EXIT


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
