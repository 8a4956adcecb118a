"""The request side: what a client sent, checked before anything else runs.

``protocol.py`` (the Responses request model and its parsing), ``fields.py`` (field checks shared
with other shapes), ``tools.py``, ``tool_choice.py``, ``text_format.py`` and ``items.py`` (the typed
values ``tools``, ``tool_choice``, ``text`` and ``input`` are parsed into, once), ``input_items.py``
(input items as ``input_items`` lists them),
``pagination.py`` (cursor pages of ``list`` objects), ``chat.py`` and ``chat_messages.py`` (a Chat
Completions request read as a Responses request). Imports only ``core/``.
"""
