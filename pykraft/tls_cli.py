"""``pykraft tls create``: a cluster's CA, a certificate per process or client, and a properties file for each —
what ``pykraft cluster up --tls`` makes in-process, for clusters started some other way (docker compose:
``docker-compose.tls.yml`` runs it in a one-shot service that fills the ``tls`` volume).

``pykraft tls create --dir DIR NAME... [--dns HOST]... [--authorize]`` keeps or makes ``DIR/ca.crt``, ``ca.key`` and
``NAME.crt``/``NAME.key`` for each NAME (:func:`pykraft.security.ca.ensure_cluster_certificates`: idempotent, keys
0600, each certificate naming NAME, ``localhost``, ``127.0.0.1`` and every ``--dns``), and writes
``DIR/NAME.properties``: ``security.protocol=SSL`` and the three locations, for ``pykraft node|broker --config`` or
an admin tool's ``--command-config``. With ``--authorize`` the files of the processes (``controller-*``,
``broker-*``) also turn authorization on with every NAME a super user, as ``cluster up --tls`` does: ACLs are for
everyone else. Paths in the files are as ``--dir`` names them (absolute inside a container's volume).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pykraft.security.ca import DEFAULT_DNS, ensure_cluster_certificates

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
PROCESS_PREFIXES = ("controller-", "broker-")


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="tls_command", required=True, metavar="SUBCOMMAND")
    create = sub.add_parser("create", help="make (or keep) the CA, certificates and properties files under --dir")
    create.add_argument("--dir", required=True, help="where the CA, certificates, keys and properties go")
    create.add_argument("names", nargs="+", metavar="NAME", help="a principal: controller-1, broker-101, admin, ...")
    create.add_argument(
        "--dns", action="append", default=[], metavar="HOST", help="another name every certificate carries"
    )
    create.add_argument(
        "--authorize",
        action="store_true",
        help="the processes' files (controller-*, broker-*) also turn authorization on, every NAME a super user",
    )


def properties_of(name: str, names: list[str], files: dict[str, str], authorize: bool) -> dict[str, str]:
    props = dict(files)
    if authorize and name.startswith(PROCESS_PREFIXES):
        props["authorizer.class.name"] = AUTHORIZER
        props["super.users"] = ";".join(f"User:{n}" for n in sorted(names))
    return props


def run(args: argparse.Namespace) -> int:
    names = list(dict.fromkeys(args.names))
    directory = Path(args.dir)
    try:
        certs = ensure_cluster_certificates(directory, names, dns=[*DEFAULT_DNS, *args.dns])
    except (ValueError, OSError) as e:
        print(f"pykraft tls create: {e}", file=sys.stderr)
        return 2 if isinstance(e, ValueError) else 1
    for name in names:
        props = properties_of(name, names, certs[name].properties(), args.authorize)
        lines = [f"# pykraft tls create: {name}'s TLS settings (--config for a process, --command-config for a tool)"]
        lines += [f"{k}={v}" for k, v in props.items()]
        (directory / f"{name}.properties").write_text("\n".join(lines) + "\n")
    print(f"{len(names)} certificates from the CA in {directory}: " + ", ".join(f"{n}.properties" for n in names))
    return 0
