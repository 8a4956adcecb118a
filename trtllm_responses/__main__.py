"""``python -m trtllm_responses``: the same command as ``trtllm-responses``."""

import sys

from .cli.command import main

sys.exit(main())
