"""Offline tool code: one Python function per tool, written from templates (one module per concern).

Paper (arXiv 2512.22857, Sec. 3.1): an LLM writes each tool's code over the state S. The
offline backend writes the same kind of code from templates chosen by the tool's verb,
parameters, effect and output schema (:func:`autoforge.domain.tools.analyze_tool`):

========  ===========================================================================
lookup    ``find_user_id_by_email``: match records by one or more fields -> id or record
get       ``get_order``: record by id
list      ``list_orders`` / ``search_products``: equality, ranges (``min_``/``max_``),
          substrings (``name_contains``, ``query``), id lists, ``limit``/``offset``
create    ``create_order``: new id from ``next_id``, defaults, reference checks, unique
          email/username, derived totals (price x quantity), stock/seat decrements
update    ``update_order_address``: set given fields; status preconditions from the docs
status    ``cancel_order`` / ``approve_request``: move to a target status from allowed ones
delete    ``delete_product``
link      ``assign_ticket_to_agent`` (set a reference) / ``add_item_to_cart`` (append)
unlink    the inverse of link
amount    ``transfer_funds`` / ``deposit`` / ``withdraw`` / ``adjust_stock`` with
          insufficient-funds and non-negative preconditions
generic   anything else: behaves as get/list (read) or update/create (write)
========  ===========================================================================

The output is real Python source. It goes through exactly the checks and the sandbox that
LLM code goes through (:mod:`autoforge.envs.checks`): no imports, no names starting with
``_``, only the injected helpers ``NOW``, ``TODAY``, ``next_id`` and ``copy``. A failed
precondition returns ``{"error": ...}``; nothing raises on purpose.

Modules: :mod:`~autoforge.envs.code.base` (the draft record, the source emitter, record schemas),
:mod:`~autoforge.envs.code.context` (what one template knows about its tool: parameters, Python
names, the collection, the rules), :mod:`~autoforge.envs.code.reads` (lookup, get, list),
:mod:`~autoforge.envs.code.writes` (create, update, status, delete),
:mod:`~autoforge.envs.code.links` (link, unlink, amount), :mod:`~autoforge.envs.code.offline`
(the template registry and :func:`~autoforge.envs.code.offline.offline_tool_code`) and
:mod:`~autoforge.envs.code.compute` (real code for computation tools).
"""
