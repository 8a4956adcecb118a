"""Harmony, the gpt-oss chat format: what it is, below everything that uses it.

The offline encoding (``encoding.py``, ``linear.py``), the one header grammar (``headers.py``), the
recovering reader (``parser.py``, ``completion.py``, ``json_cut.py``; ``spelled.py`` before it for
what was generated under a constraint), JSON Schemas as gpt-oss reads them
(``schema.py``), the tools a request declares and the calls they allow (``tools.py``), the one
decision of which of them ``tool_choice`` shows and requires (``tool_choice.py``), the
developer message (``developer.py``), Responses items ⇄ Harmony messages (``items.py``,
``input_messages.py``) and rendering off the event loop (``render_pool.py``). It imports only
``core/`` and ``request/``; the :class:`~trtllm_responses.adapter.HarmonyAdapter`, which builds a
request's prompt and constraint from these pieces, is a layer above (``adapter/``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..core import lazy_face
from .encoding import VOCAB_FILENAME, VOCAB_SHA256, HarmonyEncoding, ensure_vocab, load_encoding

if TYPE_CHECKING:
    from .completion import (
        ANSWER_HEADER,
        ParsedMessage,
        parse_completion,
        returned_reasoning,
        unreadable_message,
    )
    from .developer import developer_message, developer_spec
    from .headers import (
        FINAL_HEADERS,
        FREE_CHANNELS,
        JSON_CONTENT_TYPE,
        MessageHeader,
        call_headers,
        trailing_recipient,
    )
    from .input_messages import (
        BROWSER_PAGE,
        BROWSER_PAGES,
        CONFIG_EFFORT,
        CONFIG_TEXT,
        MODEL_READ,
        ConvertedInput,
        convert_item,
        input_to_messages,
        items_to_messages,
        list_tools_key,
        mcp_output_text,
    )
    from .items import (
        ItemKind,
        ItemTarget,
        build_output_item,
        callable_header,
        classify,
        completion_to_output_items,
        new_item_ids,
    )
    from .json_cut import JsonCut
    from .parser import ContentDelta, HarmonyStreamParser, MessageEnded, MessageStarted
    from .render_pool import RenderPool
    from .schema import check_strict, minimal_instance
    from .spelled import SpelledControlTokens
    from .tool_choice import ChosenTools, builtin_types_shown, choose_tools
    from .tools import (
        LOADED_TOOL,
        TOOL_SEARCH,
        CallOption,
        RequestTools,
        Tool,
        call_options,
        loaded_tools,
        recipient_candidates,
        server_call_options,
    )

#: All but the encoding resolved on first use: a render worker (``render_pool.py``) imports this package and
#: needs only the encoding; importing the rest (openai's types among them) took 1.1 s of CPU a worker, 0.2 s
#: now (``render_pool`` itself stays out of the package's import, so ``python -m`` runs it once).
__all__ = lazy_face(globals())
