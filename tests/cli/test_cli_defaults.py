"""Every command-line default is written once: where the setting lives (a config dataclass, a function).

A flag that fills a field of ServerConfig, HTTPLimits, SamplingDefaults, ToolSettings,
PythonLimits, BenchConfig, or a parameter of ``build_bundle``, by the same name (or by a name
listed in :data:`RENAMED`), must default to that field's default; a help text that states a
default must state that one. The fields are found by name, so a flag added later is checked
without a line here; a copied literal that drifts fails.
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import re
from typing import Any

import pytest

from trtllm_responses.cli.bench import BenchConfig
from trtllm_responses.cli.build import build_bundle
from trtllm_responses.cli.command import build_parser
from trtllm_responses.cli.launch import DEFAULT_FREE_GPU_MEMORY_FRACTION
from trtllm_responses.executors import EchoExecutor
from trtllm_responses.responses import BackgroundLimits, SamplingDefaults
from trtllm_responses.server import HTTPLimits, ServerConfig
from trtllm_responses.tools import PythonLimits, ToolSettings


def _fields(instance: Any) -> dict[str, Any]:
    return {f.name: getattr(instance, f.name) for f in dataclasses.fields(instance)}


#: Where serve's flags' defaults live, searched in this order by the flag's name.
SERVE_SOURCES = [
    _fields(ServerConfig()),
    _fields(HTTPLimits()),
    _fields(SamplingDefaults()),
    _fields(ToolSettings()),
]

#: Flags named otherwise than their field: flag → the default it must have.
RENAMED: dict[str, Any] = {
    "python_timeout": PythonLimits().timeout,
    "python_memory_mb": PythonLimits().memory_bytes >> 20,
    "tool_server": ToolSettings().tool_servers,
    "echo_tokens_per_second": inspect.signature(EchoExecutor).parameters["tokens_per_second"].default,
    "body_json": BenchConfig().extra_body,
}


#: Flags whose unset default (None) is worked out when the flags are read; the result is checked below.
WORKED_OUT = {"served_model_name", "duration"}


def _subparser(name: str) -> argparse.ArgumentParser:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[name]


def _flags(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {a.dest: a for a in parser._actions if a.option_strings and a.dest != "help"}


def _same(flag_default: Any, field_default: Any) -> bool:
    if isinstance(flag_default, list):  # argparse's list for a field's tuple
        flag_default = tuple(flag_default)
    return type(flag_default) is type(field_default) and flag_default == field_default


def _counterparts(command: str) -> dict[str, Any]:
    """Each flag of ``command`` that has a counterpart → that counterpart's default."""
    if command == "serve":
        sources = SERVE_SOURCES
    elif command == "bench":
        sources = [_fields(BenchConfig())]
    else:
        sources = [{name: p.default for name, p in inspect.signature(build_bundle).parameters.items()}]
    found = {}
    for dest in _flags(_subparser(command)):
        if dest in WORKED_OUT:
            continue
        if dest in RENAMED:
            found[dest] = RENAMED[dest]
            continue
        for source in sources:
            if dest in source:
                found[dest] = source[dest]
                break
    return found


def test_serve_flags_have_their_counterparts() -> None:
    """The table finds the settings serve fills (so the checks below are not vacuous)."""
    assert len(_counterparts("serve")) >= 35
    assert set(_counterparts("serve")) >= {"host", "port", "store", "tool_timeout", "python_memory_mb"}


@pytest.mark.parametrize("command", ["serve", "build", "bench"])
def test_each_flag_defaults_to_its_counterpart(command: str) -> None:
    flags = _flags(_subparser(command))
    counterparts = _counterparts(command)
    assert counterparts, command
    drifted = {
        dest: (flags[dest].default, default)
        for dest, default in counterparts.items()
        if not _same(flags[dest].default, default)
    }
    assert drifted == {}


def _stated(default: Any) -> str:
    if isinstance(default, float):
        return f"{default:g}"
    if isinstance(default, (list, tuple)) and not default:
        return "none"
    return str(default)


@pytest.mark.parametrize("command", ["serve", "build", "bench"])
def test_a_help_text_states_the_default_the_flag_has(command: str) -> None:
    parser = _subparser(command)
    wrong = {}
    for dest, action in _flags(parser).items():
        text = parser._get_formatter()._expand_help(action) if action.help else ""
        match = re.search(r"\(default: ([^;,)]+)", text)
        if match is None or action.default is None or isinstance(action.default, bool):
            continue  # an unset default, or a switch, is stated in words
        if dest not in _counterparts(command):
            continue
        stated = match.group(1).split(" ")[0].rstrip("/")
        if stated != _stated(action.default):
            wrong[dest] = (stated, action.default)
    assert wrong == {}


def test_defaults_worked_out_from_unset_flags_are_the_counterparts() -> None:
    from trtllm_responses.cli.bench import config_from_args
    from trtllm_responses.cli.serve_options import server_config

    config = server_config(build_parser().parse_args(["serve"]))
    assert config.served_model_name == ServerConfig().served_model_name
    assert config_from_args(build_parser().parse_args(["bench"])).duration == BenchConfig().duration


def test_settings_written_in_two_dataclasses_agree() -> None:
    assert ServerConfig().background_grace == BackgroundLimits().grace
    assert PythonLimits().output_bytes == ToolSettings().tool_output_max_bytes


def test_the_kv_cache_fraction_help_states_the_launch_default() -> None:
    help_text = _flags(_subparser("serve"))["kv_cache_free_gpu_memory_fraction"].help or ""
    assert f"(default: {DEFAULT_FREE_GPU_MEMORY_FRACTION:g})" in help_text
