"""Python syntax trees from several threads at once, one conversion at a time.

CPython 3.11 converts between its internal syntax trees and Python ``ast`` objects with one
recursion counter per interpreter, and a thread switch can happen in the middle (the garbage
collector running a finalizer is enough): two threads parsing, compiling a tree or
``literal_eval``-ing at once can fail with "SystemError: AST constructor recursion depth
mismatch" (CPython gh-106905 and the reports around it). AutoForge parses tool code in episode
threads (``eval --concurrency``, exports' gold runs, MCP sessions) and Prefect's thread task
runner, so every such conversion goes through the one lock here (they are short, and checked tool
code is remembered: the lock costs nothing measurable).
"""

from __future__ import annotations

import ast
import threading
import types
from typing import Any

_LOCK = threading.Lock()


def parse(source: str, filename: str = "<unknown>", mode: str = "exec") -> ast.AST:
    """``ast.parse``, one thread at a time."""
    with _LOCK:
        return ast.parse(source, filename=filename, mode=mode)


def compile_tree(tree: ast.AST, filename: str, mode: str = "exec") -> types.CodeType:
    """``compile`` of a syntax tree (``dont_inherit``), one thread at a time."""
    with _LOCK:
        return compile(tree, filename, mode, dont_inherit=True)


def literal_eval(text: str) -> Any:
    """``ast.literal_eval`` of a string, one thread at a time."""
    with _LOCK:
        return ast.literal_eval(text)
