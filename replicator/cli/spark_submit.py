"""The entry point for spark-submit, which runs a Python file rather than a console script:

    spark-submit --master yarn --jars /usr/share/java/mariadb-java-client.jar \\
        "$(python -c 'import replicator.cli.spark_submit as m; print(m.__file__)')" \\
        backfill --config task.yaml

runs `shardmerge backfill --config task.yaml` (or verify) with spark-submit's master,
jars and settings (replicator/spark/session.py)."""

from __future__ import annotations

import sys

from replicator.cli.shardmerge import main

COMMANDS = ("backfill", "verify")  # the commands that run a Spark job


def submit(argv: list[str]) -> int:
    if not argv or argv[0] not in COMMANDS:
        print(
            f"usage: spark-submit [OPTIONS] {__file__} {{{','.join(COMMANDS)}}} --config FILE ...",
            file=sys.stderr,
        )
        return 2
    return main(argv)


if __name__ == "__main__":
    sys.exit(submit(sys.argv[1:]))
