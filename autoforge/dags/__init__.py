"""Stage 3: tool graphs, random walks, merged sequences, reasoning nodes and task DAGs (paper Sec. 3.2)."""

from autoforge.dags.build import DagError, DagKnobs, build_dag, build_dags, dag_depth, topo_order, validate_dag
from autoforge.dags.graph import build_graph, build_graphs, to_networkx
from autoforge.dags.reasoning import OPS, ReasoningError, apply_op
from autoforge.dags.sample import SampleResult, sample_env
from autoforge.dags.sequences import merge_pair, merge_sequences, random_walks, sample_sequences

__all__ = ["DagError", "DagKnobs", "OPS", "ReasoningError", "apply_op", "build_dag", "build_dags", "build_graph",
           "build_graphs", "dag_depth", "merge_pair", "merge_sequences", "random_walks", "SampleResult", "sample_env", "sample_sequences", "to_networkx",
           "topo_order", "validate_dag"]
