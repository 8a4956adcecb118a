"""tensorrt_llm/grpc/openengine/disagg.py, faked: ``KvSessionRef`` ↔ ``DisaggregatedParams``, the hand-off.

As there (NVIDIA/TensorRT-LLM ``disagg.py`` at ``65e93a934b732e876f16fd893c56d21fdc1da1be``):

- ``disaggregated_params_from_request``: a request with ``kv.session`` is always ``generation_only``; the
  session is validated (neither ``ctx_info_endpoint``/an endpoint nor ``opaque_state``, an endpoint without a
  port, or neither ``session_id`` nor ``disagg_request_id``: ValueError), ``ctx_request_id = int(session_id)``
  (not an integer: ValueError), and ``attributes_struct`` gives back ``ctx_info_endpoint``, ``opaque_state``
  (base64), ``first_gen_tokens``, ``draft_tokens``, ``disagg_request_id`` (a decimal string), ``ctx_dp_rank``
  (else ``session.dp_rank``), ``schedule_style``, ``ctx_usage``. Without a session, ``extra["request_type"]``:
  absent is None (aggregated), ``"generation_only"`` a ValueError (it needs a session), else one of
  ``context_only``/``context_and_generation``.
- ``prefill_ready_response``: ``KvSessionRef(session_id=str(ctx_request_id), transfer_backend,
  dp_rank=ctx_dp_rank or 0)``, the attributes above where set (``opaque_state`` base64, ``disagg_request_id`` as
  a string: Struct numbers are doubles), the endpoint also split into ``endpoints``, in a ``PrefillReady`` with
  the request's usage.

Left out: ``first_gen_log_probs`` (the fake's context result never has them, so neither direction carries
them).
"""

import base64
from typing import Any, Optional

from google.protobuf import json_format, struct_pb2

from ...disaggregated_params import DisaggregatedParams, DisaggScheduleStyle
from .bindings import generation_pb2, kv_pb2

_REQUEST_TYPE_KEY = "request_type"
_EXTRA_REQUEST_TYPES = ("context_only", "context_and_generation")


def _struct_to_dict(struct: struct_pb2.Struct) -> dict[str, Any]:
    return json_format.MessageToDict(struct)


def _endpoint_to_str(endpoints: Any) -> Optional[str]:
    for endpoint in endpoints:
        if endpoint.host:
            return f"{endpoint.host}:{endpoint.port}" if endpoint.port else endpoint.host
    return None


def _validate_kv_session(session: Any, attrs: dict[str, Any]) -> None:
    endpoint = attrs.get("ctx_info_endpoint") or _endpoint_to_str(session.endpoints)
    if not endpoint and not attrs.get("opaque_state"):
        raise ValueError("kv.session must carry ctx_info_endpoint, an endpoint, or opaque_state")
    for item in session.endpoints:
        if item.host and not item.port:
            raise ValueError("kv.session endpoints must carry a port")
    if not session.session_id and attrs.get("disagg_request_id") is None:
        raise ValueError("kv.session must carry session_id or disagg_request_id")


def disaggregated_params_from_request(request: Any) -> Optional[DisaggregatedParams]:
    has_session = request.HasField("kv") and request.kv.HasField("session")
    if has_session:
        session = request.kv.session
        attrs = _struct_to_dict(session.attributes_struct)
        _validate_kv_session(session, attrs)
        params = DisaggregatedParams(request_type="generation_only")
        if session.session_id:
            try:
                params.ctx_request_id = int(session.session_id)
            except ValueError as error:
                raise ValueError("kv.session.session_id must be an integer context request id") from error
        endpoint = attrs.get("ctx_info_endpoint") or _endpoint_to_str(session.endpoints)
        if endpoint:
            params.ctx_info_endpoint = str(endpoint)
        opaque_state = attrs.get("opaque_state")
        if opaque_state:
            params.opaque_state = base64.b64decode(opaque_state, validate=True)
        if attrs.get("first_gen_tokens"):
            params.first_gen_tokens = [int(token) for token in attrs["first_gen_tokens"]]
        if attrs.get("draft_tokens"):
            params.draft_tokens = [int(token) for token in attrs["draft_tokens"]]
        if attrs.get("disagg_request_id") is not None:
            params.disagg_request_id = int(attrs["disagg_request_id"])
        if attrs.get("ctx_dp_rank") is not None:
            params.ctx_dp_rank = int(attrs["ctx_dp_rank"])
        elif session.dp_rank:
            params.ctx_dp_rank = session.dp_rank
        if attrs.get("schedule_style") is not None:
            params.schedule_style = DisaggScheduleStyle(int(attrs["schedule_style"]))
        if attrs.get("ctx_usage"):
            params.ctx_usage = {key: int(value) for key, value in attrs["ctx_usage"].items()}
        return params

    extra = _struct_to_dict(request.extra) if request.HasField("extra") else {}
    request_type = extra.get(_REQUEST_TYPE_KEY)
    if request_type is None:
        return None
    if request_type == "generation_only":
        raise ValueError(
            "a generation_only request must carry its context handoff in "
            "kv.session; extra.request_type alone cannot address one"
        )
    if request_type not in _EXTRA_REQUEST_TYPES:
        raise ValueError(
            f"extra.request_type must be one of {', '.join(_EXTRA_REQUEST_TYPES)}, got {request_type!r}"
        )
    return DisaggregatedParams(request_type=request_type)


def prefill_ready_response(
    request_id: str, disaggregated_params: DisaggregatedParams, transfer_backend: str, usage: Any = None
) -> Any:
    ctx_request_id = disaggregated_params.ctx_request_id
    session = kv_pb2.KvSessionRef(
        session_id="" if ctx_request_id is None else str(ctx_request_id),
        transfer_backend=transfer_backend or "",
        dp_rank=disaggregated_params.ctx_dp_rank or 0,
    )
    attributes: dict[str, Any] = {}
    endpoint = disaggregated_params.ctx_info_endpoint
    if endpoint:
        attributes["ctx_info_endpoint"] = endpoint
        host, _, port = str(endpoint).rpartition(":")
        if host and port.isdigit():
            session.endpoints.append(
                kv_pb2.KvEndpoint(host=host, port=int(port), protocol=transfer_backend or "")
            )
    if disaggregated_params.opaque_state:
        attributes["opaque_state"] = base64.b64encode(disaggregated_params.opaque_state).decode("utf-8")
    if disaggregated_params.first_gen_tokens:
        attributes["first_gen_tokens"] = list(disaggregated_params.first_gen_tokens)
    if disaggregated_params.draft_tokens:
        attributes["draft_tokens"] = list(disaggregated_params.draft_tokens)
    if disaggregated_params.disagg_request_id is not None:
        attributes["disagg_request_id"] = str(disaggregated_params.disagg_request_id)
    if disaggregated_params.ctx_dp_rank is not None:
        attributes["ctx_dp_rank"] = disaggregated_params.ctx_dp_rank
    if disaggregated_params.schedule_style is not None:
        attributes["schedule_style"] = int(disaggregated_params.schedule_style)
    if disaggregated_params.ctx_usage:
        attributes["ctx_usage"] = dict(disaggregated_params.ctx_usage)
    if attributes:
        session.attributes_struct.update(attributes)
    response = generation_pb2.GenerateResponse(
        request_id=request_id, prefill_ready=generation_pb2.PrefillReady(kv_session=session)
    )
    if usage is not None:
        response.usage.CopyFrom(usage)
    return response


__all__ = ["disaggregated_params_from_request", "prefill_ready_response"]
