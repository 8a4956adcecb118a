"""``python -m trtllm_responses.cli``: the same command as ``trtllm-responses``."""

import sys

from .command import main

sys.exit(main())
