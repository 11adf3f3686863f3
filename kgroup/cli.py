"""``kgroup`` command line.

``kgroup serve [--config FILE] [--override key=value ...]`` mirrors ``kafka-server-start.sh
config/server.properties --override key=value``; ``topics``, ``groups``, ``produce`` and
``consume`` mirror kafka-topics.sh, kafka-consumer-groups.sh and the console producer/consumer
(their options are parsed by ``kgroup.client.cli``), ``share-groups`` kafka-share-groups.sh
(``kgroup.client.share_groups_cli``); ``cluster`` runs a local cluster over ZooKeeper
(``kgroup.cluster.local``).
"""
from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys


def _serve(args) -> int:
    import os

    from .broker.broker import Broker
    from .broker.config import BrokerConfig, ConfigError
    from .storage.fs import check_data_dir
    try:
        config = BrokerConfig.load(args.config, args.override or [])
    except (ConfigError, OSError) as e:
        print(f"kgroup: {e}", file=sys.stderr)
        return 2
    data_dir = os.path.abspath(config.log_dir)
    try:
        check_data_dir(data_dir)
    except OSError as e:
        # One line and a non-zero exit, as Kafka's "none of the specified log dirs ... can be
        # created or read": never a traceback for an operator's mistake.
        print(f"kgroup: cannot use log.dirs {data_dir}: {e.strerror or e} "
              f"({e.filename or data_dir})", file=sys.stderr)
        return 1

    async def main() -> int:
        from .cluster.errors import ClusterStartError
        try:
            broker = Broker(config)
        except ClusterStartError as e:
            print(f"kgroup: {e}", file=sys.stderr)
            return 1
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        # A log directory failure stops the broker with exit code 1 (Kafka halts with 1), once
        # the answers to the requests in flight have been written.
        broker.log_dir_failure.on_offline = lambda: loop.call_later(0.2, stop.set)
        try:
            await broker.start()
        except ClusterStartError as e:
            print(f"kgroup: {e}", file=sys.stderr)
            await broker.stop()
            return 1
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        logging.getLogger("kgroup").info("shutting down")
        await broker.stop()
        return 1 if broker.log_dir_failure.offline else 0

    return asyncio.run(main())


_TOOLS = {"topics": "main_topics", "groups": "main_groups", "produce": "main_produce",
          "consume": "main_consume", "configs": "main_configs", "delete-records": "main_delete_records",
          "features": "main_features", "transactions": "main_transactions"}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "dump-log":
        from . import dump_log
        return dump_log.main(argv[1:])
    if argv and argv[0] == "inject":
        from .client import fault_injection
        return fault_injection.main(argv[1:])
    if argv and argv[0] == "cluster":
        from .cluster import local
        return local.main(argv[1:])
    if argv and argv[0] == "share-groups":
        from .client import share_groups_cli
        logging.basicConfig(level="WARNING", format="%(levelname)s %(name)s: %(message)s")
        return share_groups_cli.main_share_groups(argv[1:])
    if argv and argv[0] == "acls":
        from .client import acls_cli
        logging.basicConfig(level="WARNING", format="%(levelname)s %(name)s: %(message)s")
        return acls_cli.main_acls(argv[1:])
    if argv and argv[0] == "reassign-partitions":
        from .client import reassign_cli
        logging.basicConfig(level="WARNING", format="%(levelname)s %(name)s: %(message)s")
        return reassign_cli.main_reassign_partitions(argv[1:])
    if argv and argv[0] in _TOOLS:
        from .client import cli as client_cli
        logging.basicConfig(level="WARNING", format="%(levelname)s %(name)s: %(message)s")
        return getattr(client_cli, _TOOLS[argv[0]])(argv[1:])
    parser = argparse.ArgumentParser(prog="kgroup", description="A Kafka-compatible broker for consumer groups.")
    parser.add_argument("--log-level", default="INFO")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run the broker")
    serve.add_argument("--config", help="a server.properties file")
    serve.add_argument("--override", action="append", metavar="KEY=VALUE",
                       help="override a config key (Kafka's names), repeatable")
    serve.set_defaults(func=_serve)
    for name, what in (("topics", "create, list, describe, alter, delete topics (like kafka-topics.sh)"),
                       ("configs", "describe or alter topic and broker configs (like kafka-configs.sh)"),
                       ("delete-records", "delete records up to offsets (like kafka-delete-records.sh)"),
                       ("features", "describe, upgrade, downgrade feature levels (like kafka-features.sh)"),
                       ("transactions", "list, describe, find hanging, abort transactions (like kafka-transactions.sh)"),
                       ("acls", "add, remove, list ACLs (like kafka-acls.sh)"),
                       ("reassign-partitions", "generate, execute, verify, cancel, list partition reassignments "
                                               "(like kafka-reassign-partitions.sh)"),
                       ("groups", "list, describe, delete groups, reset offsets (like kafka-consumer-groups.sh)"),
                       ("share-groups", "list, describe, delete share groups, reset or delete their offsets "
                                        "(like kafka-share-groups.sh)"),
                       ("produce", "console producer"), ("consume", "console consumer"),
                       ("cluster", "a local cluster over ZooKeeper: up, down, kill/stop/pause/resume/start N"),
                       ("inject", "fault injection into a broker that enables it (kgroup.fault.injection.enable)"),
                       ("dump-log", "print a segment's batches (--offsets-decoder for __consumer_offsets)")):
        sub.add_parser(name, help=what, add_help=False)
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="[%(asctime)s] %(levelname)s %(name)s: %(message)s")
    return args.func(args)
