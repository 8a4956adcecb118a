"""The ``trtllm-responses`` command: ``serve``, ``build``, ``bench``, ``render``, ``parse``.

``command.py`` (the argument parser and ``main``, the console script's entry ``trtllm_responses.cli:main``),
``serve_options.py`` (serve's flags → a ServerConfig), ``launch.py`` and ``world.py`` (TensorRT-LLM's
launch, one node or many), ``build.py`` and ``checkpoint.py`` (a checkpoint → a serving bundle),
``bench.py`` and ``bench_wire.py`` (the load generator). The top layer: it may import every other.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..core import lazy_face

if TYPE_CHECKING:
    from .command import main

#: ``main`` is resolved on first use, so ``python -m trtllm_responses.cli.build``-style imports of a
#: sibling do not load the server.
__all__ = lazy_face(globals())
