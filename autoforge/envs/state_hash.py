"""The state hash, version 2: a sum of per-record digests, so a call that changes k records costs 2k digests.

``h2:`` + sha256 of the sum, modulo 2**512, of one 512-bit blake2b digest per piece of the
state: a dict-valued entry (collection) ``name`` contributes ``["d", {name: null}]`` and one
``["r", {name: {key: record}}]`` per record, any other entry ``["v", {name: value}]``, each as
canonical JSON (sorted keys, no whitespace: :func:`autoforge.types.canonical_json`). A sum
does not depend on order, so equal states have equal hashes whatever their edit history, and
a call that changes k records updates it with 2k digests. :func:`autoforge.types.state_hash`
computes the same from a plain dict (tests/test_episode_state.py checks they agree).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

try:  # one C encoder made once (json.dumps builds one per call); the state holds JSON values only
    from json.encoder import c_make_encoder as _c_make_encoder
    from json.encoder import encode_basestring as quote

    _ENCODE = _c_make_encoder(None, None, quote, None, ":", ",", True, False, True)

    def canon(obj: Any) -> str:
        return "".join(_ENCODE(obj, 0))
except (ImportError, TypeError):  # pragma: no cover - no C accelerator
    canon = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode
    quote = json.encoder.py_encode_basestring

HASH_MOD = 1 << 512


def _digest(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=64).digest(), "big")


def record_digest(name: str, key: str, record: Any) -> int:
    """The digest of ``["r", {name: {key: record}}]`` (keys are strings here)."""
    return _digest('["r",{' + quote(name) + ":{" + quote(key) + ":" + canon(record) + "}}]")


def collection_digest(name: str) -> int:
    return _digest(canon(["d", {name: None}]))


def value_digest(name: str, value: Any) -> int:
    return _digest(canon(["v", {name: value}]))


def hash_text(total: int) -> str:
    return "h2:" + hashlib.sha256((total % HASH_MOD).to_bytes(64, "big")).hexdigest()
