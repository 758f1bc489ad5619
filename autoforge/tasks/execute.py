"""Execute a task DAG in topological order inside an environment.

Paper (arXiv 2512.22857, Sec. 3.3, "tool-sequence execution"): concrete arguments are filled
for every tool node (from the intent and the reasoning edges) and G_k is executed in
topological order on S_k, giving the gold final state S*_k. The same function replays a gold
DAG for verification (facts fixed) and runs it during generation (missing facts chosen by a
``chooser`` callback that looks at the live state). A call the rule engine refuses (a runtime
rule, ``Observation.rule_id``) fails the run with reason ``policy_rule``, whose detail starts with
the rule's id: a gold trajectory keeps every rule.

Environments come from an ``env_factory(tools) -> env`` with the runtime's interface
(``reset(state)``, ``call(name, arguments) -> Observation``, ``get_state()``); the default is
:class:`autoforge.envs.runtime.Environment` (the sandbox).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from autoforge.dags.build import topo_order
from autoforge.dags.reasoning import ReasoningError, apply_op
from autoforge.envs.interface import EnvLike
from autoforge.errors import AutoforgeError
from autoforge.types import DagNode, TaskDag, ToolCall


class DagExecutionError(AutoforgeError):
    """A DAG could not run to the end; ``reason`` is a short category for the funnel."""

    def __init__(self, reason: str, detail: str, node: str | None = None, rule_id: str | None = None,
                 call: tuple[str, dict] | None = None):
        super().__init__(f"{reason} at {node or '?'}: {detail}")
        self.reason, self.detail, self.node = reason, detail, node
        self.rule_id = rule_id  # reason policy_rule: the rule the gold broke
        self.call = call  # reason policy_rule: (tool, arguments) of the refused call


# chooser(node, arg_name, resolved_args, env) -> value of a user fact not fixed yet
Chooser = Callable[[DagNode, str, dict[str, Any], EnvLike], Any]


@dataclass
class DagRun:
    calls: list[ToolCall]
    outputs: dict[str, Any]
    final_state: dict
    facts: dict[str, Any]
    args: dict[str, dict[str, Any]] = field(default_factory=dict)  # node id -> resolved arguments


def resolve_path(obj: Any, path: str | None, *, node: str | None = None) -> Any:
    """``path`` ("user_id", "orders", "a.b") inside a node output; None/"" means the whole output."""
    if not path:
        return obj
    cur = obj
    for part in path.split("."):
        if isinstance(cur, dict) and part in cur:
            cur = cur[part]
        elif isinstance(cur, list) and part.isdigit() and int(part) < len(cur):
            cur = cur[int(part)]
        else:
            raise DagExecutionError("bad_path", f"output has no {path!r} (stopped at {part!r})", node)
    return cur


def observation_error(obs: Any) -> str | None:
    """The error of an Observation, or None when the call succeeded."""
    if not getattr(obs, "ok", False):
        return str(getattr(obs, "error", None) or getattr(obs, "output", None) or "call failed")
    out = getattr(obs, "output", None)
    if isinstance(out, dict) and set(out) == {"error"}:
        return str(out["error"])
    return None


def sourced_args(node: DagNode, outputs: dict[str, Any]) -> dict[str, Any]:
    """``node``'s arguments that come from earlier outputs and constants (the user's facts are not here)."""
    args: dict[str, Any] = {}
    for name, src in node.args.items():
        if src.kind == "node":
            if src.node not in outputs:
                raise DagExecutionError("unsourced_argument", f"{name} reads {src.node}, which has not run", node.node_id)
            args[name] = resolve_path(outputs[src.node], src.path, node=node.node_id)
        elif src.kind == "const":
            args[name] = src.value
    return args


def run_dag(env: EnvLike, dag: TaskDag, initial_state: dict, facts: dict[str, Any], *,
            chooser: Chooser | None = None, trace: list[dict] | None = None, want_state: bool = True) -> DagRun:
    """Run ``dag`` on a reset copy of ``initial_state``. ``facts`` is filled in place by ``chooser``.
    ``trace``: the state after the reset and after each tool call are appended to it (verify reads
    the states around each gold call from the replay instead of replaying the calls once more); its
    last one is the run's final state. ``want_state=False``: the final state is not fetched (``{}``;
    a caller that asks the environment for its state hash instead)."""
    env.reset(initial_state)
    if trace is not None:
        trace.append(env.get_state())
    outputs: dict[str, Any] = {}
    calls: list[ToolCall] = []
    resolved: dict[str, dict[str, Any]] = {}
    for node in topo_order(dag):
        args = sourced_args(node, outputs)
        for name, src in sorted(node.args.items()):
            if src.kind != "user":
                continue
            if src.fact not in facts:
                if chooser is None:
                    raise DagExecutionError("missing_fact", f"user fact {src.fact!r} is not known", node.node_id)
                facts[src.fact] = chooser(node, name, args, env)
            args[name] = facts[src.fact]
        resolved[node.node_id] = args
        if node.kind == "tool":
            obs = env.call(node.tool, args)
            err = observation_error(obs)
            rid = getattr(obs, "rule_id", None)
            if rid:  # the rule engine refused it: a gold run keeps every rule (issue 33)
                raise DagExecutionError("policy_rule", f"rule {rid}: {node.tool}({args}) was refused: {err}",
                                        node.node_id, rule_id=rid, call=(node.tool, dict(args)))
            if err is not None:
                raise DagExecutionError("gold_call_error", f"{node.tool}({args}) failed: {err}", node.node_id)
            outputs[node.node_id] = obs.output
            calls.append(ToolCall(name=node.tool, arguments=args, id=node.node_id))
            if trace is not None:
                trace.append(env.get_state())
        else:
            try:
                outputs[node.node_id] = apply_op(node.op, args, node.params)
            except ReasoningError as exc:
                raise DagExecutionError("ambiguous_reasoning", str(exc), node.node_id) from exc
    final = trace[-1] if trace is not None else env.get_state() if want_state else {}
    return DagRun(calls=calls, outputs=outputs, final_state=final, facts=facts, args=resolved)


def run_calls(env: EnvLike, initial_state: dict, calls: list[ToolCall]) -> dict:
    """Replay plain tool calls (errors are observations, not exceptions); return the final state."""
    env.reset(initial_state)
    for c in calls:
        env.call(c.name, dict(c.arguments))
    return env.get_state()
