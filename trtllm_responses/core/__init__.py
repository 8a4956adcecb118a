"""What every layer shares and that imports nothing else of the package.

``errors.py`` (the exception tree, each mapped once to OpenAI's error body), ``ids.py`` (minting
and checking ids), ``wire.py`` (JSON for the wire), ``bounded_cache.py`` (a byte-bounded LRU),
``files.py`` (atomic writes, hashes).
"""
