#!/usr/bin/env python3
"""Build a serving bundle engines/<name>/ from a gpt-oss checkpoint; the same as `trtllm-responses build`.

python scripts/build_engine.py /models/gpt-oss-120b --profile throughput --gpu blackwell
"""

import sys

from trtllm_responses.cli.command import main

if __name__ == "__main__":
    sys.exit(main(["build", *sys.argv[1:]]))
