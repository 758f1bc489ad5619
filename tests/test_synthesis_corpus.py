"""Every bundled domain synthesizes offline with >= 90% of its tools accepted (issue 3, "Done
when"), and every accepted tool runs in the sandbox on the environment's sample state."""

from __future__ import annotations

import pytest

from autoforge.envs.runtime import Environment
from autoforge.envs.smoke import smoke_arguments
from autoforge.envs.synthesis import synthesize_environment, toolset_specs
from autoforge.tooldocs.ingest import ingest_bundled

CORPUS = ingest_bundled()
DOMAINS = sorted(t.name for t in CORPUS.toolsets)


def test_the_corpus_has_ten_or_more_domains():
    assert len(DOMAINS) >= 10 and not CORPUS.errors


@pytest.mark.parametrize("domain", DOMAINS)
def test_domain_synthesizes_and_every_accepted_tool_runs_in_the_sandbox(domain):
    toolset = next(t for t in CORPUS.toolsets if t.name == domain)
    specs = toolset_specs(toolset, CORPUS.specs)
    res = synthesize_environment(toolset, specs)
    env = res.environment
    rate = env.n_tools_accepted / env.n_tools
    print(f"{domain}: {env.n_tools_accepted}/{env.n_tools} accepted ({rate:.0%})")
    assert rate >= 0.9, {t.name: t.reason for t in res.tools if t.status == "rejected"}
    assert len(res.rejections) == env.n_tools - env.n_tools_accepted
    schema = env.state_schema
    assert all(env.sample_state[c.name] for c in schema.collections)  # sample records in every collection
    kinds = {t.kind for t in res.accepted}
    assert {"get", "list"} & kinds and len(kinds) >= 4  # templates, not one generic fallback
    by_spec = {s.tool_id: s for s in specs}
    with Environment(res.tools, timeout_s=5) as rt:
        rt.reset(env.sample_state)
        start = rt.state_hash()
        for tool in res.accepted:
            rt.reset(env.sample_state)
            args = smoke_arguments(by_spec[tool.tool_id], env.sample_state, schema, tool.collection, tool.kind)
            obs = rt.call(tool.name, args)
            assert obs.kind in ("ok", "tool_error"), (tool.name, args, obs)
            if obs.kind == "tool_error":
                assert isinstance(obs.output["error"], str) and obs.output["error"]
            if tool.effect == "read" or obs.kind == "tool_error":
                assert rt.state_hash() == start, f"{tool.name} ({tool.effect}, {obs.kind}) changed the state"
